"""Idempotent producers: which batches a partition has seen from each producer.

Rules owned here (Kafka's ProducerStateManager / ProducerAppendInfo, KIP-98 idempotence):

- A batch from producer id P carries P's epoch and the sequence numbers of its records
  (first = baseSequence, last = first + count - 1, wrapping at 2**31 - 1).
- OLDER EPOCH: a batch whose epoch is below P's current epoch is from a fenced producer:
  INVALID_PRODUCER_EPOCH.
- NO STATE: a producer the table does not know (never seen, or forgotten: EXPIRY) is taken at
  any sequence, as Kafka's ProducerAppendInfo since KIP-360: its earlier batches may be gone
  (retention, DeleteRecords, a replica that copied the log from a later start), and refusing
  it would be fatal to a client that did nothing wrong.
- NEW EPOCH (of a producer the table knows, or one known only by a transaction marker): its
  first batch must start at sequence 0; anything else is OUT_OF_ORDER_SEQUENCE_NUMBER.
- DUPLICATE: a batch whose (first, last) sequence equals one of the last five batches of P is a
  retry of a batch already appended: answered with that batch's original offsets and max
  timestamp (Kafka answers it as the log append time) and NOT appended again (the client retried
  because an answer was lost).
- NEXT: otherwise the batch must start right after P's last sequence, else
  OUT_OF_ORDER_SEQUENCE_NUMBER (a gap: something in between was lost).
- Five is the most in-flight requests a client may have with idempotence on
  (max.in.flight.requests.per.connection <= 5), so five remembered batches catch every retry.
- A producer's last timestamp is the max timestamp of its last batch, as appended (what
  DescribeProducers reports, with its epoch and last sequence).
- EXPIRY (producer.id.expiration.ms): a producer whose last timestamp is that long before now is
  forgotten (Kafka's removeExpiredProducers), unless the caller keeps it (an ongoing
  transaction): the table does not grow with every producer that ever wrote.

Theory of operation: one table per partition, on leaders and followers alike. The leader calls
`check` before appending a produced batch and `record` after; followers `record` every batch
they replicate, so a follower that becomes leader already knows every producer. The table is
rebuilt from the log's batch headers at start-up (from a snapshot when there is one) and after a
truncation. It never reads a clock or a file; `to_json` / `from_json` are the snapshot format.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

NO_PRODUCER_ID = -1
BATCHES_REMEMBERED = 5
MAX_SEQUENCE = 2**31 - 1


def last_sequence(first_sequence: int, record_count: int) -> int:
    return (first_sequence + record_count - 1) % (MAX_SEQUENCE + 1)


@dataclass(frozen=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int = -1  # the batch's max timestamp as appended; -1: unknown (an older snapshot)


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_REMEMBERED))
    last_timestamp: int = -1

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


@dataclass(frozen=True)
class Duplicate:
    """A retry of a batch already in the log: answer with its offsets, append nothing."""
    first_offset: int
    last_offset: int
    timestamp: int = -1  # the original batch's max timestamp; -1: unknown


class ProducerStateTable:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, producer_id: int, epoch: int, first_sequence: int,
              record_count: int) -> ErrorCode | Duplicate | None:
        """None: append it. Duplicate: answer with the original offsets. ErrorCode: refuse."""
        if producer_id == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            return ErrorCode.invalid_producer_epoch
        if entry is None:
            return None
        if epoch > entry.epoch or not entry.batches:
            return None if first_sequence == 0 else ErrorCode.out_of_order_sequence_number
        last = last_sequence(first_sequence, record_count)
        for batch in entry.batches:
            if batch.first_sequence == first_sequence and batch.last_sequence == last:
                return Duplicate(batch.first_offset, batch.last_offset, batch.timestamp)
        if first_sequence != (entry.last_sequence + 1) % (MAX_SEQUENCE + 1):
            return ErrorCode.out_of_order_sequence_number
        return None

    def check_epoch(self, producer_id: int, epoch: int) -> ErrorCode | None:
        """The coordinators' own appends (transactional offset commits): Kafka checks their
        producer's epoch, never their sequence numbers."""
        entry = self.producers.get(producer_id)
        return ErrorCode.invalid_producer_epoch if entry is not None and epoch < entry.epoch else None

    def record(self, producer_id: int, epoch: int, first_sequence: int, record_count: int,
               first_offset: int, last_offset: int, max_timestamp: int = -1) -> None:
        """A batch of this producer is in the log now (as leader or follower). Its epoch becomes
        the producer's even when lower: a follower or a replay takes the log as the leader wrote
        it, and a leader that had forgotten the producer (EXPIRY) took any epoch (Kafka's
        ProducerStateEntry.maybeUpdateProducerEpoch)."""
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        entry.batches.append(BatchMetadata(first_sequence, last_sequence(first_sequence, record_count),
                                           first_offset, last_offset, max_timestamp))
        entry.last_timestamp = max_timestamp

    def record_marker(self, producer_id: int, epoch: int, timestamp: int = -1) -> None:
        """A transaction marker of this producer is in the log (KIP-98): it carries no sequence;
        a marker of another epoch (the coordinator's fencing abort) starts the epoch afresh, its
        first batch at sequence 0 (Kafka's ProducerStateEntry.maybeUpdateProducerEpoch)."""
        entry = self.producers.get(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        entry.last_timestamp = timestamp

    def remove_expired(self, now_ms: int, expiration_ms: int, keep: Callable[[int], bool]) -> None:
        """Forget the producers whose last batch is stamped `expiration_ms` or more before
        `now_ms`, except those `keep(producer_id)` holds on to."""
        for producer_id in [pid for pid, entry in self.producers.items()
                            if now_ms - entry.last_timestamp >= expiration_ms and not keep(pid)]:
            del self.producers[producer_id]

    def to_json(self) -> str:
        return json.dumps({str(pid): {"epoch": e.epoch, "batches": [
            [b.first_sequence, b.last_sequence, b.first_offset, b.last_offset, b.timestamp] for b in e.batches],
            "last_timestamp": e.last_timestamp} for pid, e in self.producers.items()})

    @classmethod
    def from_json(cls, text: str) -> "ProducerStateTable":
        """The table `to_json` wrote; ValueError, KeyError, TypeError or AttributeError if `text`
        is not one (every field is checked to be an integer: a damaged file is refused here, not
        at the first produce that reads it)."""
        table = cls()
        for pid, entry in json.loads(text).items():
            table.producers[int(pid)] = ProducerEntry(_integer(entry["epoch"]), deque(
                (BatchMetadata(*map(_integer, b)) for b in entry["batches"]),  # 4 fields: no timestamp
                maxlen=BATCHES_REMEMBERED),
                _integer(entry.get("last_timestamp", -1)))  # snapshots written before it was kept: unknown
        return table


def _integer(value) -> int:
    if type(value) is not int:
        raise TypeError(f"{value!r} is not an integer")
    return value
