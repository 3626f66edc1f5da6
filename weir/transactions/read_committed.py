"""What a READ_COMMITTED fetch returns and what a Kafka consumer keeps of it (KIP-98), on bytes.

Rules this module owns (the broker's half: Kafka's `LocalLog.read` with FetchIsolation.TXN_COMMITTED
and `addAbortedTransactions`; the client's half: the Java consumer's `CompletedFetch` with
isolation.level=read_committed). It exists so tests can check Kafka's semantics end to end on
bytes; the client half is never run by the broker.

- BROKER. A READ_COMMITTED fetch returns whole batches from the one holding the fetch offset,
  only those that end below the last stable offset, and the aborted transactions overlapping
  [fetch offset, upper bound): the upper bound is the base offset of the first batch not
  returned (Kafka's fetchUpperBoundOffset), else the log end offset.
- CLIENT. The aborted transactions are taken in first-offset order. Before each batch with a
  producer id, every aborted transaction whose first offset is at or below the batch's last
  offset marks its producer aborted. A transactional data batch of an aborted producer is
  dropped; an ABORT marker clears its producer (what follows is another transaction). Control
  batches are never records for the application. Everything else is read.

Theory of operation: `fetch_read_committed` cuts a log (batches in offset order) as the broker
does; `consume_read_committed` and `consume_read_uncommitted` give the records a consumer hands
to the application.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Iterable, Sequence

from weir.protocol.record_batch import CONTROL_BIT, TRANSACTIONAL_BIT, read_batch_header, records_section
from weir.transactions.markers import ControlRecordType, first_record_key_value, parse_control_key, read_record
from weir.transactions.txn_index import TransactionIndex, collect_aborted_transactions


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    offset: int
    key: bytes | None
    value: bytes | None


def fetch_read_committed(log: Sequence[bytes], indexes: Iterable[TransactionIndex], fetch_offset: int,
                         last_stable_offset: int, log_end_offset: int) -> tuple[list[bytes], list[tuple[int, int]]]:
    """The batches and (producer id, first offset) aborted transactions a READ_COMMITTED fetch
    at `fetch_offset` answers, from `log` (whole batches in offset order)."""
    returned = []
    upper_bound = log_end_offset
    for batch in log:
        header = read_batch_header(batch)
        if header.last_offset < fetch_offset:
            continue
        if header.last_offset >= last_stable_offset:
            upper_bound = header.base_offset
            break
        returned.append(batch)
    aborted = collect_aborted_transactions(indexes, fetch_offset, upper_bound)
    return returned, [txn.as_aborted_transaction() for txn in aborted]


def _records(batch) -> list[ConsumedRecord]:
    header = read_batch_header(batch)
    data = records_section(batch)
    out, position = [], 0
    for _ in range(header.record_count):
        _, offset_delta, key, value, position = read_record(data, position)
        out.append(ConsumedRecord(header.base_offset + offset_delta, key, value))
    return out


def _is_abort_marker(batch) -> bool:
    """CompletedFetch.containsAbortMarker."""
    record = first_record_key_value(batch)
    return record is not None and parse_control_key(record[0]) == ControlRecordType.ABORT


class AbortedTransactionFilter:
    """The CLIENT rule, one batch at a time: feed it every batch of one fetch answer, in order."""

    def __init__(self, aborted_transactions: Iterable[tuple[int, int]]) -> None:
        self._queue = [(first_offset, producer_id) for producer_id, first_offset in aborted_transactions]
        heapq.heapify(self._queue)
        self._aborted_producers: set[int] = set()

    def keep(self, header, batch) -> bool:
        """Whether the batch's records go to the application (`batch`: its bytes, read only for
        a control batch's marker)."""
        is_control = bool(header.attributes & CONTROL_BIT)
        if header.producer_id >= 0:
            queue = self._queue
            while queue and queue[0][0] <= header.last_offset:  # consumeAbortedTransactionsUpTo
                self._aborted_producers.add(heapq.heappop(queue)[1])
            if is_control and _is_abort_marker(batch):
                self._aborted_producers.discard(header.producer_id)
            elif header.attributes & TRANSACTIONAL_BIT and header.producer_id in self._aborted_producers:
                return False
        return not is_control


def consume_read_committed(batches: Iterable[bytes], aborted_transactions: Iterable[tuple[int, int]],
                           fetch_offset: int = 0) -> list[ConsumedRecord]:
    """The records a read_committed consumer hands the application from one fetch answer."""
    keep = AbortedTransactionFilter(aborted_transactions).keep
    return [r for batch in batches if keep(read_batch_header(batch), batch)
            for r in _records(batch) if r.offset >= fetch_offset]


def consume_read_uncommitted(batches: Iterable[bytes], fetch_offset: int = 0) -> list[ConsumedRecord]:
    """Every data record (read_uncommitted): aborted ones too; markers never."""
    return [r for batch in batches if not read_batch_header(batch).attributes & CONTROL_BIT
            for r in _records(batch) if r.offset >= fetch_offset]


__all__ = [
    "AbortedTransactionFilter",
    "ConsumedRecord",
    "consume_read_committed",
    "consume_read_uncommitted",
    "fetch_read_committed",
]
