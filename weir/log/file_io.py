"""The raw-file operations the log repeats: write all bytes, read whole entries, fsync a directory."""

from __future__ import annotations

import os
from pathlib import Path


def write_all(fd: int, data) -> None:
    """os.write until every byte is written (a regular file may take fewer on some errors)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def fsync_directory(directory: Path) -> None:
    """Make file creations, renames and deletions in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_whole_entries(fd: int, entry_size: int) -> bytes:
    """All complete fixed-size entries of an index file; a torn trailing entry is cut off."""
    size = os.fstat(fd).st_size
    whole = size - size % entry_size
    if whole != size:
        os.ftruncate(fd, whole)
    return os.pread(fd, whole, 0)
