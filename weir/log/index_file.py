"""What the offset index and the time index share: a file of fixed-size entries, appended to in
memory and written out in one go.

As Kafka's memory-mapped indexes, an entry reaches the file later than its batch reaches the log:
when the segment is flushed or sealed (`write_pending`). What a crash loses of it is rebuilt, as
Kafka rebuilds it: segments above the recovery point are recovered, and the segments below it
were flushed, their entries with them (a segment whose index misses entries fails
`LogSegment.load_trusted` and is recovered too). An append then costs no write per index.
"""

from __future__ import annotations

import os
from pathlib import Path

from weir.log.file_io import read_whole_entries, write_all


class IndexFile:
    ENTRY_SIZE: int  # set by each index

    def __init__(self, path: Path, base_offset: int, max_entries: int):
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_entries)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._written = 0  # entries in the file; those after them are in memory only

    def _encode(self, start: int) -> bytes:
        """The file's bytes of entries `start` on."""
        raise NotImplementedError

    def _read_entries(self) -> bytes:
        """The file's whole entries; a torn trailing entry is cut off."""
        data = read_whole_entries(self._fd, self.ENTRY_SIZE)
        self._written = len(data) // self.ENTRY_SIZE
        return data

    def _truncate_file(self, count: int = 0) -> None:
        """Keep no more than the file's first `count` entries."""
        self._written = min(self._written, count)
        os.ftruncate(self._fd, self._written * self.ENTRY_SIZE)

    def write_pending(self) -> None:
        """Write the entries only memory has, with one write. A write that fails part way is cut
        off again: the entries written next must not land after a torn one."""
        if len(self) > self._written:
            try:
                write_all(self._fd, self._encode(self._written))
            except BaseException:
                os.ftruncate(self._fd, self._written * self.ENTRY_SIZE)
                raise
            self._written = len(self)

    def flush(self) -> None:
        self.write_pending()
        os.fsync(self._fd)

    def close(self) -> None:
        """Close the file; entries not yet written are dropped (`flush` first to keep them)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
