"""The follower side of a partition: first truncate by leader epoch, then fetch.

Rules owned here (Kafka's AbstractFetcherThread / ReplicaFetcherThread, KIP-101, KIP-279):

- A new leadership (new leader or new leader epoch) starts in TRUNCATING: the follower asks the
  leader OffsetForLeaderEpoch(its latest epoch) and truncates where truncation.py says, repeating
  with an older epoch while the leader's answer names an epoch the follower lacks (KIP-279). Only
  then does it fetch: fetching first could append the leader's records after divergent ones.
- A follower with no epoch at all (empty log) has nothing to ask about and fetches at once.
- FETCHING: the next fetch offset is the follower's LEO. A response is applied only if it answers
  a fetch at the current LEO in the current state (anything else is stale and dropped); its
  records must start exactly at the LEO - the append position must equal the LEO.
- The follower's HW = min(leader's HW carried in the fetch response, own LEO).
- Errors: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER /
  UNKNOWN_TOPIC_OR_PARTITION mean the follower or the leader is behind on metadata: back off and
  retry (the controller's next partition state replaces this object if leadership moved).
  OFFSET_OUT_OF_RANGE means the leader's log no longer covers our LEO: below its log start
  (records deleted there, by DeleteRecords or retention, before we fetched them), we empty our log
  and go on from its log start, as Kafka's truncateFullyAndStartAt; otherwise its LEO is below
  ours (after an unclean election): go back to TRUNCATING.

Theory of operation: one `FollowerPartition` per partition this broker follows, built for each
new leadership. The shell loops: `next_request()` -> send it -> feed the response to
`on_offset_for_leader_epoch_response` or `on_fetch_response` -> act on the returned decision
(truncate the log / append the records / back off) -> report the result (`on_truncated`,
`on_appended`). The epoch cache is read, never written: the log keeps it in step with
truncations and appends.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from weir.replication.truncation import (UNDEFINED_EPOCH, EpochEndOffset, EpochEndOffsets, Truncation,
                                         truncation_for_epoch_answer)


class FollowerState(enum.Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"


@dataclass(frozen=True)
class SendOffsetForLeaderEpoch:
    leader_id: int
    current_leader_epoch: int
    leader_epoch: int  # the epoch whose end offset we ask for


@dataclass(frozen=True)
class SendFetch:
    leader_id: int
    current_leader_epoch: int
    fetch_offset: int


# The leader has not yet read the state that made us its follower (both learn it from ZooKeeper
# at about the same moment): retry soon rather than after replica.fetch.backoff.ms.
LEADER_CATCHING_UP = frozenset({ErrorCode.unknown_leader_epoch, ErrorCode.not_leader_or_follower})
CATCH_UP_BACKOFF_MS = 50


@dataclass(frozen=True)
class Backoff:
    """Retry after replica.fetch.backoff.ms; `error` is why."""
    error: ErrorCode


def backoff_ms(error: ErrorCode, replica_fetch_backoff_ms: int) -> int:
    """How long a partition sits out of its fetcher's rounds after `error`: replica.fetch.backoff.ms,
    or at most CATCH_UP_BACKOFF_MS while the leader is catching up with the partition's state."""
    if error in LEADER_CATCHING_UP:
        return min(replica_fetch_backoff_ms, CATCH_UP_BACKOFF_MS)
    return replica_fetch_backoff_ms


@dataclass(frozen=True)
class StartAt:
    """Our log ends below the leader's log start: empty it, go on from `offset`, then call
    `on_started_at(offset)`."""
    offset: int


@dataclass(frozen=True)
class AppendRecords:
    """Append the response's records with append_as_follower; they start at `base_offset` (the
    LEO). Then call `on_appended(new_leo, leader_high_watermark)`."""
    base_offset: int
    leader_high_watermark: int


@dataclass(frozen=True)
class Ignore:
    """A stale or empty response; nothing to do but send the next request."""


class FollowerPartition:
    def __init__(self, broker_id: int, leader_id: int, leader_epoch: int, log_end_offset: int,
                 high_watermark: int, epochs: EpochEndOffsets) -> None:
        assert broker_id != leader_id
        assert 0 <= log_end_offset
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.log_end_offset = log_end_offset
        self.high_watermark = min(high_watermark, log_end_offset)
        self.epochs = epochs
        self._epoch_to_ask = epochs.latest_epoch
        self.state = FollowerState.TRUNCATING if self._epoch_to_ask != UNDEFINED_EPOCH else FollowerState.FETCHING
        self._pending_truncation: Truncation | None = None

    def next_request(self) -> SendOffsetForLeaderEpoch | SendFetch:
        if self.state is FollowerState.TRUNCATING:
            return SendOffsetForLeaderEpoch(self.leader_id, self.leader_epoch, self._epoch_to_ask)
        return SendFetch(self.leader_id, self.leader_epoch, self.log_end_offset)

    # ----- truncation

    def on_offset_for_leader_epoch_response(self, current_leader_epoch: int, requested_epoch: int,
                                            answer: EpochEndOffset) -> Truncation | Backoff | Ignore:
        """The leader's answer to our OffsetForLeaderEpoch(requested_epoch), sent while we followed
        leader epoch `current_leader_epoch`. On a Truncation the shell truncates its log to
        `offset` and then calls `on_truncated(its new LEO)`. An answer that belongs to another
        leadership (a request sent before the leader changed) says nothing about this one."""
        if (self.state is not FollowerState.TRUNCATING or current_leader_epoch != self.leader_epoch
                or requested_epoch != self._epoch_to_ask):
            return Ignore()
        if answer.error is not ErrorCode.none:
            return Backoff(answer.error)
        truncation = truncation_for_epoch_answer(answer, epochs=self.epochs, log_end_offset=self.log_end_offset,
                                                 high_watermark=self.high_watermark)
        assert truncation.completed or truncation.next_epoch < requested_epoch, "the KIP-279 loop must end"
        self._pending_truncation = truncation
        return truncation

    def on_truncated(self, log_end_offset: int) -> None:
        """The shell truncated the log as told; `log_end_offset` is the LEO now (whole batches
        are cut, so it may be below the asked offset)."""
        truncation = self._pending_truncation
        assert truncation is not None, "on_truncated without a Truncation decision"
        assert log_end_offset <= self.log_end_offset, "truncation never grows the log"
        assert log_end_offset <= truncation.offset or log_end_offset == self.log_end_offset
        self._pending_truncation = None
        self.log_end_offset = log_end_offset
        self.high_watermark = min(self.high_watermark, log_end_offset)
        if truncation.completed:
            self.state = FollowerState.FETCHING
        else:
            self._epoch_to_ask = truncation.next_epoch

    # ----- fetching

    def on_fetch_response(self, fetch_offset: int, error: ErrorCode, leader_high_watermark: int,
                          records_base_offset: int | None, *, current_leader_epoch: int,
                          leader_log_start_offset: int = 0) -> AppendRecords | StartAt | Backoff | Ignore:
        """The leader's answer to our fetch at `fetch_offset`, sent while we followed leader epoch
        `current_leader_epoch`; `records_base_offset` is the base offset of its first batch, or None
        if it carried no records. An answer of an earlier leadership (the old leader's records that
        the new one does not have) is ignored."""
        if (self.state is not FollowerState.FETCHING or fetch_offset != self.log_end_offset
                or current_leader_epoch != self.leader_epoch):
            return Ignore()
        if error is ErrorCode.offset_out_of_range and fetch_offset < leader_log_start_offset:
            return StartAt(leader_log_start_offset)
        if error is ErrorCode.offset_out_of_range and self.epochs.latest_epoch != UNDEFINED_EPOCH:
            self.state = FollowerState.TRUNCATING
            self._epoch_to_ask = self.epochs.latest_epoch
            return Backoff(error)
        if error is not ErrorCode.none:
            return Backoff(error)
        if records_base_offset is None:
            self.maybe_update_high_watermark(leader_high_watermark)
            return Ignore()
        if records_base_offset != self.log_end_offset:
            return Backoff(ErrorCode.corrupt_message)  # append position must equal the LEO
        return AppendRecords(records_base_offset, leader_high_watermark)

    def on_started_at(self, offset: int) -> None:
        self.log_end_offset = self.high_watermark = offset

    def on_appended(self, log_end_offset: int, leader_high_watermark: int) -> None:
        assert log_end_offset > self.log_end_offset, "an append must move the LEO"
        self.log_end_offset = log_end_offset
        self.maybe_update_high_watermark(leader_high_watermark)

    def maybe_update_high_watermark(self, leader_high_watermark: int) -> None:
        """Follower HW = min(leader's HW, own LEO)."""
        self.high_watermark = min(leader_high_watermark, self.log_end_offset)
        assert self.high_watermark <= self.log_end_offset
