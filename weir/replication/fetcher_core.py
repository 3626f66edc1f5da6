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

A partition's ask changes only when it does: it is added (a new role), the leader answered for
it, or its log start moved (`touch`). Between those its last ask stands, so a round asks only
those partitions again (and drops those of them that no longer follow this leader), and an idle
partition costs a round no call of its own. A round in which nothing changed (no partition asked
again, none backing off or held back) is the last round again, the same object, which the shell
may take as unchanged without looking at its partitions.
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
        self._asks: dict[tuple[str, int], SendFetch | SendOffsetForLeaderEpoch] = {}  # each partition's last ask
        self._truncating: set[tuple[str, int]] = set()  # those whose last ask is an OffsetForLeaderEpoch
        self._changed: set[tuple[str, int]] = set()  # those to ask again: added, or answered, since
        self._last_round: FetchRound | None = None  # while nothing changed since, the next round too

    def add(self, partition: Partition) -> None:
        self.partitions[partition.key] = partition
        self.backoff_until.pop(partition.key, None)
        self._changed.add(partition.key)

    def touch(self, key: tuple[str, int]) -> None:
        """The partition's log changed outside the fetcher's answers (its log start moved): asked
        again next round."""
        if key in self.partitions:
            self._changed.add(key)

    def remove(self, key: tuple[str, int]) -> None:
        self.partitions.pop(key, None)
        self.backoff_until.pop(key, None)
        self._asks.pop(key, None)
        self._truncating.discard(key)
        self._changed.discard(key)
        self._last_round = None

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
        if not self._changed and not self.backoff_until and held is None and self._last_round is not None:
            return self._last_round
        self._last_round = None
        self._ask_changed()
        if not self.partitions:
            return None
        backoff_until = self.backoff_until
        for key in [key for key, until in backoff_until.items() if until <= now_ms]:
            del backoff_until[key]
        asks = self._asks if not backoff_until else {
            key: ask for key, ask in self._asks.items() if key not in backoff_until}
        if not asks:
            return min(backoff_until.values()) - now_ms
        partitions, truncating = self.partitions, self._truncating
        round_ = FetchRound(dict(asks), [partitions[key] for key in asks if key in truncating])
        fetching = [partitions[key] for key in asks if key not in truncating]
        round_.fetching = fetching if held is None else [p for p in fetching if not held(p)]
        if not backoff_until and held is None and not round_.truncating:
            self._last_round = round_
        return round_

    def _ask_changed(self) -> None:
        """The partitions added or answered since the last round: asked what they want now."""
        for key in sorted(self._changed):
            partition = self.partitions[key]
            if not self._follows(partition):
                self.remove(key)
                continue
            ask = self._asks[key] = partition.next_fetch_request()
            if isinstance(ask, SendOffsetForLeaderEpoch):
                self._truncating.add(key)
            else:
                self._truncating.discard(key)
        self._changed.clear()

    def on_epoch_answer(self, round_: FetchRound, key: tuple[str, int], answer: EpochEndOffset) -> int | None:
        """The leader's answer to a truncating partition's OffsetForLeaderEpoch; the LEO it had if
        it truncated."""
        partition, ask = self._answered(round_, key, SendOffsetForLeaderEpoch)
        if partition is None:
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

    def _answered(self, round_: FetchRound, key: tuple[str, int], kind: type):
        """The partition the leader answered for, and what the round asked of it, if the answer is
        for it (it still follows this leader, and was asked `kind`); else (None, None). Either way
        it is asked again next round, or dropped if it no longer follows this leader."""
        if key in self.partitions:
            self._changed.add(key)
        partition = self.current(key)
        ask = round_.asks.get(key)
        if partition is None or not isinstance(ask, kind):
            return None, None
        return partition, ask

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
        partition, ask = self._answered(round_, key, SendFetch)
        if partition is None:
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
