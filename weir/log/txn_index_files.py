"""A log's aborted transaction indexes (KIP-98): one `.txnindex` file per segment, Kafka's format.

Rules this module owns (Kafka's LogSegment.txnIndex and LocalLog.collectAbortedTransactions; the
entries and the file format are weir.transactions.txn_index's):

- An aborted transaction's entry goes to the index of the segment holding its ABORT marker
  (`<base offset>.txnindex` beside the segment's `.log`); a segment with none has no file.
- Entries only ever follow the last one indexed (their markers' offsets increase): an entry
  whose marker is at or below it is already there (a replay after a restart re-offers them).
- Truncation drops the entries whose marker is cut; a removed segment's index goes with it; so
  does the entry of a marker the cleaner removes (before it removes it).
- Durability: entries are written as they come and fsynced when the log flushes its segments.
- Opening reads the files of the segments that survived, without the entries of markers a crash
  cut off (at or past the log end) nor a torn last entry. A file that cannot be read (entries
  that do not parse, do not ascend, or lie outside their segment) drops every file (`lost`):
  the owner then replays the whole log, which indexes every abort again. (Dropping only the
  damaged one would lose its aborts for good: a replay re-offers only what follows the last entry
  indexed, and READ_COMMITTED consumers would read the aborted records.) Files are rewritten
  whole by a rename (never half written). The partition's replay of
  its log after the producer snapshot (weir.replication.transactional) offers the entries of the
  markers it meets again, which restores what a crash lost between a marker and its index write.
- A search starts at the segment holding the fetch offset and stops at the first entry whose last
  stable offset reaches the upper bound (collect_aborted_transactions).

Theory of operation: `AbortedTxnIndexes` keeps every segment's entries in memory (a few per
aborted transaction) and appends each entry to its file as it comes; the owner, PartitionLog,
tells it of truncations and removed segments.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from pathlib import Path

from weir.transactions.txn_index import (ABORTED_TXN_SIZE, AbortedTxn, TransactionIndex, TxnIndexFormatError,
                                         collect_aborted_transactions)

log = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"


def txn_index_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}{TXN_INDEX_SUFFIX}"


class AbortedTxnIndexes:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.indexes: dict[int, TransactionIndex] = {}  # segment base offset -> its entries
        self._unflushed: set[int] = set()  # bases of the files written since the last flush
        self.lost = False  # a damaged file dropped them all at load: the log must be replayed whole

    @classmethod
    def load(cls, directory: Path, bases: list[int], log_end_offset: int) -> AbortedTxnIndexes:
        """The indexes of the segments `bases`, without entries at or past `log_end_offset`."""
        indexes = cls(directory)
        for base, next_base in zip(bases, [*bases[1:], None]):
            path = txn_index_path(directory, base)
            try:
                data = path.read_bytes()
                whole = len(data) - len(data) % ABORTED_TXN_SIZE  # a torn last entry: cut
                index = TransactionIndex.from_bytes(data[:whole])
                if len(index) and (index.entries[0].last_offset < base
                                   or (next_base is not None and index.entries[-1].last_offset >= next_base)):
                    raise TxnIndexFormatError(f"entries from offset {index.entries[0].last_offset} to "
                                              f"{index.entries[-1].last_offset}, outside the segment")
            except FileNotFoundError:
                continue
            except (TxnIndexFormatError, ValueError, OSError) as e:
                log.warning("%s: a damaged transaction index (%r): dropping the log's transaction indexes, to "
                            "build them again from the whole log", path, e)
                for other in bases:
                    txn_index_path(directory, other).unlink(missing_ok=True)
                indexes.indexes.clear()
                indexes.lost = True
                return indexes
            before = len(index)
            index.truncate_to(log_end_offset)
            if len(index) != before or whole != len(data):
                indexes._rewrite(base, index)
            if len(index):
                indexes.indexes[base] = index
        return indexes

    @property
    def last_indexed_offset(self) -> int:
        """The marker offset of the last entry, -1 if none."""
        return max((index.entries[-1].last_offset for index in self.indexes.values() if len(index)), default=-1)

    def append(self, entries: list[AbortedTxn], bases: list[int]) -> None:
        """Index these aborted transactions (markers in the segments `bases`), skipping those
        already indexed."""
        last = self.last_indexed_offset
        for entry in entries:
            at = bisect_right(bases, entry.last_offset) - 1
            if entry.last_offset <= last or at < 0:  # indexed already, or its segment is gone
                continue
            base = bases[at]
            self.indexes.setdefault(base, TransactionIndex()).append(entry)
            fd = os.open(txn_index_path(self.directory, base), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, entry.to_bytes())
            finally:
                os.close(fd)
            self._unflushed.add(base)
            last = entry.last_offset

    def flush(self) -> None:
        """fsync the files written since the last flush (with the log's segments)."""
        for base in sorted(self._unflushed):
            if base not in self.indexes:
                continue
            fd = os.open(txn_index_path(self.directory, base), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._unflushed.clear()

    def collect(self, fetch_offset: int, upper_bound_offset: int, bases: list[int]) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset), searched from
        the segment holding `fetch_offset` on."""
        if not self.indexes:
            return []
        start = max(bisect_right(bases, fetch_offset) - 1, 0)
        return collect_aborted_transactions((self.indexes[b] for b in bases[start:] if b in self.indexes),
                                            fetch_offset, upper_bound_offset)

    def truncate_to(self, offset: int, bases: list[int]) -> None:
        """The log was cut at `offset` and holds the segments `bases` now."""
        self.retain(bases)
        for base, index in list(self.indexes.items()):
            before = len(index)
            index.truncate_to(offset)
            if len(index) != before:
                self._rewrite(base, index)
                if not len(index):
                    del self.indexes[base]

    def forget(self, marker_offsets: set[int]) -> None:
        """The cleaner removes these markers: their entries go."""
        for base, index in list(self.indexes.items()):
            kept = [entry for entry in index.entries if entry.last_offset not in marker_offsets]
            if len(kept) != len(index):
                index = self.indexes[base] = TransactionIndex(kept)
                self._rewrite(base, index)
                if not len(index):
                    del self.indexes[base]

    def retain(self, bases: list[int]) -> None:
        """Only the segments `bases` remain: the indexes of the others go."""
        kept = set(bases)
        for base in [b for b in self.indexes if b not in kept]:
            del self.indexes[base]
            txn_index_path(self.directory, base).unlink(missing_ok=True)

    def clear(self) -> None:
        self.retain([])

    def _rewrite(self, base: int, index: TransactionIndex) -> None:
        path = txn_index_path(self.directory, base)
        if not len(index):
            path.unlink(missing_ok=True)
            return
        swap = path.with_name(path.name + ".swap")  # PartitionLog.open removes a leftover
        swap.write_bytes(index.to_bytes())
        os.replace(swap, path)
