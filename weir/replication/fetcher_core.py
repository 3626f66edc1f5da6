"""One replica fetcher's decisions, loop-free (Kafka's AbstractFetcherThread without its thread):
which of the partitions followed from one leader a round asks for, and what, and what the leader's
answers mean for each. replica_fetcher.py drives it with asyncio and real requests, weir sim's
fetcher with simulated ones; each only sends, waits and schedules.

A round: the partitions that still follow this leader and are not backing off are asked what they
want; those truncating ask their OffsetForLeaderEpoch together first, then the others fetch, in
one fetch session (KIP-227). A partition told to back off sits out the rounds for
replica.fetch.backoff.ms (less while the leader catches up: `backoff_ms`). A partition whose
answer cannot be acted on (a broken invariant, asserted before a write) stops fetching until its
next role change, and no other partition does (Kafka's failed partitions).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from weir.protocol.errors import ErrorCode, error_code
from weir.replication.fetch_session_handler import FetchSessionHandler
from weir.replication.follower import Backoff, SendFetch, SendOffsetForLeaderEpoch, backoff_ms
from weir.replication.partition import Partition
from weir.replication.truncation import EpochEndOffset

log = logging.getLogger(__name__)


@dataclass
class FetchRound:
    asks: dict  # key -> SendFetch | SendOffsetForLeaderEpoch, for every partition asked
    truncating: list[Partition] = field(default_factory=list)
    fetching: list[Partition] = field(default_factory=list)


class FetcherCore:
    """The partitions this broker follows from `leader_id`. Backoffs are timed by `clock()`, in
    milliseconds (production: monotonic; the partitions are told the wall clock's time, which may
    jump); `fetch_backoff_ms()` is replica.fetch.backoff.ms. With `isolate_failures` off (weir sim)
    a partition's failure is raised, not logged: there it is a bug to report."""

    def __init__(self, leader_id: int, fetch_backoff_ms: Callable[[], int], clock: Callable[[], float], *,
                 isolate_failures: bool = True) -> None:
        self.leader_id = leader_id
        self.fetch_backoff_ms = fetch_backoff_ms
        self.clock = clock
        self.isolate_failures = isolate_failures
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.backoff_until: dict[tuple[str, int], float] = {}
        self.session = FetchSessionHandler()

    def add(self, partition: Partition) -> None:
        self.partitions[partition.key] = partition
        self.backoff_until.pop(partition.key, None)

    def remove(self, key: tuple[str, int]) -> None:
        self.partitions.pop(key, None)
        self.backoff_until.pop(key, None)

    def current(self, key: tuple[str, int]) -> Partition | None:
        """The partition of `key` if it still follows this leader (perhaps in a newer epoch, whose
        follower core then judges what an answer to an older request is worth)."""
        partition = self.partitions.get(key)
        return partition if partition is not None and self._follows(partition) else None

    def _follows(self, partition: Partition) -> bool:
        return partition.follower is not None and partition.follower.leader_id == self.leader_id

    def next_round(self, held: Callable[[Partition], bool] | None = None) -> FetchRound | float | None:
        """This round's asks; or, when every partition backs off, how long until the first one is
        done (ms); or None when none follows this leader any more. `held`: fetches the shell holds
        back this round (the follower throttle)."""
        now_ms = self.clock()
        ready = []
        for key, p in list(self.partitions.items()):
            if not self._follows(p):
                self.remove(key)
            elif self.backoff_until.get(key, 0) <= now_ms:
                ready.append(p)
        if not self.partitions:
            return None
        if not ready:
            return min(self.backoff_until.values()) - now_ms
        round_ = FetchRound({p.key: p.next_fetch_request() for p in ready})
        for p in ready:
            ask = round_.asks[p.key]
            if isinstance(ask, SendOffsetForLeaderEpoch):
                round_.truncating.append(p)
            elif held is None or not held(p):
                round_.fetching.append(p)
        return round_

    def on_epoch_answer(self, round_: FetchRound, key: tuple[str, int], answer: EpochEndOffset) -> int | None:
        """The leader's answer to a truncating partition's OffsetForLeaderEpoch; the LEO it had if
        it truncated."""
        partition = self.current(key)
        ask = round_.asks.get(key)
        if partition is None or not isinstance(ask, SendOffsetForLeaderEpoch):
            return None
        leo = partition.log.log_end_offset
        try:
            backoff = partition.on_epoch_answer(ask, answer)
        except Exception:
            self._failed(partition, "an OffsetForLeaderEpoch answer")
            return None
        if backoff is not None:
            self.back_off(key, backoff.error)
        return leo if partition.log.log_end_offset < leo else None

    def still_fetching(self, round_: FetchRound) -> list[Partition]:
        """The round's fetching partitions that still follow this leader (after its truncations)."""
        return [p for p in round_.fetching if self.current(p.key) is p]

    def on_fetch_answer(self, partitions: list[Partition], error: int, session_id: int) -> bool:
        """A Fetch answer's top level: whether its partitions' answers are to be taken. Not after a
        session error (the next request is full) nor after an error every partition got (each
        backs off)."""
        if not self.session.on_answer(error, session_id):
            log.debug("fetch session with broker %d: error %d; fetching every partition again", self.leader_id, error)
            return False
        if error:
            for p in partitions:
                self.back_off(p.key, error_code(error))
            return False
        return True

    def on_partition_answer(self, round_: FetchRound, key: tuple[str, int], error: ErrorCode,
                            leader_high_watermark: int, records, headers, now_ms: float, leader_log_start_offset: int):
        """One partition's part of a Fetch answer, `now_ms` being the partition's time: what the
        partition decided (None if it no longer follows this leader or failed)."""
        partition = self.current(key)
        ask = round_.asks.get(key)
        if partition is None or not isinstance(ask, SendFetch):
            return None
        try:
            decision = partition.on_fetched(ask, error, leader_high_watermark, records, headers, now_ms,
                                            leader_log_start_offset)
        except Exception:
            self._failed(partition, "a fetch answer")
            return None
        if isinstance(decision, Backoff):
            self.back_off(key, decision.error)
        return decision

    def on_request_failed(self) -> None:
        """A Fetch got no answer: the session starts over."""
        self.session.on_failure()

    def back_off(self, key: tuple[str, int], error: ErrorCode) -> None:
        """Only a partition still held: the wait until the next round is the earliest backoff's."""
        if key in self.partitions:
            log.debug("%s-%d: leader %d answered %s; backing off", *key, self.leader_id, error.name)
            self.backoff_until[key] = self.clock() + backoff_ms(error, self.fetch_backoff_ms())

    def _failed(self, partition: Partition, what: str) -> None:
        if not self.isolate_failures:
            raise
        log.exception("%s-%d: acting on %s from broker %d failed; the partition stops fetching until its next "
                      "role change", *partition.key, what, self.leader_id)
        self.remove(partition.key)
