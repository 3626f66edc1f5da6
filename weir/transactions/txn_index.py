"""The aborted transaction index (KIP-98): what a READ_COMMITTED fetch must tell the consumer to drop.

Rules this module owns (Kafka's `AbortedTxn`, `TransactionIndex`, `LocalLog.collectAbortedTransactions`):

- One entry per ABORTED transaction, appended when its ABORT marker is appended (a committed
  transaction has no entry: a READ_COMMITTED consumer keeps its records). An entry is Kafka's
  AbortedTxn: version, producer id, first offset (the transaction's first record on this
  partition), last offset (the marker's offset), and the last stable offset at the time of the
  abort (`partition_txns` computes it: the first offset of the earliest other ongoing
  transaction, else the marker's offset + 1).
- Entries are in marker order: each last offset above the one before (Kafka refuses otherwise).
- ON DISK, Kafka's `.txnindex` file: entries back to back, 34 bytes each, big-endian:
  version int16 (0), producerId int64, firstOffset int64, lastOffset int64, lastStableOffset
  int64. Reading refuses a version above 0 and a trailing partial entry.
- LOOKUP (`collect_aborted_txns`, Kafka's collectAbortedTxns): the entries that overlap the
  fetch range [fetch offset, upper bound offset): last offset >= fetch offset and first offset <
  upper bound. Kafka searches segment by segment from the one holding the fetch offset and
  stops after the first entry whose last stable offset is >= the upper bound: no later entry can
  begin below it. A fetch answers them as (producer id, first offset) pairs.
- TRUNCATION (`truncate_to`, Kafka's TransactionIndex.truncateTo): entries whose marker is at or
  above the offset go; the transactions they ended are ongoing again (partition_txns' business).

Theory of operation: Kafka keeps one index per log segment (the segment holding the marker);
this is one ordered list of entries for whatever span the caller gives it (a segment, or a whole
log) with no file behind it: `to_bytes` / `from_bytes` are the file's contents.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass
from typing import Iterable

ABORTED_TXN_VERSION = 0
ABORTED_TXN = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = ABORTED_TXN.size  # 34


class TxnIndexFormatError(ValueError):
    """A .txnindex file Kafka would refuse to read."""


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """Kafka's AbortedTxn: one aborted transaction on one partition."""
    producer_id: int
    first_offset: int
    last_offset: int  # its ABORT marker's offset
    last_stable_offset: int
    version: int = ABORTED_TXN_VERSION

    def __post_init__(self) -> None:
        assert self.first_offset <= self.last_offset, self

    def to_bytes(self) -> bytes:
        return ABORTED_TXN.pack(self.version, self.producer_id, self.first_offset, self.last_offset,
                                self.last_stable_offset)

    @classmethod
    def from_bytes(cls, buf, offset: int = 0) -> AbortedTxn:
        version, producer_id, first, last, lso = ABORTED_TXN.unpack_from(buf, offset)
        if version > ABORTED_TXN_VERSION:
            raise TxnIndexFormatError(f"unexpected aborted transaction version {version}")
        if not 0 <= first <= last:
            raise TxnIndexFormatError(f"an aborted transaction from offset {first} to {last}")
        return cls(producer_id, first, last, lso, version)

    def as_aborted_transaction(self) -> tuple[int, int]:
        """FetchResponse's AbortedTransaction: (producer_id, first_offset)."""
        return self.producer_id, self.first_offset


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    aborted: list[AbortedTxn]
    is_complete: bool  # an entry's last stable offset reached the upper bound: no later entry overlaps


class TransactionIndex:
    def __init__(self, entries: Iterable[AbortedTxn] = ()) -> None:
        self.entries: list[AbortedTxn] = []
        for entry in entries:
            self.append(entry)

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, entry: AbortedTxn) -> None:
        """An ABORT marker was appended (TransactionIndex.append)."""
        if self.entries and self.entries[-1].last_offset >= entry.last_offset:
            raise ValueError(f"the last offset of appended transactions must increase: {entry.last_offset} after "
                             f"{self.entries[-1].last_offset}")
        self.entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose marker is at `offset` or above."""
        del self.entries[bisect.bisect_left(self.entries, offset, key=lambda e: e.last_offset):]

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset)."""
        aborted = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
                aborted.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(aborted, True)
        return TxnIndexSearchResult(aborted, False)

    def to_bytes(self) -> bytes:
        return b"".join(entry.to_bytes() for entry in self.entries)

    @classmethod
    def from_bytes(cls, buf) -> TransactionIndex:
        if len(buf) % ABORTED_TXN_SIZE:
            raise TxnIndexFormatError(f"{len(buf)} bytes is not a whole number of {ABORTED_TXN_SIZE}-byte entries")
        return cls(AbortedTxn.from_bytes(buf, at) for at in range(0, len(buf), ABORTED_TXN_SIZE))


def collect_aborted_transactions(indexes: Iterable[TransactionIndex], fetch_offset: int,
                                 upper_bound_offset: int) -> list[AbortedTxn]:
    """LocalLog.collectAbortedTransactions: search the indexes of the segments from the one that
    holds `fetch_offset` onwards, in order, until one answers complete."""
    aborted: list[AbortedTxn] = []
    for index in indexes:
        result = index.collect_aborted_txns(fetch_offset, upper_bound_offset)
        aborted += result.aborted
        if result.is_complete:
            break
    return aborted


__all__ = [
    "ABORTED_TXN_SIZE",
    "AbortedTxn",
    "TransactionIndex",
    "TxnIndexFormatError",
    "TxnIndexSearchResult",
    "collect_aborted_transactions",
]
