"""What the controller does with each event, without I/O: the broker's ControllerService runs it
against ZooKeeper, the simulator against its model of ZooKeeper.

Every handler is a generator. It yields store operations (ReadCluster, ReadStates, CreateStates,
WriteStates, WriteAssignments, ReadShutdownRequests), is sent each one's result, and returns the
event's answer. A failed operation is thrown into it: ControllerFenced (a newer controller exists:
the shell resigns) or anything else (the outcome is unknown: the states it was writing stay
unconfirmed in the core, and the next event reads them back first, `_settle`). The shell runs one
handler to its end before the next, like Kafka's controller event thread: each decision builds on
the previous ones.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any

from weir.controller.decisions import ControllerConfig, ControllerCore, StateChange
from weir.controller.partition_change import ElectionType
from weir.controller.reassignment import Move
from weir.protocol.errors import ErrorCode
from weir.zk.model import ClusterView, PartitionState, TopicAssignment

log = logging.getLogger(__name__)

MAX_CONFLICT_ROUNDS = 10
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ReadCluster:
    """The cluster as the store shows it now → ClusterView (with broker epochs and state zxids)."""


@dataclass(frozen=True, slots=True)
class ReadStates:
    """→ {key: the stored PartitionState, None where there is none}."""
    keys: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class CreateStates:
    """Create the state znodes of new partitions, fenced → {partition: state created}; a partition
    whose znode exists already is missing from the answer."""
    topic: str
    states: dict[int, PartitionState]


@dataclass(frozen=True, slots=True)
class WriteStates:
    """Compare-and-set (topic, partition, expected version, new state) each, fenced →
    one PartitionWriteResult-like answer per change (`ok`, `state`, `current`)."""
    changes: tuple[tuple[str, int, int, PartitionState], ...]


@dataclass(frozen=True, slots=True)
class WriteAssignments:
    """Replace topics' assignment znodes (same partitions, other replicas), fenced; fails if one
    changed its partitions meanwhile → None."""
    assignments: tuple[TopicAssignment, ...]


@dataclass(frozen=True, slots=True)
class ReadShutdownRequests:
    """The brokers' controlled-shutdown requests (the children of CONTROLLED_SHUTDOWN_PATH),
    arming a watch for their next change → the children's names."""


Handler = Generator[Any, Any, Any]

READ_AGAIN = "read again"  # shutdown_requests' answer when its read failed
SHUTDOWN_REQUESTS_RETRY_MS = 1_000


async def run_handler(handler: Handler, execute: Callable[[Any], Awaitable[Any]]) -> Any:
    """Drive `handler` to its answer: `await execute(op)` for each store operation it yields, send
    back the result or throw in the failure. (The simulator does the same with callbacks.)"""
    result, error = None, None
    while True:
        try:
            op = handler.send(result) if error is None else handler.throw(error)
        except StopIteration as done:
            return done.value
        try:
            result, error = await execute(op), None
        except Exception as e:
            result, error = None, e


def registered_after_their_states(view: ClusterView) -> set[int]:
    """Live brokers whose registration is newer than a partition state naming them in the ISR (as
    leader or member). Such a state describes the broker's previous incarnation, which may have
    held records this one lost: a new controller, which never saw the registration change, must
    treat the broker as bounced (Kafka: broker epochs, KIP-380). This also makes it rewrite every
    state naming such a broker as leader, which is what lets the broker lead again: a broker takes
    no leadership from a state older than its own registration."""
    epochs = view.broker_epochs
    bounced = set()
    for key, state in view.states.items():
        zxid = view.state_zxids.get(key)
        if zxid is None:
            continue
        for b in state.isr:
            if b in view.brokers and b in epochs and epochs[b] > zxid:
                bounced.add(b)
    return bounced


class ControllerEvents:
    """The active controller's core and what it has been told, with a handler per event."""

    def __init__(self, broker_id: int, config: ControllerConfig,
                 on_written: Callable[[StateChange], None] = lambda change: None) -> None:
        """`on_written(change)`: after each state the store confirmed (the shells log it)."""
        self.broker_id = broker_id
        self.config = config
        self.on_written = on_written
        self.core: ControllerCore | None = None
        self._known: ClusterView | None = None  # the cluster as the core has been told of it

    def elected(self, epoch: int) -> Handler:
        """This broker has just won `epoch`: read the cluster, bring every partition in line with
        who is live, create the states of topics whose creation a previous controller left
        unfinished. Returns the states written."""
        view = yield ReadCluster()
        view.controller_id, view.controller_epoch = self.broker_id, epoch
        unfinished = [a for name, a in sorted(view.topics.items())
                      if any((name, p) not in view.states for p in a.replicas)]
        configs = {a.name: view.topic_configs.pop(a.name, {}) for a in unfinished}
        for a in unfinished:
            del view.topics[a.name]
        self.core = ControllerCore(view, self.config)
        self._known = view
        log.info("broker %d is now the controller (epoch %d)", self.broker_id, epoch)
        bounced = registered_after_their_states(view)
        if bounced:
            log.info("controller: brokers %s registered after states naming them in the ISR were written: "
                     "treating them as bounced", sorted(bounced))
            changes = self.core.on_brokers_changed(view.brokers, bounced)
        else:
            changes = self.core.reconcile()
        for a in unfinished:
            changes += self.core.on_topic_created(a, configs[a.name])
        written = yield from self._write(changes)
        yield from self._complete_reassignments()
        return written

    def resigned(self) -> None:
        self.core = self._known = None

    def shutdown_requests(self) -> Handler:
        """Read the controlled-shutdown requests, arming the watch on them again → the brokers to
        shut down (asking, and not shutting down yet), each an event of its own for the shell to
        queue. A read that failed armed nothing, so no later request would be seen → READ_AGAIN:
        the shell reads again after SHUTDOWN_REQUESTS_RETRY_MS."""
        if self.core is None:  # resigned meanwhile
            return []
        try:
            children = yield ReadShutdownRequests()
        except Exception as e:  # a read is not fenced
            log.warning("controller: cannot read the controlled shutdown requests (%r); reading again", e)
            return READ_AGAIN
        return [b for b in sorted(int(c) for c in children if c.isdigit()) if b not in self.core.shutting_down]

    def handle(self, name: str, *args) -> Handler:
        """An event for the active controller: settle what is unconfirmed, then decide."""
        yield from self._settle()
        answer = yield from getattr(self, "_" + name)(*args)
        yield from self._complete_reassignments()
        return answer

    # ----- events

    def _metadata(self) -> Handler:
        """Tell the core what changed in topics, configs and brokers since it last heard."""
        core, known = self.core, self._known
        now: ClusterView = yield ReadCluster()
        changes: list[StateChange] = []
        # A registration with a new broker epoch (czxid) is a bounce: gone and back between two looks.
        bounced = {b for b, epoch in now.broker_epochs.items()
                   if b in now.brokers and known.broker_epochs.get(b, epoch) != epoch}
        if now.brokers.keys() != known.brokers.keys() or bounced:
            log.info("controller: brokers %s (gone %s, joined %s, bounced %s)", sorted(now.brokers),
                     sorted(known.brokers.keys() - now.brokers.keys()),
                     sorted(now.brokers.keys() - known.brokers.keys()), sorted(bounced))
            changes += core.on_brokers_changed(now.brokers, bounced, now.broker_epochs)
        for name in known.topics.keys() - now.topics.keys():
            core.on_topic_deleted(name)
        for name, assignment in now.topics.items():
            old = known.topics.get(name)
            if old is None:
                changes += core.on_topic_created(assignment, now.topic_configs.get(name, {}))
            elif len(assignment.replicas) > len(old.replicas):
                added = {p: r for p, r in assignment.replicas.items() if p not in old.replicas}
                changes += core.on_partitions_added(name, added)
            elif assignment != old and assignment != core.view.topics.get(name):
                if not core.reassignment.on_assignment_changed(assignment):
                    log.warning("controller: not adopting the stored assignment of %s: an ISR is outside it", name)
        for name, configs in now.topic_configs.items():
            if name in now.topics and configs != known.topic_configs.get(name):
                changes += core.on_topic_config_changed(name, configs)
        self._known = now
        yield from self._write(changes)

    def _alter_partition(self, leader_id: int, leader_broker_epoch: int, items) -> Handler:
        """One AlterPartition request from `leader_id`; `items`: (topic, partition, leader epoch,
        partition epoch, new ISR, the members' broker epochs or None) → (error, {key: (error, state
        to answer with)}). A leader's previous incarnation (KIP-903) changes nothing."""
        if self.core.is_stale_broker_epoch(leader_id, leader_broker_epoch):
            return ErrorCode.stale_broker_epoch, {}
        answers: dict[TopicPartition, tuple[ErrorCode, PartitionState | None]] = {}
        changes: list[StateChange] = []
        for topic, partition, leader_epoch, partition_epoch, new_isr, broker_epochs in items:
            if (topic, partition) in answers or any(c.key == (topic, partition) for c in changes):
                answers[(topic, partition)] = ErrorCode.invalid_request, None
                continue
            outcome = self.core.on_alter_partition(topic, partition, leader_id, leader_epoch, partition_epoch,
                                                   tuple(new_isr), broker_epochs)
            if outcome.error or outcome.change is None:
                answers[(topic, partition)] = outcome.error, outcome.state
            else:
                changes.append(outcome.change)
        written = yield from self._write(changes)
        for change in changes:
            answers[change.key] = ((ErrorCode.none, written[change.key]) if change.key in written
                                   else (ErrorCode.invalid_update_version, None))
        return ErrorCode.none, answers

    def _elect_leaders(self, election: ElectionType, partitions) -> Handler:
        outcome = self.core.elect_leaders(election, partitions)
        written = yield from self._write(outcome.changes)
        results = dict(outcome.results)
        for change in outcome.changes:
            if change.key not in written:
                results[change.key] = ErrorCode.invalid_update_version
        return results

    def _reassign(self, targets, allow_replication_factor_change: bool = True) -> Handler:
        """AlterPartitionReassignments; `targets`: {partition: target replicas, None to cancel}
        → {partition: (error, message)}."""
        outcome = self.core.reassignment.reassign(targets, allow_replication_factor_change)
        yield from self._write(outcome.changes)
        refused = yield from self._move(outcome.moves)
        results = dict(outcome.results)
        results.update((key, (code, None)) for key, code in refused.items())
        for key, (code, message) in sorted(results.items()):
            if code == ErrorCode.none and key in outcome.moves:
                log.info("controller: reassigning %s-%d to %s", *key, list(outcome.moves[key].target))
        return results

    def _complete_reassignments(self) -> Handler:
        yield from self._write(self.core.reassignment.owed_leaderships())
        changes, moves = self.core.reassignment.complete_reassignments()
        if moves:
            yield from self._write(changes)
            yield from self._move(moves)

    def _move(self, moves: dict[TopicPartition, Move]) -> Handler:
        """Write the assignments of `moves` once their states are written → {partition: error}
        of the moves refused."""
        assignments, refused = self.core.reassignment.assignments_for(moves)
        if assignments:
            yield WriteAssignments(tuple(assignments.values()))
            for name, a in assignments.items():
                log.info("controller: %s replicas now %s (adding %s, removing %s)", name, a.replicas, a.adding,
                         a.removing)
            yield from self._write(self.core.reassignment.on_assignments_written(assignments))
        return refused

    def _controlled_shutdown(self, broker_id: int) -> Handler:
        log.info("controller: controlled shutdown of broker %d", broker_id)
        outcome = self.core.on_controlled_shutdown(broker_id)
        yield from self._write(outcome.changes)
        return outcome.remaining

    def _controller_config(self, config: ControllerConfig) -> Handler:
        """The controller's settings changed (a dynamic broker config)."""
        self.core.config = config
        yield from self._write(self.core.reconcile())

    def _balance(self) -> Handler:
        yield from self._write(self.core.check_leader_balance())

    # ----- writing decisions

    def _settle(self) -> Handler:
        """Before the core decides or answers anything: states it decided whose write ended with no
        answer (a lost connection, a suspended session) may or may not be in the store. Read them
        back and adopt what is stored, so the view never holds a state the store did not record
        (answering a repeated AlterPartition "done" from such a view let a leader commit against an
        ISR that a later election did not know). A failed read fails the event; the next tries again."""
        keys = self.core.unconfirmed_keys
        if not keys:
            return
        stored = yield ReadStates(tuple(keys))
        log.warning("controller: re-read %d partition state(s) whose write had no answer", len(keys))
        changes: list[StateChange] = []
        for key in keys:
            changes += self.core.adopt_stored(key, stored.get(key))
        yield from self._write(changes)

    def _write(self, changes: list[StateChange]) -> Handler:
        """Write changes (creates, then compare-and-sets); re-decide conflicts. Returns what was written."""
        written: dict[TopicPartition, PartitionState] = {}
        for _ in range(MAX_CONFLICT_ROUNDS):
            if not changes:
                break
            follow_ups: list[StateChange] = []
            by_topic: dict[str, list[StateChange]] = {}
            for c in changes:
                if c.expected_version is None:
                    by_topic.setdefault(c.topic, []).append(c)
            for topic, group in by_topic.items():
                created = yield CreateStates(topic, {c.partition: c.new for c in group})
                missing = tuple(c.key for c in group if c.partition not in created)
                stored = (yield ReadStates(missing)) if missing else {}
                for c in group:
                    if c.partition in created:
                        self._confirm(c, created[c.partition], written)
                    else:
                        follow_ups += self.core.on_write_conflict(c, stored.get(c.key))
            # New leaders first: a broker's death changes every ISR it was in, and the partitions it
            # led, offline until their new state is read, should not wait behind the ISR shrinks.
            updates = sorted((c for c in changes if c.expected_version is not None),
                             key=lambda c: c.new.leader == c.old.leader)
            if updates:
                results = yield WriteStates(tuple((c.topic, c.partition, c.expected_version, c.new) for c in updates))
                for c, result in zip(updates, results):
                    if result.ok:
                        self._confirm(c, result.state, written)
                    else:
                        follow_ups += self.core.on_write_conflict(c, result.current)
            changes = follow_ups
        return written

    def _confirm(self, change: StateChange, stored: PartitionState, written: dict) -> None:
        self.core.on_state_written(change, stored.partition_epoch)
        written[change.key] = stored
        self.on_written(change)
