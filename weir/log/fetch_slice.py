"""What a read returns: byte ranges of segment files, ready for os.sendfile."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from weir.log.segment_files import SegmentFile


@dataclass(frozen=True)
class FetchSlice:
    """Whole batches, as (file, position, size) ranges in log order. `file` is a SegmentFile: an
    int descriptor usable directly with os.sendfile / os.pread; holding it (or the slice) keeps the
    descriptor open even if retention deletes the segment meanwhile, or the cache of closed
    segments' files drops it (weir.log.segment_files). A truncation (follower) may still shorten
    the file under it, so a sender must treat a short sendfile as end of data."""

    file_slices: list[tuple[SegmentFile, int, int]] = field(default_factory=list)
    size: int = 0

    def read_bytes(self) -> bytes:
        parts = []
        for file, position, size in self.file_slices:
            fd = file.fileno()
            while size > 0:
                chunk = os.pread(fd, size, position)
                if not chunk:
                    break
                parts.append(chunk)
                position += len(chunk)
                size -= len(chunk)
        return b"".join(parts)
