"""Partition reassignment (KIP-455) as the controller's handlers carry it out: replicas are added,
catch up, and only then does the partition leave its old replicas; the ISR and the leader never
point outside the assignment the store holds."""

import dataclasses

import pytest

from weir.protocol.errors import ErrorCode

from .test_events import ConnectionLost, Store, drive, elected

KEY = ("t", 0)
OK = (ErrorCode.none, None)


def reassign(store, events, targets, allow_replication_factor_change=True):
    return drive(store, events.handle("reassign", targets, allow_replication_factor_change))


def catch_up(store, events, isr):
    """The leader adds the new replicas to the ISR (AlterPartition)."""
    state = store.states[KEY]
    error, answers = drive(store, events.handle("alter_partition", state.leader, -1,
                                                [("t", 0, state.leader_epoch, state.partition_epoch, isr, None)]))
    assert error == ErrorCode.none and answers[KEY][0] == ErrorCode.none


def assignment(store):
    a = store.topics["t"]
    return a.replicas[0], a.adding.get(0, ()), a.removing.get(0, ())


def test_new_replicas_join_and_catch_up_before_the_old_ones_leave():
    store = Store({"t": {0: (1, 2)}}, live=(1, 2, 3))
    events = elected(store)
    assert reassign(store, events, {KEY: (2, 3)}) == {KEY: OK}
    assert assignment(store) == ((2, 3, 1), (3,), (1,))
    # 1 still leads, with the same ISR, in a new leadership for the new replica set
    assert (store.states[KEY].leader, store.states[KEY].leader_epoch, store.states[KEY].isr) == (1, 1, (1, 2))
    assert events.core.reassignment.reassignments() == {KEY: ((2, 3, 1), (3,), (1,))}

    store.ops.clear()
    catch_up(store, events, (1, 2, 3))
    state = store.states[KEY]
    # leadership moved to the target (epoch 2), then a new leadership for the target replicas (3)
    assert (state.leader, state.leader_epoch, state.isr) == (2, 3, (2, 3))
    assert assignment(store) == ((2, 3), (), ())
    # The ISR left replica 1 before the assignment did; the new leadership came after it.
    assert store.ops.count("WriteAssignments") == 1
    assert "WriteStates" in store.ops[:store.ops.index("WriteAssignments")]
    assert "WriteStates" in store.ops[store.ops.index("WriteAssignments"):]
    assert events.core.reassignment.reassignments() == {}


def test_a_leader_in_the_target_keeps_leading_and_only_the_isr_shrinks():
    store = Store({"t": {0: (1, 2)}}, live=(1, 2, 3))
    events = elected(store)
    reassign(store, events, {KEY: (1, 3)})
    catch_up(store, events, (1, 2, 3))
    state = store.states[KEY]
    assert (state.leader, state.leader_epoch, state.isr) == (1, 2, (1, 3))  # a new leadership per replica set
    assert assignment(store) == ((1, 3), (), ())


def test_cancelling_returns_to_the_original_replicas():
    store = Store({"t": {0: (1, 2)}}, live=(1, 2, 3))
    events = elected(store)
    reassign(store, events, {KEY: (3, 2)})
    assert reassign(store, events, {KEY: None}) == {KEY: OK}
    # Back to the original replicas, in the order the full set had them (as Kafka's revert does).
    assert assignment(store) == ((2, 1), (), ())
    assert reassign(store, events, {KEY: None}) == {KEY: (ErrorCode.no_reassignment_in_progress, None)}


def test_a_new_target_replaces_the_one_in_progress_and_its_replicas_leave_the_isr_first():
    store = Store({"t": {0: (1, 2)}}, live=(1, 2, 3, 4))
    events = elected(store)
    reassign(store, events, {KEY: (2, 3, 4)})
    catch_up(store, events, (1, 2, 3))  # 3 caught up, 4 not yet: still in progress
    assert assignment(store) == ((2, 3, 4, 1), (3, 4), (1,))
    store.ops.clear()
    assert reassign(store, events, {KEY: (2, 4)}) == {KEY: OK}
    assert store.ops.index("WriteStates") < store.ops.index("WriteAssignments")
    assert set(store.states[KEY].isr) == {1, 2}  # 3 left the ISR before the assignment dropped it
    assert assignment(store) == ((2, 4, 1), (4,), (1,))  # the original is still (1, 2)


@pytest.mark.parametrize("target, allow_change, message", [
    ((2, 2), True, "duplicates"), ((), True, "empty"), ((2, 9), True, "not registered"),
    ((1, 2, 3), False, "replication factor")])
def test_targets_kafka_refuses(target, allow_change, message):
    store = Store({"t": {0: (1, 2)}}, live=(1, 2, 3))
    events = elected(store)
    code, text = reassign(store, events, {KEY: target}, allow_change)[KEY]
    assert code == ErrorCode.invalid_replica_assignment and message in text
    assert assignment(store) == ((1, 2), (), ())


def test_only_the_replicas_a_move_adds_must_be_alive():
    """Kafka's KafkaController.validateReplicas: the adding replicas must be live brokers; a replica
    the partition already has may be kept while its broker is down (it catches up on return)."""
    store = Store({"t": {0: (1, 2)}}, live=(1, 2, 3))
    events = elected(store)
    store.live = (1, 3)
    drive(store, events.handle("metadata"))  # 2 dies
    assert reassign(store, events, {KEY: (1, 2, 4)})[KEY][0] == ErrorCode.invalid_replica_assignment  # 4: none
    assert assignment(store) == ((1, 2), (), ())
    assert reassign(store, events, {KEY: (1, 2, 3)}) == {KEY: OK}
    assert assignment(store) == ((1, 2, 3), (3,), ())
    catch_up(store, events, (1, 3))  # 2, still down, holds the move until it is back in sync
    assert assignment(store) == ((1, 2, 3), (3,), ())


def test_unknown_partitions_and_moves_that_would_need_an_unclean_election_are_refused():
    store = Store({"t": {0: (1, 2)}}, live=(1, 2, 3, 4))
    events = elected(store)
    results = reassign(store, events, {KEY: (3, 4), ("t", 1): (1, 2), ("u", 0): (1, 2)})
    assert results[("t", 1)] == results[("u", 0)] == (ErrorCode.unknown_topic_or_partition, None)
    assert results[KEY] == OK
    catch_up(store, events, (1, 2, 3))
    store.live = (3, 4)
    drive(store, events.handle("metadata"))  # 1 and 2 die: 3, caught up, leads
    assert (store.states[KEY].leader, store.states[KEY].isr) == (3, (3,))
    code, text = reassign(store, events, {KEY: None})[KEY]  # back to 1 and 2: none of them in sync
    assert code == ErrorCode.invalid_replica_assignment and "unclean" in text
    assert assignment(store) == ((3, 4, 1, 2), (3, 4), (1, 2))


def test_a_new_controller_finishes_a_reassignment_whose_target_caught_up():
    store = Store({"t": {0: (1, 2)}}, live=(1, 2, 3))
    events = elected(store)
    reassign(store, events, {KEY: (2, 3)})
    store.states[KEY] = dataclasses.replace(store.states[KEY], isr=(1, 2, 3), partition_epoch=1)
    elected(store)  # the previous controller died before it saw the ISR grow
    assert assignment(store) == ((2, 3), (), ())
    assert (store.states[KEY].leader, store.states[KEY].isr) == (2, (2, 3))


def test_an_assignment_write_without_an_answer_is_adopted_once_the_store_shows_it():
    store = Store({"t": {0: (1, 2)}}, live=(1, 2, 3))
    events = elected(store)
    store.fail_next, store.lands = True, True
    with pytest.raises(ConnectionLost):
        reassign(store, events, {KEY: (2, 3)})
    assert events.core.reassignment.reassignments() == {}  # not known to be written: not acted on
    drive(store, events.handle("metadata"))
    assert events.core.reassignment.reassignments() == {KEY: ((2, 3, 1), (3,), (1,))}


def test_a_new_controller_starts_each_move_in_progress_with_a_new_leadership():
    """The new leadership for the new replicas may have been lost with the previous controller:
    the leader would go on without the replicas being added, which could then never catch up."""
    store = Store({"t": {0: (1, 2)}}, live=(1, 2, 3))
    elected(store)
    epoch = store.states[KEY].leader_epoch
    # A move the previous controller wrote to the assignment, but not the leadership after it.
    store.topics["t"] = dataclasses.replace(store.topics["t"], replicas={0: (2, 3, 1)}, adding={0: (3,)},
                                            removing={0: (1,)})
    elected(store)
    assert (store.states[KEY].leader, store.states[KEY].leader_epoch) == (1, epoch + 1)
