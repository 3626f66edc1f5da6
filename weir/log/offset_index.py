"""The sparse offset index of one segment (Kafka's `.index` file).

One entry per `index_interval_bytes` of log: (last offset of a batch - segment base offset) as
int32 and the batch's file position as int32, big-endian. The whole index lives in memory as two
arrays so lookups are a bisect; the file is read at open and written when the segment is flushed
or sealed (`IndexFile`).

An entry (L, P) says: the batch at position P ends at offset L. So the batch holding offset T
starts at or after the position of the last entry with L <= T, and a short scan of batch headers
from there finds it.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_right
from pathlib import Path

from weir.log.index_file import IndexFile

ENTRY_SIZE = 8


class OffsetIndex(IndexFile):
    ENTRY_SIZE = ENTRY_SIZE

    def __init__(self, path: Path, base_offset: int, max_entries: int):
        super().__init__(path, base_offset, max_entries)
        self._relative_offsets = array("i")
        self._positions = array("i")

    def load(self) -> None:
        """Read the entries from disk; a torn trailing entry is dropped."""
        data = self._read_entries()
        flat = array("i")
        flat.frombytes(data)
        if sys.byteorder == "little":
            flat.byteswap()
        self._relative_offsets = flat[0::2]
        self._positions = flat[1::2]

    def positions_look_sane(self, log_size: int) -> bool:
        """Positions ascend from 0 on and point inside the log, relative offsets ascend from 0 on:
        what a lookup needs before a read may start at one of them (a damaged file can hold
        anything, negative positions too)."""
        positions, offsets = self._positions, self._relative_offsets
        n = len(positions)
        if n == 0:
            return True
        if positions[0] < 0 or positions[-1] >= log_size or offsets[0] < 0:
            return False
        return all(positions[i] < positions[i + 1] and offsets[i] < offsets[i + 1] for i in range(n - 1))

    def looks_sane(self, log_size: int, next_offset: int) -> bool:
        """Entries ascend and point inside the log (Kafka's sanityCheck, a little stronger)."""
        if not self._positions:
            return True
        return self.positions_look_sane(log_size) and self.base_offset + self._relative_offsets[-1] < next_offset

    def __len__(self) -> int:
        return len(self._positions)

    def is_full(self) -> bool:
        return len(self._positions) >= self.max_entries

    def prepare(self, entries: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Check (absolute last offset, position) entries before anything is written: they must
        fit the int32 fields and their positions must ascend. Returns the entries to commit."""
        last_position = self._positions[-1] if self._positions else -1
        for offset, position in entries:
            relative = offset - self.base_offset
            assert 0 <= relative <= 0x7FFFFFFF and last_position < position <= 0x7FFFFFFF, \
                f"index entry ({offset}, {position}) after position {last_position} of segment {self.base_offset}"
            last_position = position
        return entries

    def commit(self, entries: list[tuple[int, int]]) -> None:
        """Add prepared entries (to the file at the next `write_pending`)."""
        for offset, position in entries:
            self._relative_offsets.append(offset - self.base_offset)
            self._positions.append(position)

    def _encode(self, start: int) -> bytes:
        flat = array("i", bytes(8 * (len(self._positions) - start)))
        flat[0::2] = self._relative_offsets[start:]
        flat[1::2] = self._positions[start:]
        if sys.byteorder == "little":
            flat.byteswap()
        return flat.tobytes()

    def append(self, entries: list[tuple[int, int]]) -> None:
        self.commit(self.prepare(entries))

    def position_at_or_before_offset(self, offset: int) -> int:
        """Position of a batch boundary from which a scan finds the batch holding `offset`."""
        i = bisect_right(self._relative_offsets, offset - self.base_offset) - 1
        return self._positions[i] if i >= 0 else 0

    def position_at_or_before(self, position: int) -> int:
        """The greatest indexed batch boundary <= `position` (0 if none)."""
        i = bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches at or after `position`."""
        keep = bisect_right(self._positions, position - 1)
        if keep < len(self._positions):
            self.truncate_to_entries(keep)

    def truncate_to_entries(self, count: int) -> None:
        """Back to the first `count` entries (an append that failed half way)."""
        del self._relative_offsets[count:], self._positions[count:]
        self._truncate_file(count)

    def reset(self, entries: list[tuple[int, int]]) -> None:
        """Replace the whole index (after rebuilding it from the log)."""
        self._truncate_file()
        self._relative_offsets = array("i")
        self._positions = array("i")
        self.append(entries)

