"""How the shell reports writes back: the core applies its decisions as written, and adopts the
store's state when a compare-and-set fails."""

import dataclasses

from kio.schema.errors import ErrorCode

from weir.zk.model import NO_LEADER

from .cluster import brokers, make_core, state, written


def test_decisions_build_on_each_other_before_they_are_confirmed():
    core = make_core([1, 2, 3], {"t": {0: (1, 2, 3)}})
    first = core.on_brokers_changed(brokers(2, 3))
    second = core.on_brokers_changed(brokers(3))
    assert core.has_unconfirmed_writes
    assert second[0].old == first[0].new
    assert second[0].expected_version == first[0].new.partition_epoch == 1
    written(core, first + second)
    assert not core.has_unconfirmed_writes
    assert (state(core).leader, state(core).partition_epoch) == (3, 2)


def test_write_conflict_adopts_the_stored_state_and_decides_again():
    core = make_core([1, 2, 3], {"t": {0: (1, 2, 3)}})
    [change] = core.on_brokers_changed(brokers(2, 3))
    # Someone else (say, an older controller not yet fenced) wrote first: leader 1, ISR {1, 2}.
    stored = dataclasses.replace(change.old, isr=(1, 2), partition_epoch=1)
    [again] = core.on_write_conflict(change, stored)
    assert again.old == stored and again.expected_version == 1
    assert (again.new.leader, again.new.isr, again.new.partition_epoch) == (2, (2,), 2)
    written(core, [again])
    assert not core.has_unconfirmed_writes


def test_write_conflict_with_nothing_left_to_decide():
    core = make_core([1, 2, 3], {"t": {0: (1, 2, 3)}})
    change = core.on_alter_partition("t", 0, 1, 0, 0, [1, 2]).change
    stored = dataclasses.replace(change.new)  # the same state is already there
    assert core.on_write_conflict(change, stored) == []
    assert state(core) == stored


def test_write_conflict_on_a_deleted_partition():
    core = make_core([1, 2], {"t": {0: (1, 2)}})
    [change] = core.on_brokers_changed(brokers(2))
    assert core.on_write_conflict(change, None) == []
    assert ("t", 0) not in core.view.states


def test_topic_deletion_lists_partitions_and_replicas_to_tell():
    core = make_core([1, 2], {"t": {0: (1, 2), 1: (2, 1)}, "u": {0: (1,)}})
    deletion = core.on_topic_deleted("t")
    assert deletion.partitions == {0: (1, 2), 1: (2, 1)}
    assert set(core.view.states) == {("u", 0)}
    assert core.on_alter_partition("t", 0, 1, 0, 0, [1]).error is ErrorCode.unknown_topic_or_partition
    assert core.on_topic_deleted("t").partitions == {}


def test_partitions_added_get_initial_states():
    core = make_core([1, 2, 3], {"t": {0: (1, 2)}})
    changes = written(core, core.on_partitions_added("t", {1: (2, 3), 2: (3, 1)}))
    assert [(c.partition, c.new.leader, c.new.isr, c.old) for c in changes] == \
        [(1, 2, (2, 3), None), (2, 3, (3, 1), None)]
    assert core.view.topics["t"].partition_count == 3
    assert state(core, "t", 2).leader != NO_LEADER
