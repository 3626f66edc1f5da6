"""Parked acks=all produce requests of one partition, waiting for the high watermark.

Rules owned here (Kafka's DelayedProduce and Partition.checkEnoughReplicasReachOffset):

- acks=all is answered when the HW >= the batch's last offset + 1 (the "required offset"): every
  member of the maximal ISR then has the batch. acks=1 is answered after the leader's append and
  acks=0 never; neither is parked here.
- Answers, checked in this order each time the purgatory is polled:
    1. leadership moved (not the leader any more, or the leader epoch changed since the request
       was parked) -> REQUEST_TIMED_OUT (7): the batch was appended and the new leader may or may
       not keep it, so the answer must be one of Kafka's "possibly persisted" errors. Kafka itself
       answers NOT_LEADER_OR_FOLLOWER here, which librdkafka reads as "not written" and resends
       without counting a retry (even with retries=0): the record then lands twice (seen by `weir
       verify --nemesis zk-pause`). NOT_LEADER_OR_FOLLOWER stays the answer to a produce the
       broker did not append (epoch_fencing.py);
    2. HW >= required offset -> NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND (20) if the committed
       ISR has fallen below the minimum by then;
    3. the committed ISR is below the minimum -> NOT_ENOUGH_REPLICAS_AFTER_APPEND (20) at once:
       the HW is frozen in that state (leader.py), so waiting could only end in a timeout; this
       answers the client when Kafka's classic rule would (there the HW moves on the shrunken
       ISR and the request completes with error 20);
    4. the request timeout passed -> REQUEST_TIMED_OUT (7).
- Bounded: at most `max_parked` requests; one more raises PurgatoryFull (the shell stops reading
  from that connection, or answers the produce with an error of its choice).

Theory of operation: the shell parks a request with an opaque key after the leader's append, and
after *every* event on the partition (HW advanced, ISR changed, timer fired, leadership changed)
calls `complete_ready(status, now_ms)` with the partition's current `ReplicationStatus`; it
answers each returned completion. Requests are kept in two heaps, by required offset and by
deadline, so a poll costs O(completed * log n); a leader-epoch change scans everything once.
`next_deadline_ms` tells the shell when to set its timer.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass
from typing import Hashable

from kio.schema.errors import ErrorCode

from weir.replication.leader import ReplicationStatus

DEFAULT_MAX_PARKED = 10_000


class PurgatoryFull(Exception):
    pass


@dataclass(frozen=True)
class ProduceCompletion:
    key: Hashable
    error: ErrorCode


@dataclass
class _Parked:
    key: Hashable
    required_offset: int
    leader_epoch: int
    deadline_ms: int
    seq: int


def _decide_at_once(required_offset: int, leader_epoch: int, deadline_ms: int, status: ReplicationStatus,
                    now_ms: int) -> ErrorCode | None:
    """Rules 1-4 for one request, or None if it must wait."""
    if leader_epoch != status.leader_epoch:
        return ErrorCode.request_timed_out
    if status.under_min_isr:
        return ErrorCode.not_enough_replicas_after_append
    if required_offset <= status.high_watermark:
        return ErrorCode.none
    if deadline_ms <= now_ms:
        return ErrorCode.request_timed_out
    return None


class ProducePurgatory:
    def __init__(self, max_parked: int = DEFAULT_MAX_PARKED) -> None:
        assert max_parked >= 1
        self.max_parked = max_parked
        self._parked: dict[Hashable, _Parked] = {}
        self._by_offset: list[tuple[int, int, Hashable]] = []
        self._by_deadline: list[tuple[int, int, Hashable]] = []
        self._epochs: Counter[int] = Counter()
        self._seq = 0

    def __len__(self) -> int:
        return len(self._parked)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._parked

    def park(self, key: Hashable, required_offset: int, leader_epoch: int, deadline_ms: int,
             status: ReplicationStatus, now_ms: int) -> ProduceCompletion | None:
        """Park an acks=all request whose batch ends at `required_offset` - 1, appended under
        `leader_epoch`. Returns its completion at once if it is already decided (e.g. the leader
        is its own whole ISR and the HW moved with the append); other parked requests are not
        looked at."""
        assert key not in self._parked, f"duplicate key {key!r}"
        immediate = _decide_at_once(required_offset, leader_epoch, deadline_ms, status, now_ms)
        if immediate is not None:
            return ProduceCompletion(key, immediate)
        if len(self._parked) >= self.max_parked:
            raise PurgatoryFull(f"{self.max_parked} produce requests already waiting")
        self._seq += 1
        entry = _Parked(key, required_offset, leader_epoch, deadline_ms, self._seq)
        self._parked[key] = entry
        self._epochs[leader_epoch] += 1
        heapq.heappush(self._by_offset, (required_offset, entry.seq, key))
        heapq.heappush(self._by_deadline, (deadline_ms, entry.seq, key))
        return None

    def complete_ready(self, status: ReplicationStatus, now_ms: int) -> list[ProduceCompletion]:
        """Every parked request that is now decided, with its answer (rules 1-4 above)."""
        done: list[ProduceCompletion] = []
        if set(self._epochs) - {status.leader_epoch}:
            for entry in list(self._parked.values()):
                if entry.leader_epoch != status.leader_epoch:
                    done.append(self._remove(entry, ErrorCode.request_timed_out))
        after_hw = ErrorCode.not_enough_replicas_after_append if status.under_min_isr else ErrorCode.none
        while self._by_offset and self._by_offset[0][0] <= status.high_watermark:
            _, seq, key = heapq.heappop(self._by_offset)
            entry = self._parked.get(key)
            if entry is not None and entry.seq == seq:
                done.append(self._remove(entry, after_hw))
        if status.under_min_isr:
            for entry in list(self._parked.values()):
                done.append(self._remove(entry, ErrorCode.not_enough_replicas_after_append))
        while self._by_deadline and self._by_deadline[0][0] <= now_ms:
            _, seq, key = heapq.heappop(self._by_deadline)
            entry = self._parked.get(key)
            if entry is not None and entry.seq == seq:
                done.append(self._remove(entry, ErrorCode.request_timed_out))
        self._drop_stale_heap_entries()
        return done

    def fail_all(self) -> list[ProduceCompletion]:
        """Answer everything REQUEST_TIMED_OUT (rule 1: the partition was deleted, became a follower
        or lost its proof of leadership; what was appended may or may not be kept)."""
        done = [self._remove(entry, ErrorCode.request_timed_out) for entry in list(self._parked.values())]
        self._by_offset.clear()
        self._by_deadline.clear()
        return done

    def next_deadline_ms(self) -> int | None:
        while self._by_deadline:
            _, seq, key = self._by_deadline[0]
            entry = self._parked.get(key)
            if entry is not None and entry.seq == seq:
                return entry.deadline_ms
            heapq.heappop(self._by_deadline)
        return None

    def _drop_stale_heap_entries(self) -> None:
        """Keep the heaps bounded: entries removed by rules 1 and 3 linger until popped."""
        if len(self._by_offset) + len(self._by_deadline) <= 4 * len(self._parked) + 64:
            return
        live = {(e.seq, e.key) for e in self._parked.values()}
        self._by_offset = [t for t in self._by_offset if (t[1], t[2]) in live]
        self._by_deadline = [t for t in self._by_deadline if (t[1], t[2]) in live]
        heapq.heapify(self._by_offset)
        heapq.heapify(self._by_deadline)

    def _remove(self, entry: _Parked, error: ErrorCode) -> ProduceCompletion:
        del self._parked[entry.key]
        self._epochs[entry.leader_epoch] -= 1
        if not self._epochs[entry.leader_epoch]:
            del self._epochs[entry.leader_epoch]
        return ProduceCompletion(entry.key, error)
