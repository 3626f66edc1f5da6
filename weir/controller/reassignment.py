"""Partition reassignment (KIP-455): how a partition's replicas move, without I/O.

Rules owned here (ControllerCore applies them; AlterPartition's ISR rules stay in decisions.py):

- START. AlterPartitionReassignments names a partition's target replicas. Its replicas become
  target + original (distinct, in that order, as Kafka's ReplicaAssignment), with adding = target
  minus original and removing = original minus target. A new target replaces a reassignment in
  progress; the original stays the one from before the first. The new replicas join as followers
  of the current leader; its leader adds them to the ISR once they have caught up (AlterPartition).
- CANCEL (no target): the replicas become the original ones again.
- REFUSED: an unknown partition → UNKNOWN_TOPIC_OR_PARTITION; a cancel with nothing in progress →
  NO_REASSIGNMENT_IN_PROGRESS; an empty target, a duplicate or a broker that is not registered →
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

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import dataclasses

from weir.coordination.model import NO_LEADER, PartitionState
from weir.controller.partition_change import changed_state, is_acceptable_leader


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


def invalid_target(target: Sequence[int], registered: Collection[int]) -> str | None:
    """Why `target` cannot be a partition's replicas, or None."""
    if not target:
        return "the replica list is empty"
    if len(set(target)) != len(target):
        return f"the replica list {list(target)} has duplicates"
    missing = sorted(set(target) - set(registered))
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
