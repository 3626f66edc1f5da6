"""How one partition's leader and ISR may change: the election and ISR rules of the controller.

Rules owned here (Kafka's PartitionChangeBuilder in KRaft mode and PartitionLeaderElectionAlgorithms
in ZooKeeper mode; names are Kafka's):

- ACCEPTABLE LEADER. A replica may become leader only if it is live (registered) and not in
  controlled shutdown.
- CLEAN ELECTION. The current leader stays if it is acceptable and in the target ISR. Otherwise
  the first replica in assignment order that is acceptable and in the target ISR leads, with the
  ISR = target ISR. Every ISR member holds every committed record, so nothing committed is lost.
- LAST CLEAN RESORT. If no acceptable ISR member exists but a live ISR member does (it is in
  controlled shutdown), that member leads, the current leader first: it still holds every
  committed record and still serves. This is how a broker in controlled shutdown keeps the
  partitions it cannot hand over (Kafka ZooKeeper mode leaves them with it, and reports them as
  remaining). Kafka would rather take such partitions offline or elect uncleanly when the dying
  leader is someone else; keeping a clean leader is strictly better for data and availability.
- UNCLEAN ELECTION. Only when no ISR member is live, and only when allowed (topic config
  `unclean.leader.election.enable`, or an ElectLeaders request of type UNCLEAN): the first
  acceptable replica in assignment order, with ISR = [it]. Records committed by the old ISR may be
  lost; that is what the setting accepts.
- OFFLINE. Otherwise the leader is NO_LEADER and the ISR keeps its last member(s).
- THE ISR IS NEVER EMPTIED. Removing brokers from the ISR (dead ones; the broker in controlled
  shutdown) keeps the last member when all would go: the current leader if it was a member, else
  the first member. When it returns, a clean election can pick it (Kafka keeps the last ISR
  member; KIP-966's eligible leader replicas later generalised this). The controller never adds a
  replica to the ISR: only the leader does, through AlterPartition, once the replica caught up.
- EPOCHS. The leader epoch goes up by one exactly when the leader changes, including to and from
  NO_LEADER, so a deposed leader is fenced (KIP-101, KIP-320). An ISR-only change keeps the
  leader epoch: KRaft's behaviour since metadata version 3.6 (KAFKA-15021, with KIP-903's broker
  epochs making the bump unnecessary); ZooKeeper mode's removeReplicasFromIsr bumped it. The
  partition epoch (the znode version) goes up by one on every change.
- PREFERRED ELECTION. The first assigned replica takes over if it is acceptable and in the ISR and
  not already leader; the ISR is unchanged.

Theory of operation: pure functions from (assigned replicas, current PartitionState, who is live,
who is shutting down, whether unclean election is allowed) to the next PartitionState. When
nothing changes they return the very same state object, so callers detect "no change" by
identity. They never write anything: the controller core (decisions.py) turns changed states into
compare-and-set writes.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Collection, Sequence

from kio.schema.errors import ErrorCode

from weir.zk.model import NO_LEADER, PartitionState


class ElectionType(enum.IntEnum):
    """ElectLeaders' election_type values (KIP-460)."""
    PREFERRED = 0
    UNCLEAN = 1


def is_acceptable_leader(replica: int, live: Collection[int], shutting_down: Collection[int]) -> bool:
    return replica in live and replica not in shutting_down


def shrink_isr_keeping_last_member(isr: Sequence[int], leader: int, remove: Collection[int]) -> tuple[int, ...]:
    """The ISR without `remove`, but never empty: if every member would go, the current leader
    stays if it was a member, else the first member."""
    kept = tuple(r for r in isr if r not in remove)
    if kept or not isr:
        return kept
    return (leader,) if leader in isr else (isr[0],)


def elect_leader(replicas: Sequence[int], target_isr: Sequence[int], current_leader: int,
                 live: Collection[int], shutting_down: Collection[int],
                 unclean_allowed: bool) -> tuple[int, tuple[int, ...]]:
    """Clean election, its last clean resort, unclean election, or offline (see the header).
    Returns (leader, ISR)."""
    target_isr = tuple(target_isr)
    if current_leader in target_isr and is_acceptable_leader(current_leader, live, shutting_down):
        return current_leader, target_isr
    for r in replicas:
        if r in target_isr and is_acceptable_leader(r, live, shutting_down):
            return r, target_isr
    if current_leader in target_isr and current_leader in live:
        return current_leader, target_isr
    for r in replicas:
        if r in target_isr and r in live:
            return r, target_isr
    if unclean_allowed:
        for r in replicas:
            if is_acceptable_leader(r, live, shutting_down):
                return r, (r,)
    return NO_LEADER, target_isr


def changed_state(replicas: Sequence[int], state: PartitionState, leader: int, isr: Sequence[int],
                  controller_epoch: int) -> PartitionState:
    """`state` itself when leader and ISR are unchanged; otherwise the next state: leader epoch
    + 1 iff the leader changed, partition epoch + 1."""
    isr = tuple(isr)
    if leader == state.leader and isr == state.isr:
        return state
    assert len(set(isr)) == len(isr) and set(isr) <= set(replicas), ("ISR ⊆ replicas", isr, replicas)
    assert leader == NO_LEADER or leader in isr, ("the leader is in the ISR", leader, isr)
    assert isr, "the controller never empties an ISR"
    leader_epoch = state.leader_epoch + 1 if leader != state.leader else state.leader_epoch
    new = PartitionState(leader, leader_epoch, isr, controller_epoch, state.partition_epoch + 1)
    assert new.leader_epoch >= state.leader_epoch and new.partition_epoch > state.partition_epoch
    return new


def next_state(replicas: Sequence[int], state: PartitionState, *, live: Collection[int],
               shutting_down: Collection[int], unclean_allowed: bool, controller_epoch: int,
               remove_from_isr: Collection[int] = ()) -> PartitionState:
    """The partition after brokers came or went: dead brokers (and `remove_from_isr`) leave the
    ISR, never emptying it; then the leader is kept or elected. `state` itself if nothing changes."""
    dead_or_removed = {r for r in state.isr if r not in live} | set(remove_from_isr)
    target_isr = shrink_isr_keeping_last_member(state.isr, state.leader, dead_or_removed)
    leader, isr = elect_leader(replicas, target_isr, state.leader, live, shutting_down, unclean_allowed)
    return changed_state(replicas, state, leader, isr, controller_epoch)


def initial_state(replicas: Sequence[int], *, live: Collection[int], shutting_down: Collection[int],
                  controller_epoch: int) -> PartitionState:
    """A new partition: ISR = live replicas, leader = the first acceptable one in assignment order,
    leader epoch 0, partition epoch 0 (the znode's first version). All logs are empty, so every
    replica is in sync; if none is live, the ISR is all replicas and the partition waits offline
    for the first of them to register (Kafka would leave the state unwritten until then)."""
    assert replicas and len(set(replicas)) == len(replicas), replicas
    isr = tuple(r for r in replicas if r in live) or tuple(replicas)
    leader, isr = elect_leader(replicas, isr, NO_LEADER, live, shutting_down, unclean_allowed=False)
    return PartitionState(leader, 0, isr, controller_epoch, 0)


def elect_preferred_leader(replicas: Sequence[int], state: PartitionState, *, live: Collection[int],
                           shutting_down: Collection[int],
                           controller_epoch: int) -> tuple[ErrorCode, PartitionState]:
    """ElectLeaders PREFERRED for one partition: ELECTION_NOT_NEEDED if the preferred replica
    leads, PREFERRED_LEADER_NOT_AVAILABLE if it is not acceptable or not in the ISR."""
    preferred = replicas[0]
    if state.leader == preferred:
        return ErrorCode.election_not_needed, state
    if preferred not in state.isr or not is_acceptable_leader(preferred, live, shutting_down):
        return ErrorCode.preferred_leader_not_available, state
    return ErrorCode.none, changed_state(replicas, state, preferred, state.isr, controller_epoch)


def elect_unclean_leader(replicas: Sequence[int], state: PartitionState, *, live: Collection[int],
                         shutting_down: Collection[int],
                         controller_epoch: int) -> tuple[ErrorCode, PartitionState]:
    """ElectLeaders UNCLEAN for one partition: only for an offline partition (else
    ELECTION_NOT_NEEDED); a live ISR member is still preferred; ELIGIBLE_LEADERS_NOT_AVAILABLE if
    no replica is acceptable."""
    if state.leader != NO_LEADER:
        return ErrorCode.election_not_needed, state
    new = next_state(replicas, state, live=live, shutting_down=shutting_down, unclean_allowed=True,
                     controller_epoch=controller_epoch)
    if new.leader == NO_LEADER:
        return ErrorCode.eligible_leaders_not_available, state
    return ErrorCode.none, new


def with_partition_epoch(state: PartitionState, partition_epoch: int) -> PartitionState:
    return dataclasses.replace(state, partition_epoch=partition_epoch)
