"""The sparse time index of one segment (Kafka's `.timeindex` file).

Entries are (timestamp int64, offset - segment base offset int32), big-endian. An entry (T, O)
says: T is the largest batch max-timestamp of the segment up to and including offset O. Entries
are added alongside offset-index entries, and when the segment is rolled, but only when T grows,
so timestamps ascend strictly. Therefore every batch ending at or before O has maxTimestamp <= T,
and a search for the first batch with maxTimestamp >= target may start after the last entry whose
T < target.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from pathlib import Path

from weir.log.index_file import IndexFile

_ENTRY = struct.Struct(">qi")
ENTRY_SIZE = _ENTRY.size  # 12


class TimeIndex(IndexFile):
    ENTRY_SIZE = ENTRY_SIZE

    def __init__(self, path: Path, base_offset: int, max_entries: int):
        super().__init__(path, base_offset, max_entries)
        self._timestamps: list[int] = []
        self._offsets: list[int] = []  # absolute

    def load(self) -> None:
        data = self._read_entries()
        self._timestamps = []
        self._offsets = []
        for ts, rel in _ENTRY.iter_unpack(data):
            self._timestamps.append(ts)
            self._offsets.append(self.base_offset + rel)

    def looks_sane(self, next_offset: int) -> bool:
        ts, offs = self._timestamps, self._offsets
        if not ts:
            return True
        if offs[-1] >= next_offset or offs[0] < self.base_offset:
            return False
        return all(ts[i] < ts[i + 1] and offs[i] < offs[i + 1] for i in range(len(ts) - 1))

    def __len__(self) -> int:
        return len(self._timestamps)

    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    @property
    def last_timestamp(self) -> int:
        return self._timestamps[-1] if self._timestamps else -1

    @property
    def last_offset(self) -> int:
        return self._offsets[-1] if self._offsets else -1

    def prepare(self, entries: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Of (timestamp, absolute offset) entries, those that raise the largest timestamp (an
        entry for a segment with no timestamp yet, -1, is none of them); checked before anything
        is written: offsets ascend and fit the int32 field. Returns the entries to commit."""
        kept = []
        last_timestamp, last_offset = self.last_timestamp, self.last_offset
        for ts, offset in entries:
            if ts <= last_timestamp:
                continue
            assert 0 <= offset - self.base_offset <= 0x7FFFFFFF and offset > last_offset, \
                f"time index entry ({ts}, {offset}) after offset {last_offset} of segment {self.base_offset}"
            kept.append((ts, offset))
            last_timestamp, last_offset = ts, offset
        return kept

    def commit(self, entries: list[tuple[int, int]]) -> None:
        """Add prepared entries (to the file at the next `write_pending`)."""
        for ts, offset in entries:
            self._timestamps.append(ts)
            self._offsets.append(offset)

    def _encode(self, start: int) -> bytes:
        base = self.base_offset
        return b"".join(_ENTRY.pack(ts, offset - base)
                        for ts, offset in zip(self._timestamps[start:], self._offsets[start:]))

    def append(self, entries: list[tuple[int, int]]) -> None:
        self.commit(self.prepare(entries))

    def offset_before(self, timestamp: int) -> int | None:
        """Offset O of the last entry with T < timestamp: no batch up to O reaches `timestamp`."""
        i = bisect_left(self._timestamps, timestamp) - 1
        return self._offsets[i] if i >= 0 else None

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries at or after `offset`."""
        keep = bisect_left(self._offsets, offset)
        if keep < len(self._offsets):
            self.truncate_to_entries(keep)

    def truncate_to_entries(self, count: int) -> None:
        """Back to the first `count` entries (an append that failed half way)."""
        del self._timestamps[count:], self._offsets[count:]
        self._truncate_file(count)

    def reset(self, entries: list[tuple[int, int]]) -> None:
        self._truncate_file()
        self._timestamps = []
        self._offsets = []
        self.append(entries)

