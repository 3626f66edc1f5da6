"""The controller's event handlers (weir/controller/events.py), driven as both shells drive them:
each store operation they yield is carried out against a store held here, failures thrown in.
The same handlers run against real ZooKeeper in tests/coordination/test_controller_writes.py and
under simulated faults in `weir sim`."""

import asyncio
import dataclasses
import uuid

import pytest

from weir.controller import ControllerConfig
from weir.controller.events import (READ_AGAIN, ControllerEvents, CreateStates, ReadCluster, ReadShutdownRequests,
                                    ReadStates, WriteAssignments, WriteStates, run_handler)
from weir.coordination.zk_metadata import ControllerFenced, PartitionWriteResult
from weir.protocol.errors import ErrorCode
from weir.zk.model import ClusterView, PartitionState, TopicAssignment

from .cluster import brokers

KEY = ("t", 0)
SHRINK = ("t", 0, 0, 0, (1, 2), None)  # leader 1 at leader epoch 0, partition epoch 0: drop 3


class ConnectionLost(Exception):
    """No answer: the operation may or may not have taken effect."""


class Store:
    """Partition states with versions; `fail_next` makes the next write lose its answer (after
    taking effect if `lands`), `fence` makes writes fail as a newer controller's epoch would."""

    def __init__(self, topics: dict[str, dict[int, tuple[int, ...]]], live=(1, 2, 3), epochs=None) -> None:
        self.topics = {name: TopicAssignment(name, uuid.uuid4(), replicas) for name, replicas in topics.items()}
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.zxids: dict[tuple[str, int], int] = {}
        self.live, self.epochs = live, epochs or {b: 1 for b in live}
        self.fail_next = self.lands = self.fence = False
        self.ops: list = []
        self.shutdown_requests: list[str] | None = []  # None: the read fails

    def view(self) -> ClusterView:
        return ClusterView(brokers=brokers(*self.live), broker_epochs=dict(self.epochs), topics=dict(self.topics),
                           topic_configs={name: {} for name in self.topics}, states=dict(self.states),
                           state_zxids=dict(self.zxids))

    def _write(self, key, expected, new):
        if expected != (self.states[key].partition_epoch if key in self.states else None):
            return False
        self.states[key] = new
        self.zxids[key] = max(self.zxids.values(), default=0) + 1
        return True

    def execute(self, op):
        self.ops.append(type(op).__name__)
        if isinstance(op, ReadCluster):
            return self.view()
        if isinstance(op, ReadStates):
            return {key: self.states.get(key) for key in op.keys}
        if isinstance(op, ReadShutdownRequests):
            if self.shutdown_requests is None:
                raise ConnectionLost()
            return self.shutdown_requests
        if self.fence:
            raise ControllerFenced("a newer controller")
        if self.fail_next:
            self.fail_next = False
            if self.lands:
                self.execute(op)
            raise ConnectionLost()
        if isinstance(op, CreateStates):
            return {p: s for p, s in op.states.items() if self._write((op.topic, p), None, s)}
        if isinstance(op, WriteAssignments):
            self.topics.update((a.name, a) for a in op.assignments)
            return None
        assert isinstance(op, WriteStates)
        return [PartitionWriteResult(t, p, state=new) if self._write((t, p), expected, new) else
                PartitionWriteResult(t, p, error="conflict", current=self.states.get((t, p)))
                for t, p, expected, new in op.changes]


def drive(store: Store, handler):
    """What ControllerService does with a handler, against the store here."""
    async def execute(op):
        return store.execute(op)
    return asyncio.run(run_handler(handler, execute))


def elected(store: Store) -> ControllerEvents:
    events = ControllerEvents(1, ControllerConfig(auto_leader_rebalance_enable=False))
    drive(store, events.elected(1))
    return events


def test_a_new_controller_creates_the_states_a_previous_one_left_uncreated():
    store = Store({"t": {0: (1, 2, 3), 1: (2, 3, 1)}})
    events = elected(store)
    assert {key: (s.leader, s.isr) for key, s in store.states.items()} == {
        ("t", 0): (1, (1, 2, 3)), ("t", 1): (2, (2, 3, 1))}
    assert events.core.view.states == store.states and not events.core.unconfirmed_keys


@pytest.mark.parametrize("lands", [False, True])
def test_a_write_without_an_answer_is_read_back_before_the_next_answer(lands):
    store = Store({"t": {0: (1, 2, 3)}})
    events = elected(store)
    store.fail_next, store.lands = True, lands
    with pytest.raises(ConnectionLost):
        drive(store, events.handle("alter_partition", 1, -1, [SHRINK]))
    assert events.core.unconfirmed_keys == [KEY]
    store.ops.clear()

    error, answers = drive(store, events.handle("alter_partition", 1, -1, [SHRINK]))
    assert store.ops[0] == "ReadStates"  # before anything is decided or answered
    assert error == ErrorCode.none and answers[KEY][0] == ErrorCode.none
    assert answers[KEY][1] == store.states[KEY] == events.core.view.states[KEY]
    assert (store.states[KEY].isr, store.states[KEY].partition_epoch) == ((1, 2), 1)


def test_an_alter_partition_from_a_previous_incarnation_changes_nothing():
    store = Store({"t": {0: (1, 2, 3)}}, epochs={1: 7, 2: 5, 3: 5})
    events = elected(store)
    before = dict(store.states)
    error, answers = drive(store, events.handle("alter_partition", 1, 6, [SHRINK]))
    assert (error, answers, store.states) == (ErrorCode.stale_broker_epoch, {}, before)


def test_a_conflicting_write_adopts_the_stored_state_and_answers_from_it():
    store = Store({"t": {0: (1, 2, 3)}})
    events = elected(store)
    # A deposed controller, not yet fenced, moved the state on behind this one's back.
    store.states[KEY] = dataclasses.replace(store.states[KEY], isr=(1, 3), partition_epoch=1)
    error, answers = drive(store, events.handle("alter_partition", 1, -1, [SHRINK]))
    assert answers[KEY] == (ErrorCode.invalid_update_version, None)
    assert events.core.view.states[KEY] == store.states[KEY]


def test_a_fenced_write_ends_the_event_with_the_fence():
    store = Store({"t": {0: (1, 2, 3)}})
    events = elected(store)
    store.fence = True
    with pytest.raises(ControllerFenced):
        drive(store, events.handle("alter_partition", 1, -1, [SHRINK]))


def test_a_broker_registered_after_its_states_is_treated_as_bounced():
    store = Store({"t": {0: (1, 2, 3)}})
    elected(store)
    store.epochs = {1: 1, 2: 1, 3: max(store.zxids.values()) + 10}  # broker 3 came back since
    events = ControllerEvents(2, ControllerConfig(auto_leader_rebalance_enable=False))
    written = drive(store, events.elected(2))
    assert KEY in written and (store.states[KEY].isr, store.states[KEY].partition_epoch) == ((1, 2), 1)


def test_a_dynamic_unclean_election_default_revives_offline_partitions():
    """unclean.leader.election.enable changed for the whole cluster (a dynamic broker config):
    the controller takes it at once, as Kafka's enableDefaultUncleanLeaderElection."""
    store = Store({"t": {0: (1, 2, 3)}}, live=(1, 2, 3))
    events = elected(store)
    drive(store, events.handle("alter_partition", 1, -1, [("t", 0, 0, 0, (1,), None)]))  # 2 and 3 fell behind
    store.live = (2, 3)
    drive(store, events.handle("metadata"))  # the only ISR member dies: offline
    assert store.states[KEY].leader == -1
    drive(store, events.handle("controller_config", ControllerConfig(unclean_leader_election_enable=True)))
    assert store.states[KEY].leader in (2, 3)


def test_the_brokers_asking_for_controlled_shutdown_are_those_not_shutting_down_yet():
    store = Store({"t": {0: (1, 2, 3)}})
    events = elected(store)
    store.shutdown_requests = ["3", "2", "lock"]  # not a broker id: left alone
    assert drive(store, events.shutdown_requests()) == [2, 3]
    drive(store, events.handle("controlled_shutdown", 2))
    assert drive(store, events.shutdown_requests()) == [3]
    store.shutdown_requests = None  # the read armed no watch: the shell reads again later
    assert drive(store, events.shutdown_requests()) == READ_AGAIN
