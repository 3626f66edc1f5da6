"""Partition reassignment (KIP-455): how a partition's replicas move, without I/O.

Rules owned here (ControllerCore applies them; AlterPartition's ISR rules stay in decisions.py):

- START. AlterPartitionReassignments names a partition's target replicas. Its replicas become
  target + original (distinct, in that order, as Kafka's ReplicaAssignment), with adding = target
  minus original and removing = original minus target. A new target replaces a reassignment in
  progress; the original stays the one from before the first. The new replicas join as followers
  of the current leader; its leader adds them to the ISR once they have caught up (AlterPartition).
- CANCEL (no target): the replicas become the original ones again.
- REFUSED: an unknown partition → UNKNOWN_TOPIC_OR_PARTITION; a cancel with nothing in progress →
  NO_REASSIGNMENT_IN_PROGRESS; an empty target, a duplicate or an added replica whose broker is
  not registered (a replica the partition has may stay while its broker is down) →
  INVALID_REPLICA_ASSIGNMENT; a change that leaves no ISR member able to lead →
  INVALID_REPLICA_ASSIGNMENT (it would need an unclean election).
- COMPLETE. Once every target replica is in the ISR, the ISR keeps only target replicas and the
  leader stays if it is one; else the first target replica that is live, not shutting down and in
  the ISR takes over (leader epoch + 1). Then the replicas become the target.
- ORDER OF WRITES. Whenever replicas leave, the partition state is written first (they leave the
  ISR and leadership), then the assignment: the ISR and the leader are always within the
  assignment the store holds. Replicas that are no longer assigned delete their copy.
- NEW REPLICA SET, NEW LEADER EPOCH (as Kafka's ZooKeeper mode): after each assignment write the
  state is written again with the leader epoch + 1. The leader starts a new leadership with the
  new replicas: it forgets what it knew of its followers and any ISR change it had proposed, and
  fetches sent to the old set are fenced. A replica whose log was deleted and that comes back
  empty (same broker, same broker epoch) is thus never judged by its deleted log; `weir sim
  --scenario reassign` found that otherwise a stale proposal puts it in the ISR.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from weir.controller.partition_change import changed_state, is_acceptable_leader
from weir.controller.state_change import DecidedStates, StateChange, TopicPartition
from weir.zk.model import NO_LEADER, PartitionState, TopicAssignment


@dataclass(frozen=True, slots=True)
class Move:
    """The assignment a reassignment wants for one partition."""
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)


def move_to(original: Sequence[int], target: Sequence[int]) -> Move:
    """From `original` replicas to `target` ones: both sets until the target has caught up."""
    replicas = tuple(dict.fromkeys((*target, *original)))
    return Move(replicas, tuple(r for r in target if r not in original),
                tuple(r for r in original if r not in target))


def invalid_target(target: Sequence[int], registered: Collection[int], original: Collection[int] = ()) -> str | None:
    """Why `target` cannot be the replicas of a partition whose replicas are `original`, or None.
    As Kafka's KafkaController.validateReplicas, only the replicas added must be registered
    (alive): one the partition has may stay while its broker is down."""
    if not target:
        return "the replica list is empty"
    if len(set(target)) != len(target):
        return f"the replica list {list(target)} has duplicates"
    missing = sorted(set(target) - set(original) - set(registered))
    if missing:
        return f"brokers {missing} are not registered"
    return None


def state_within(state: PartitionState, replicas: Sequence[int], preferred: Sequence[int], *,
                 live: Collection[int], shutting_down: Collection[int],
                 controller_epoch: int) -> PartitionState | None:
    """`state` with its ISR and leader within `replicas` (the leader kept if it may stay, else the
    first of `preferred` that is acceptable and in the ISR); `state` itself if it already is; None
    if no ISR member within `replicas` could lead."""
    isr = tuple(r for r in state.isr if r in replicas)
    leader = state.leader
    if leader != NO_LEADER and leader not in replicas:
        leader = next((r for r in preferred if r in isr and is_acceptable_leader(r, live, shutting_down)), None)
        if leader is None:
            return None
    if not isr:
        return None
    return changed_state(replicas, state, leader, isr, controller_epoch)


def is_complete(move_target: Sequence[int], state: PartitionState) -> bool:
    """Every target replica has caught up: the reassignment may finish."""
    return set(move_target) <= set(state.isr)


def new_leadership(state: PartitionState, controller_epoch: int) -> PartitionState:
    """The same leader and ISR in a new leader epoch (for the new replica set)."""
    return dataclasses.replace(state, leader_epoch=state.leader_epoch + 1, controller_epoch=controller_epoch,
                               partition_epoch=state.partition_epoch + 1)


@dataclass(frozen=True, slots=True)
class ReassignOutcome:
    """Per partition, an error (none: accepted) and its message; the state changes to write
    first, then the moves, once those are written (`assignments_for`)."""
    results: dict[TopicPartition, tuple[ErrorCode, str | None]]
    changes: list[StateChange]
    moves: dict[TopicPartition, Move]


class Reassignments:
    """The rules above applied to the controller's decided states, beside ControllerCore's."""

    def __init__(self, decided: DecidedStates) -> None:
        self.decided = decided
        view = decided.view
        # Moved partitions owed a new leadership, with the leader epoch it must exceed; a new
        # controller owes one to every move in progress, as Kafka's resumes them.
        self._leadership_owed: dict[TopicPartition, int] = {
            (name, p): view.states[(name, p)].leader_epoch for name, a in view.topics.items()
            for p in a.replicas if a.is_reassigning(p) and (name, p) in view.states}

    def on_state_written(self, change: StateChange) -> None:
        if change.new.leader_epoch > self._leadership_owed.get(change.key, change.new.leader_epoch):
            del self._leadership_owed[change.key]

    def forget(self, key: TopicPartition) -> None:
        self._leadership_owed.pop(key, None)

    def reassign(self, targets: Mapping[TopicPartition, Sequence[int] | None],
                 allow_replication_factor_change: bool = True) -> ReassignOutcome:
        """AlterPartitionReassignments: start, replace or (target None) cancel the reassignment
        of each partition (rules in reassignment.py)."""
        results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        changes, moves = [], {}
        for key, target in sorted(targets.items()):
            assignment = self.decided.view.topics.get(key[0])
            state = self.decided.view.states.get(key)
            if assignment is None or key[1] not in assignment.replicas or state is None:
                results[key] = ErrorCode.unknown_topic_or_partition, None
                continue
            original = assignment.original_replicas(key[1])
            if target is None:
                if not assignment.is_reassigning(key[1]):
                    results[key] = ErrorCode.no_reassignment_in_progress, None
                    continue
                move = Move(original)
            else:
                problem = invalid_target(target, self.decided.view.brokers, original)
                if problem is None and not allow_replication_factor_change and len(target) != len(original):
                    problem = f"the replication factor would change from {len(original)} to {len(target)}"
                if problem is not None:
                    results[key] = ErrorCode.invalid_replica_assignment, f"{key[0]}-{key[1]}: {problem}"
                    continue
                move = move_to(original, tuple(target))
            new = state_within(state, move.replicas, move.target, live=self.decided.live, shutting_down=self.decided.shutting_down,
                               controller_epoch=self.decided.view.controller_epoch)
            if new is None:
                results[key] = (ErrorCode.invalid_replica_assignment,
                                f"{key[0]}-{key[1]}: no in-sync replica of {list(move.replicas)} could lead: "
                                f"that would need an unclean leader election")
                continue
            if new is not state:
                changes.append(self.decided.apply(key, state, new, "reassignment"))
            moves[key] = move
            results[key] = ErrorCode.none, None
        return ReassignOutcome(results, changes, moves)

    def owed_leaderships(self) -> list[StateChange]:
        """New leaderships owed to moved partitions whose earlier write was lost (no answer, or
        the controller that decided it was replaced)."""
        changes = []
        for key, epoch in sorted(self._leadership_owed.items()):
            state = self.decided.view.states.get(key)
            if state is None or state.leader_epoch > epoch:  # gone, or paid by another write
                del self._leadership_owed[key]
            elif key not in self.decided.unconfirmed:
                changes.append(self.decided.apply(key, state, new_leadership(state, self.decided.view.controller_epoch),
                                           "reassignment_new_replicas"))
        return changes

    def complete_reassignments(self) -> tuple[list[StateChange], dict[TopicPartition, Move]]:
        """Partitions whose target replicas are all in the ISR finish: the state changes (ISR
        and leader within the target) to write first, then the moves."""
        changes, moves = [], {}
        for name, assignment in sorted(self.decided.view.topics.items()):
            for p in sorted(set(assignment.adding) | set(assignment.removing)):
                key = (name, p)
                state = self.decided.view.states.get(key)
                target = assignment.target_replicas(p)
                if state is None or key in self.decided.unconfirmed or not is_complete(target, state):
                    continue
                new = state_within(state, target, target, live=self.decided.live, shutting_down=self.decided.shutting_down,
                                   controller_epoch=self.decided.view.controller_epoch)
                if new is None:
                    continue  # no target replica may lead yet
                if new is not state:
                    changes.append(self.decided.apply(key, state, new, "reassignment_completed"))
                moves[key] = Move(target)
        return changes, moves

    def assignments_for(self, moves: Mapping[TopicPartition, Move]
                        ) -> tuple[dict[str, TopicAssignment], dict[TopicPartition, ErrorCode]]:
        """The topic assignments carrying out `moves`, for the moves whose partition's ISR and
        leader are now within them (their state written); the rest are refused with
        REQUEST_TIMED_OUT (their state write conflicted: the client may try again)."""
        assignments: dict[str, TopicAssignment] = {}
        refused: dict[TopicPartition, ErrorCode] = {}
        for (topic, p), move in sorted(moves.items()):
            current = assignments.get(topic) or self.decided.view.topics.get(topic)
            state = self.decided.view.states.get((topic, p))
            if current is None or state is None:
                refused[(topic, p)] = ErrorCode.unknown_topic_or_partition
                continue
            if (not set(state.isr) <= set(move.replicas) or (topic, p) in self.decided.unconfirmed
                    or state.leader not in (NO_LEADER, *move.replicas)):
                refused[(topic, p)] = ErrorCode.request_timed_out
                continue
            assignments[topic] = _with_move(current, p, move)
        return {t: a for t, a in assignments.items() if a != self.decided.view.topics[t]}, refused

    def on_assignments_written(self, assignments: Mapping[str, TopicAssignment]) -> list[StateChange]:
        """The moves are in the store: each moved partition starts a new leadership (reassignment.py)."""
        changes = []
        for name, assignment in sorted(assignments.items()):
            current = self.decided.view.topics.get(name)
            if current is None:
                continue
            self.decided.view.topics[name] = assignment
            for p in sorted(assignment.replicas):
                moved = (current.replicas[p], current.adding.get(p), current.removing.get(p)) != (
                    assignment.replicas[p], assignment.adding.get(p), assignment.removing.get(p))
                state = self.decided.view.states.get((name, p))
                if moved and state is not None:
                    self._leadership_owed[(name, p)] = state.leader_epoch
                    changes.append(self.decided.apply((name, p), state, new_leadership(state, self.decided.view.controller_epoch),
                                               "reassignment_new_replicas"))
        return changes

    def on_assignment_changed(self, assignment: TopicAssignment) -> bool:
        """The store shows another assignment of a topic's partitions (our own write seen after
        an unknown outcome, or another writer's): adopt it if every ISR is within it."""
        current = self.decided.view.topics.get(assignment.name)
        if current is None or current.replicas.keys() != assignment.replicas.keys():
            return False
        for p, replicas in assignment.replicas.items():
            state = self.decided.view.states.get((assignment.name, p))
            if state is not None and not set(state.isr) <= set(replicas):
                return False
        self.decided.view.topics[assignment.name] = assignment
        return True

    def reassignments(self) -> dict[TopicPartition, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        """ListPartitionReassignments: (replicas, adding, removing) of each partition in progress."""
        return {(name, p): (a.replicas[p], a.adding.get(p, ()), a.removing.get(p, ()))
                for name, a in sorted(self.decided.view.topics.items()) for p in sorted(a.replicas) if a.is_reassigning(p)}


def _with_move(assignment: TopicAssignment, partition: int, move: Move) -> TopicAssignment:
    def put(by_partition: dict[int, tuple[int, ...]], replicas: tuple[int, ...]) -> dict[int, tuple[int, ...]]:
        return {p: r for p, r in {**by_partition, partition: replicas}.items() if r}
    return dataclasses.replace(assignment, replicas={**assignment.replicas, partition: move.replicas},
                               adding=put(assignment.adding, move.adding),
                               removing=put(assignment.removing, move.removing))
