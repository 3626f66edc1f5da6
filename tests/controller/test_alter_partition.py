"""Rule 5: AlterPartition, an ISR change proposed by the leader (KIP-497), fenced by both epochs."""

from kio.schema.errors import ErrorCode

from .cluster import keep_only, make_core, state, written


def three_replicas():
    return make_core([1, 2, 3], {"t": {0: (1, 2, 3)}})


def test_alter_partition_shrink_is_accepted_with_same_leader_epoch():
    core = three_replicas()
    outcome = core.on_alter_partition("t", 0, 1, 0, 0, frozenset({1, 3}))
    assert outcome.error is ErrorCode.none
    assert outcome.change.expected_version == 0
    assert (outcome.state.leader, outcome.state.leader_epoch, outcome.state.isr, outcome.state.partition_epoch) == \
        (1, 0, (1, 3), 1)
    assert outcome.change.new == outcome.state and outcome.change.notify == (1, 2, 3)
    written(core, [outcome.change])
    assert state(core) == outcome.state


def test_alter_partition_expansion_orders_isr_by_assignment():
    core = three_replicas()
    written(core, [core.on_alter_partition("t", 0, 1, 0, 0, [1]).change])
    outcome = core.on_alter_partition("t", 0, 1, 0, 1, frozenset({3, 1, 2}))
    assert outcome.state.isr == (1, 2, 3)


def test_alter_partition_fenced_by_leader_epoch():
    core = three_replicas()
    keep_only(core, 2, 3)  # leader 1 gone: 2 leads in epoch 1
    keep_only(core, 1, 2, 3)
    assert core.on_alter_partition("t", 0, 1, 0, 1, [1, 2]).error is ErrorCode.fenced_leader_epoch


def test_alter_partition_with_epochs_above_ours_says_we_are_not_the_controller():
    core = three_replicas()
    assert core.on_alter_partition("t", 0, 1, 1, 0, [1, 2]).error is ErrorCode.not_controller
    assert core.on_alter_partition("t", 0, 1, 0, 5, [1, 2]).error is ErrorCode.not_controller


def test_alter_partition_rejects_stale_partition_epoch():
    core = three_replicas()
    keep_only(core, 1, 2)  # the controller removed 3: partition epoch 1
    assert core.on_alter_partition("t", 0, 1, 0, 0, [1]).error is ErrorCode.invalid_update_version


def test_alter_partition_retry_of_an_applied_change_succeeds_with_current_state():
    core = three_replicas()
    first = core.on_alter_partition("t", 0, 1, 0, 0, [1, 2])
    written(core, [first.change])
    retry = core.on_alter_partition("t", 0, 1, 0, 0, [2, 1])  # the answer was lost: same request again
    assert retry.error is ErrorCode.none and retry.change is None and retry.state == first.state
    again = core.on_alter_partition("t", 0, 1, 0, 1, [1, 2])
    assert again.error is ErrorCode.none and again.change is None


def test_alter_partition_from_a_non_leader_is_an_invalid_request():
    core = three_replicas()
    assert core.on_alter_partition("t", 0, 2, 0, 0, [2, 3]).error is ErrorCode.invalid_request


def test_alter_partition_rejects_malformed_isr():
    core = three_replicas()
    for isr in ([], [2, 3], [1, 4], [1, 1, 2]):
        assert core.on_alter_partition("t", 0, 1, 0, 0, isr).error is ErrorCode.invalid_request, isr


def test_alter_partition_refuses_adding_a_dead_or_shutting_down_replica():
    core = make_core([1, 2, 3, 4], {"t": {0: (1, 2, 3, 4)}})
    written(core, [core.on_alter_partition("t", 0, 1, 0, 0, [1]).change])
    keep_only(core, 1, 2, 4)
    assert core.on_alter_partition("t", 0, 1, 0, 1, [1, 3]).error is ErrorCode.ineligible_replica
    written(core, core.on_controlled_shutdown(4).changes)
    assert core.on_alter_partition("t", 0, 1, 0, 1, [1, 4]).error is ErrorCode.ineligible_replica
    assert core.on_alter_partition("t", 0, 1, 0, 1, [1, 2]).error is ErrorCode.none


def test_alter_partition_unknown_partition():
    core = three_replicas()
    assert core.on_alter_partition("t", 1, 1, 0, 0, [1]).error is ErrorCode.unknown_topic_or_partition
    assert core.on_alter_partition("nope", 0, 1, 0, 0, [1]).error is ErrorCode.unknown_topic_or_partition


def test_alter_partition_refuses_adding_a_replica_seen_as_another_incarnation():
    """KIP-903: the leader says which incarnation (broker epoch) of a joining replica it saw
    fetching; if that is not the replica's current registration, it is not added."""
    core = three_replicas()
    core.view.broker_epochs = {1: 100, 2: 200, 3: 350}  # 3 registered again (it was 300)
    written(core, [core.on_alter_partition("t", 0, 1, 0, 0, [1, 2]).change])
    stale = core.on_alter_partition("t", 0, 1, 0, 1, [1, 2, 3], {1: -1, 2: 200, 3: 300})
    assert stale.error is ErrorCode.ineligible_replica and state(core).isr == (1, 2)
    current = core.on_alter_partition("t", 0, 1, 0, 1, [1, 2, 3], {1: -1, 2: 200, 3: 350})
    assert current.error is ErrorCode.none and current.state.isr == (1, 2, 3)
