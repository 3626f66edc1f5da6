"""What the offset index and the time index share: an append-only file of fixed-size entries."""

from __future__ import annotations

import os
from pathlib import Path

from weir.log.file_io import read_whole_entries


class IndexFile:
    ENTRY_SIZE: int  # set by each index

    def __init__(self, path: Path, base_offset: int, max_entries: int):
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_entries)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    def _read_entries(self) -> bytes:
        """The file's whole entries; a torn trailing entry is cut off."""
        return read_whole_entries(self._fd, self.ENTRY_SIZE)

    def _truncate_file(self) -> None:
        os.ftruncate(self._fd, 0)

    def flush(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
