"""Truncation by leader epoch: where a follower's log stops agreeing with its leader's.

Rules owned here (KIP-101, KIP-279; Kafka's OffsetsForLeaderEpoch handling and
AbstractFetcherThread.getOffsetTruncationState):

- Never truncate to the high watermark. A follower's HW lags the leader's, so cutting there can
  drop a committed record that the follower then fails to re-fetch before it is elected (data loss,
  KIP-101 scenario 1), and keeping everything up to the HW can keep a record the new leader
  never had (divergence, scenario 2). Epochs tell exactly where two logs agree.
- Leader side: OffsetForLeaderEpoch(E) is answered with (E', end) where E' is the largest epoch
  <= E the leader knows and `end` is the start offset of the leader's next higher epoch, or its
  LEO if E' is its latest epoch. The caller's current_leader_epoch is fenced first (KIP-320) and
  only the leader answers.
- Follower side, given the leader's answer (E', end) to its request:
    * the leader knows no epoch at all (end undefined): the pre-KIP-101 fallback, min(HW, LEO);
      in Weir a non-empty log always has epochs, so this only happens on empty logs;
    * the follower knows E' too: truncate to min(end, follower's own end of E', LEO), done;
    * the follower does not know E' (its largest epoch <= E' is some F < E'): its log agrees with
      the leader's at most up to where its own F ends, so truncate to min(follower's end of F,
      LEO) and ask again with F (the KIP-279 loop). The epoch asked strictly decreases, so the
      loop ends.
    * the follower has no epoch <= E': it has nothing the leader can vouch for beyond `end`:
      truncate to min(end, LEO), done.

Theory of operation: two pure functions over (epoch-cache read view, offsets); the follower
state machine (follower.py) and the leader's request handler call them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from weir.replication.epoch_fencing import check_leader_request

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEndOffsets(Protocol):
    """The read side of a leader-epoch cache (weir.log.LeaderEpochCache has it)."""

    @property
    def latest_epoch(self) -> int: ...

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]: ...


@dataclass(frozen=True)
class EpochEndOffset:
    """One partition of an OffsetForLeaderEpoch response."""
    error: ErrorCode
    leader_epoch: int = UNDEFINED_EPOCH
    end_offset: int = UNDEFINED_EPOCH_OFFSET


@dataclass(frozen=True)
class Truncation:
    """Truncate the log to `offset` (a no-op if >= LEO). If not `completed`, ask the leader again
    with `next_epoch`."""
    offset: int
    completed: bool
    next_epoch: int = UNDEFINED_EPOCH


def answer_offset_for_leader_epoch(requested_epoch: int, current_leader_epoch: int, *, is_leader: bool,
                                   our_leader_epoch: int, epochs: EpochEndOffsets,
                                   log_end_offset: int) -> EpochEndOffset:
    """The leader's answer to OffsetForLeaderEpoch(requested_epoch)."""
    error = check_leader_request(current_leader_epoch, our_leader_epoch, is_leader=is_leader)
    if error is not ErrorCode.none:
        return EpochEndOffset(error)
    epoch, end_offset = epochs.end_offset_for(requested_epoch, log_end_offset)
    assert end_offset <= log_end_offset, (end_offset, log_end_offset)
    assert epoch <= requested_epoch
    return EpochEndOffset(ErrorCode.none, epoch, end_offset)


def truncation_for_epoch_answer(answer: EpochEndOffset, *, epochs: EpochEndOffsets, log_end_offset: int,
                                high_watermark: int) -> Truncation:
    """Where the follower truncates given the leader's (error-free) answer."""
    assert answer.error is ErrorCode.none
    if answer.end_offset == UNDEFINED_EPOCH_OFFSET:
        return Truncation(min(high_watermark, log_end_offset), completed=True)
    if answer.leader_epoch == UNDEFINED_EPOCH:
        return Truncation(min(answer.end_offset, log_end_offset), completed=True)
    own_epoch, own_end = epochs.end_offset_for(answer.leader_epoch, log_end_offset)
    if own_end == UNDEFINED_EPOCH_OFFSET:
        return Truncation(min(answer.end_offset, log_end_offset), completed=True)
    if own_epoch != answer.leader_epoch:
        assert own_epoch < answer.leader_epoch
        return Truncation(min(own_end, log_end_offset), completed=False, next_epoch=own_epoch)
    return Truncation(min(own_end, answer.end_offset, log_end_offset), completed=True)
