"""Rule 8: controlled shutdown moves leadership off the broker and takes it out of ISRs."""

from kio.schema.errors import ErrorCode

from weir.controller import ElectionType
from weir.zk.model import NO_LEADER

from .cluster import keep_only, make_core, state, written


def test_controlled_shutdown_moves_leadership_off_the_broker():
    core = make_core([1, 2, 3], {"t": {0: (1, 2, 3), 1: (2, 1, 3), 2: (3, 2, 1)}})
    outcome = core.on_controlled_shutdown(1)
    written(core, outcome.changes)
    assert outcome.error is ErrorCode.none and outcome.remaining == []
    assert {c.reason for c in outcome.changes} == {"controlled_shutdown"}
    assert (state(core, "t", 0).leader, state(core, "t", 0).isr, state(core, "t", 0).leader_epoch) == (2, (2, 3), 1)
    # Where it follows it leaves the ISR; the leader epoch stays.
    assert (state(core, "t", 1).leader, state(core, "t", 1).isr, state(core, "t", 1).leader_epoch) == (2, (2, 3), 0)
    assert (state(core, "t", 2).leader, state(core, "t", 2).isr) == (3, (3, 2))


def test_controlled_shutdown_keeps_partitions_where_it_is_the_only_isr_member():
    core = make_core([1, 2], {"t": {0: (1, 2), 1: (1, 2)}})
    written(core, [core.on_alter_partition("t", 0, 1, 0, 0, [1]).change])
    outcome = core.on_controlled_shutdown(1)
    written(core, outcome.changes)
    assert outcome.remaining == [("t", 0)]
    assert (state(core, "t", 0).leader, state(core, "t", 0).isr) == (1, (1,))
    assert state(core, "t", 1).leader == 2
    # Later events do not take the partition from it either, nor make it leader elsewhere.
    assert keep_only(core, 1, 2) == []
    assert core.elect_leaders(ElectionType.PREFERRED, [("t", 1)]).results == \
        {("t", 1): ErrorCode.preferred_leader_not_available}


def test_a_replica_that_catches_up_with_a_shutting_down_leader_takes_over_at_once():
    """The broker does not ask again: the ISR change that makes a hand-over possible makes it
    (KRaft's PartitionChangeBuilder elects whenever the leader is not acceptable)."""
    core = make_core([1, 2, 3], {"t": {0: (1, 2, 3)}})
    written(core, [core.on_alter_partition("t", 0, 1, 0, 0, [1]).change])
    assert written(core, core.on_controlled_shutdown(1).changes) == []
    outcome = core.on_alter_partition("t", 0, 1, 0, 1, [1, 3])
    written(core, [outcome.change])
    assert outcome.error is ErrorCode.none and outcome.change.reason == "controlled_shutdown"
    assert (outcome.state.leader, outcome.state.isr, outcome.state.leader_epoch) == (3, (3,), 1)
    assert state(core) == outcome.state and state(core).partition_epoch == 2
    retry = core.on_controlled_shutdown(1)
    assert retry.changes == [] and retry.remaining == []


def test_shutting_down_broker_is_not_elected_when_others_fail():
    core = make_core([1, 2, 3], {"t": {0: (3, 1, 2)}})
    written(core, core.on_controlled_shutdown(1).changes)
    keep_only(core, 1, 2)
    assert state(core).leader == 2


def test_controlled_shutdown_ends_with_the_session_or_a_new_registration():
    core = make_core([1, 2], {"t": {0: (1, 2)}})
    written(core, core.on_controlled_shutdown(1).changes)
    assert core.shutting_down == {1}
    keep_only(core, 1, 2, bounced=[1])
    assert core.shutting_down == set()
    written(core, core.on_controlled_shutdown(1).changes)
    keep_only(core, 2)
    assert core.shutting_down == set()


def test_controlled_shutdown_of_an_unknown_broker():
    core = make_core([1], {})
    assert core.on_controlled_shutdown(7).error is ErrorCode.broker_not_available


def test_offline_partition_is_not_revived_by_a_shutting_down_replica_uncleanly():
    core = make_core([1, 2], {"t": {0: (1, 2)}}, configs={"t": {"unclean.leader.election.enable": "true"}})
    written(core, [core.on_alter_partition("t", 0, 1, 0, 0, [1]).change])
    written(core, core.on_controlled_shutdown(2).changes)
    keep_only(core, 2)
    assert state(core).leader == NO_LEADER
