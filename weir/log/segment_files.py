"""The open `.log` files of a broker's segments: about one descriptor per replica (issue 41).

Rules this module owns:
- A log's active segment holds its `.log` open: every produce appends to it.
- A closed (rolled) segment's `.log` is opened when it is read, through the one SegmentFileCache
  the broker's logs share, which keeps at most `limit` of them open and drops the least recently
  read beyond that. (Kafka keeps every segment open and maps its indexes; Weir's indexes live in
  memory and reach their files through short-lived descriptors: weir.log.index_file.)
- A descriptor closes when its last holder drops it (SegmentFile). The cache dropping a file that
  a FetchSlice still holds does not close it, so a fetch being sent never sees its descriptor
  closed or reused by another file; the cache bounds the files it holds, fetches in flight hold
  the rest.
- That is also why the cache needs no lock with the log cleaner's thread reading beside the event
  loop: each step is one dict operation, and a race costs at most an extra open, or an entry that
  stays until the cache drops it.
- Out of descriptors (EMFILE, ENFILE), the cache drops its least recently read files and opens
  again, before it gives up.
"""

from __future__ import annotations

import errno
import os
from collections import OrderedDict
from pathlib import Path

DEFAULT_LIMIT = 1000  # weir.log.closed.segment.files.max
OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


class SegmentFile(int):
    """The open descriptor of a `.log` file, shared by its segment (or the cache) and by
    outstanding FetchSlices.

    It is an int (the descriptor itself), so os.pread / os.sendfile take it as is. The descriptor
    is closed when the last holder drops this object, so a fetch being sent never sees it closed
    or reused by another file, even after its segment was deleted. Keep the object, not
    int(file), for as long as the descriptor is used.
    """

    def __new__(cls, fd: int) -> "SegmentFile":
        file = super().__new__(cls, fd)
        file.closed = False
        return file

    def fileno(self) -> int:
        if self.closed:
            raise ValueError("segment file is closed")
        return int(self)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(int(self))

    def __del__(self):
        try:
            self.close()
        except OSError:
            pass


def open_segment_file(path: Path, *, create: bool = False) -> SegmentFile:
    """Open a `.log` file for reads, appends and truncation (a closed segment may become active
    again: a follower's truncation)."""
    return SegmentFile(os.open(path, os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0), 0o644))


class SegmentFileCache:
    """The closed segments' open files, least recently read first, at most `limit` of them."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        assert limit >= 1, "a cache holds one file at least"
        self.limit = limit
        self._files: OrderedDict[object, SegmentFile] = OrderedDict()

    def __len__(self) -> int:
        return len(self._files)

    def get(self, owner, path: Path) -> SegmentFile:
        """The open file of `owner` (a segment), opened from `path` if the cache does not hold it."""
        file = self._files.get(owner)
        if file is None:
            return self.put(owner, self._open(path))
        try:
            self._files.move_to_end(owner)
        except KeyError:
            pass  # dropped by another thread meanwhile: ours to use all the same
        return file

    def put(self, owner, file: SegmentFile) -> SegmentFile:
        """Hold `owner`'s open file (a segment that stops being active hands its own over)."""
        self._files.pop(owner, None)
        self._files[owner] = file  # the most recent: last
        while len(self._files) > self.limit:
            self._drop_least_recent()
        return file

    def take(self, owner) -> SegmentFile | None:
        """Stop holding `owner`'s file (it becomes active, or goes); the file, if held."""
        return self._files.pop(owner, None)

    def _open(self, path: Path) -> SegmentFile:
        while True:
            try:
                return open_segment_file(path)
            except OSError as e:
                if e.errno not in OUT_OF_DESCRIPTORS or not self._files:
                    raise
                self._drop_least_recent()

    def _drop_least_recent(self) -> None:
        try:
            self._files.popitem(last=False)
        except KeyError:
            pass  # emptied by another thread meanwhile
