"""What the offset index and the time index share: a file of fixed-size entries, appended to in
memory and written out in one go, through a descriptor opened for that write only.

As Kafka's memory-mapped indexes, an entry reaches the file later than its batch reaches the log:
when the segment is flushed or sealed (`write_pending`). What a crash loses of it is rebuilt, as
Kafka rebuilds it: segments above the recovery point are recovered, and the segments below it
were flushed, their entries with them (a segment whose index misses entries fails
`LogSegment.load_trusted` and is recovered too). An append then costs no write per index.

An index holds no descriptor between its reads and writes (issue 41: about one descriptor per
replica): it is read whole when its segment is opened, written when flushed or sealed, cut by its
path, and fsynced only if written or cut since its last fsync.
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
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))  # there from the start, as its .log
        self._written = 0  # entries in the file; those after them are in memory only
        self._unsynced = False  # written or cut since the last fsync

    def _encode(self, start: int) -> bytes:
        """The file's bytes of entries `start` on."""
        raise NotImplementedError

    def _read_entries(self) -> bytes:
        """The file's whole entries; a torn trailing entry is cut off."""
        fd = os.open(self.path, os.O_RDWR)
        try:
            data = read_whole_entries(fd, self.ENTRY_SIZE)
        finally:
            os.close(fd)
        self._written = len(data) // self.ENTRY_SIZE
        return data

    def _truncate_file(self, count: int = 0) -> None:
        """Keep no more than the file's first `count` entries."""
        self._written = min(self._written, count)
        os.truncate(self.path, self._written * self.ENTRY_SIZE)
        self._unsynced = True

    def write_pending(self) -> None:
        """Write the entries only memory has, with one write."""
        if len(self) > self._written:
            self._write(fsync=False)

    def flush(self) -> None:
        if len(self) > self._written or self._unsynced:
            self._write(fsync=True)

    def _write(self, fsync: bool) -> None:
        """Write the pending entries, and fsync if asked. A write that fails part way is cut off
        again: the entries written next must not land after a torn one."""
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            if len(self) > self._written:
                try:
                    write_all(fd, self._encode(self._written))
                except BaseException:
                    os.ftruncate(fd, self._written * self.ENTRY_SIZE)
                    raise
                self._written = len(self)
                self._unsynced = True
            if fsync:
                os.fsync(fd)
                self._unsynced = False
        finally:
            os.close(fd)
