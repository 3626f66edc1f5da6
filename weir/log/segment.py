"""One segment of a partition log: a `.log` file of whole batches plus its two sparse indexes.

A segment is named after its base offset (`00000000000000000123.log`, `.index`, `.timeindex`).
Only the last segment of a log (the active one) is appended to. The segment keeps in memory
what the log asks of it often: its valid size, its next offset, its largest timestamp, and its
indexes whole.

Descriptors (weir.log.segment_files): the active segment holds its `.log` open (`hold_file`); a
closed one's is opened when read, through the cache its log shares with the broker's other logs,
and a sealed segment hands its own over to that cache. Its indexes hold none (weir.log.index_file).

Two ways to open an existing segment:
- `load_trusted()` for segments below the recovery point (known flushed): read the indexes, and
  scan only the batch headers after the last index entry to learn the next offset and largest
  timestamp. It reports False when anything looks wrong, and the caller recovers instead.
- `recover()` for segments that may hold a torn tail: read every batch, check its header, its
  offset (each batch must start where the previous one ended), its CRC and its records (the
  validator's record walk), cut the file at the first bad batch, and rebuild both indexes from
  what is left.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_left
from pathlib import Path
from typing import Callable

from weir.log.batch_header import PREFIX_SIZE, BatchInfo, read_prefix, scan_file
from weir.log.errors import SegmentClosed
from weir.log.file_io import write_all
from weir.log.log_validator import recovered_max_timestamp
from weir.log.offset_index import ENTRY_SIZE as OFFSET_ENTRY_SIZE
from weir.log.offset_index import OffsetIndex
from weir.log.segment_files import SegmentFile, SegmentFileCache, open_segment_file
from weir.log.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from weir.log.time_index import TimeIndex

log = logging.getLogger(__name__)

MAX_RELATIVE_OFFSET = 0x7FFFFFFF
DELETED_SUFFIX = ".deleted"  # a removed segment's files, waiting for file.delete.delay.ms


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class RecentBatches:
    """Where the last batches appended to a segment are, so that a read at the tail - where
    followers and caught-up consumers read, several times per append - finds its batch without
    reading the file. Always a suffix of the segment's batches (emptied when the file is cut)."""

    KEEP = 64

    def __init__(self) -> None:
        # Per batch: as appended (its position relative to its append's buffer), and that
        # append's position in the file; made absolute only when found (appends outnumber finds).
        self._batches: list[BatchInfo] = []
        self._append_positions: list[int] = []
        self._last_offsets: list[int] = []

    def add(self, batches: list[BatchInfo], position: int) -> None:
        """`batches`, just written at `position` (their positions are relative to it)."""
        for batch in batches:
            self._batches.append(batch)
            self._append_positions.append(position)
            self._last_offsets.append(batch.last_offset)
        if len(self._batches) > 2 * self.KEEP:
            del self._batches[:-self.KEEP], self._append_positions[:-self.KEEP], self._last_offsets[:-self.KEEP]

    def find(self, offset: int) -> BatchInfo | None:
        """The first batch whose last offset >= `offset`, if the recent batches reach back to it
        (else None: ask the file)."""
        if not self._batches or offset < self._batches[0].base_offset:
            return None
        i = bisect_left(self._last_offsets, offset)
        if i == len(self._batches):
            return None
        batch = self._batches[i]
        return batch._replace(position=self._append_positions[i] + batch.position)

    def clear(self) -> None:
        self._batches.clear()
        self._append_positions.clear()
        self._last_offsets.clear()


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, *, index_interval_bytes: int,
                 index_max_bytes: int, now_ms: int, files: SegmentFileCache, active: bool = False):
        """Open (or create) the segment's files; `active`: it holds its `.log` open from the
        start, else `files` holds it."""
        assert base_offset >= 0
        self.base_offset = base_offset
        self.log_path = directory / segment_file_name(base_offset, ".log")
        file = open_segment_file(self.log_path, create=True)
        self.size = os.fstat(file).st_size
        self.offset_index = OffsetIndex(directory / segment_file_name(base_offset, ".index"),
                                        base_offset, index_max_bytes // OFFSET_ENTRY_SIZE)
        self.time_index = TimeIndex(directory / segment_file_name(base_offset, ".timeindex"),
                                    base_offset, index_max_bytes // TIME_ENTRY_SIZE)
        self._files = files
        self._own_file: SegmentFile | None = file if active else None  # held outside the cache
        self._closed = False
        if not active:
            files.put(self, file)
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = now_ms
        self.roll_jitter_ms = 0  # segment.jitter.ms: drawn by the log when this segment becomes active
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = -1
        self.bytes_since_index_entry = 0
        self.dirty = False  # written since its last fsync
        self.recent = RecentBatches()

    # ----- its file

    @property
    def file(self) -> SegmentFile:
        """The open `.log` file: the segment's own while it holds it (active), else the cache's,
        opened if the cache does not hold it. Keep the object, not int(file), while the
        descriptor is in use."""
        if self._own_file is not None:
            return self._own_file
        if self._closed:
            raise SegmentClosed(f"{self.log_path} was read after its log let it go")
        try:
            return self._files.get(self, self.log_path)
        except FileNotFoundError:
            raise SegmentClosed(f"{self.log_path} is gone") from None

    @property
    def holds_file(self) -> bool:
        return self._own_file is not None

    def hold_file(self) -> None:
        """Keep the `.log` open outside the cache: the segment becomes its log's active one (a
        follower's truncation makes a closed one active again), or is being replaced and must
        go on reading the file it has while the new one takes its name."""
        if self._own_file is None:
            file = self.file
            self._files.take(self)
            self._own_file = file

    # ----- opening an existing segment

    def load_trusted(self) -> bool:
        """Open a segment below the recovery point; False if it needs recover() instead."""
        self.offset_index.load()
        self.time_index.load()
        if len(self.offset_index) and not len(self.time_index):
            return False  # time index lost: the largest timestamp (retention) would be wrong
        if not self.offset_index.positions_look_sane(self.size):
            return False  # checked before the tail scan starts at one of its positions
        if not self._load_tail():
            return False
        return (self.offset_index.looks_sane(self.size, self.next_offset)
                and self.time_index.looks_sane(self.next_offset))

    def _load_tail(self) -> bool:
        """Learn next offset and largest timestamp from the indexes plus a scan of the headers
        after the last offset-index entry. False if that scan does not end exactly at the end of
        the file, or is longer than the index interval (entries are missing)."""
        if self.size == 0:
            self.next_offset = self.base_offset
            self.max_timestamp = self.offset_of_max_timestamp = self.first_batch_timestamp = -1
            self.bytes_since_index_entry = 0
            return True
        file = self.file
        head = os.pread(file, PREFIX_SIZE, 0)
        if len(head) < PREFIX_SIZE or read_prefix(head)[0] != self.base_offset:
            return False
        self.first_batch_timestamp = read_prefix(head)[8]
        self.max_timestamp = self.time_index.last_timestamp
        self.offset_of_max_timestamp = self.time_index.last_offset
        start = self.offset_index.position_at_or_before(self.size)
        end = start
        self.bytes_since_index_entry = 0
        self.next_offset = -1
        for batch in scan_file(file, start, self.size, verify_crc=False,
                               chunk_bytes=self.index_interval_bytes + 1024):
            if self.next_offset >= 0 and batch.base_offset != self.next_offset:
                return False
            if self.bytes_since_index_entry > self.index_interval_bytes:
                return False  # the index misses an entry append would have made: rebuild it
            if batch.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = batch.max_timestamp, batch.last_offset
            self.next_offset = batch.last_offset + 1
            self.bytes_since_index_entry += batch.size
            end = batch.position + batch.size
        return end == self.size and self.next_offset > self.base_offset

    def recover(self, on_batch: Callable[[BatchInfo], None] | None = None) -> bool:
        """Check every batch (header, offset sequence, CRC, and its records as the validator
        does); cut the file at the first bad one and rebuild the indexes. A batch's max timestamp
        is taken from its records, as the validator sets it (batches written before the validator
        may carry -1). `on_batch` sees each good batch. True if the whole file was valid."""
        file_size = self.size
        file = self.file
        self.size = 0
        self.recent.clear()
        self.next_offset = self.base_offset
        self.max_timestamp = self.offset_of_max_timestamp = self.first_batch_timestamp = -1
        self.bytes_since_index_entry = 0
        offset_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        for batch in scan_file(file, 0, file_size, verify_crc=True, inspect=recovered_max_timestamp):
            if (batch.base_offset != self.next_offset
                    or batch.last_offset - self.base_offset > MAX_RELATIVE_OFFSET):
                break
            self._account(batch, batch.position, offset_entries, time_entries)
            if on_batch is not None:
                on_batch(batch)
            self.next_offset = batch.last_offset + 1
            self.size = batch.position + batch.size
        if self.size < file_size:
            log.warning("%s: recovery dropped %d bytes from byte %d (offset %d on): a torn, corrupt or invalid "
                        "batch", self.log_path, file_size - self.size, self.size, self.next_offset)
            os.ftruncate(file, self.size)
        self.offset_index.reset(offset_entries)
        self.time_index.reset(time_entries)
        self.dirty = True
        return self.size == file_size

    # ----- appending

    def _account(self, batch: BatchInfo, position: int, offset_entries: list, time_entries: list) -> None:
        """Kafka's per-batch bookkeeping: track the largest timestamp, and add an index entry
        once more than index_interval_bytes were written since the last one."""
        if self.first_batch_timestamp < 0 and position == 0:
            self.first_batch_timestamp = batch.max_timestamp
        if batch.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = batch.max_timestamp, batch.last_offset
        if self.bytes_since_index_entry > self.index_interval_bytes:
            offset_entries.append((batch.last_offset, position))
            time_entries.append((self.max_timestamp, self.offset_of_max_timestamp))
            self.bytes_since_index_entry = 0
        self.bytes_since_index_entry += batch.size

    def append(self, buf, batches: list[BatchInfo]) -> None:
        """Write whole batches (positions relative to `buf`) with one write, then index them (in
        memory: the index files are written when the segment is flushed or sealed). All or
        nothing: the invariants are checked before the write, and if it fails, the file, both
        indexes and every counter are cut back to what they were."""
        assert batches and batches[0].base_offset == self.next_offset, "offsets must be contiguous"
        assert self._own_file is not None, "only the active segment is appended to"
        assert batches[-1].last_offset - self.base_offset <= MAX_RELATIVE_OFFSET
        position = self.size
        tally = (self.first_batch_timestamp, self.max_timestamp, self.offset_of_max_timestamp,
                 self.bytes_since_index_entry)
        index_lengths = len(self.offset_index), len(self.time_index)
        written = False
        try:
            offset_entries: list[tuple[int, int]] = []
            time_entries: list[tuple[int, int]] = []
            for batch in batches:
                self._account(batch, position + batch.position, offset_entries, time_entries)
            offset_entries = self.offset_index.prepare(offset_entries)
            time_entries = self.time_index.prepare(time_entries)
            written = True
            write_all(self._own_file, buf)
            self.dirty = True
            self.offset_index.commit(offset_entries)
            self.time_index.commit(time_entries)
        except BaseException:
            (self.first_batch_timestamp, self.max_timestamp, self.offset_of_max_timestamp,
             self.bytes_since_index_entry) = tally
            if written:
                os.ftruncate(self._own_file, position)
                self.offset_index.truncate_to_entries(index_lengths[0])
                self.time_index.truncate_to_entries(index_lengths[1])
            raise
        self.size = position + len(buf)
        self.next_offset = batches[-1].last_offset + 1
        self.recent.add(batches, position)

    def seal(self) -> None:
        """Called when the segment stops being active: record its largest timestamp in the time
        index, so the index alone tells the segment's largest timestamp, write both indexes, and
        hand the `.log` over to the cache."""
        assert self._own_file is not None, "only the active segment is sealed"
        if self.max_timestamp > self.time_index.last_timestamp:
            self.time_index.append([(self.max_timestamp, self.offset_of_max_timestamp)])
        self.offset_index.write_pending()
        self.time_index.write_pending()
        self._files.put(self, self._own_file)
        self._own_file = None

    def time_waited_for_roll(self, now_ms: int, incoming_max_timestamp: int) -> int:
        """What log.roll.ms is compared with, as Kafka's timeWaitedForRoll: in message time when
        the first batch has a timestamp (the incoming batches' largest less the first batch's),
        so records stamped long ago do not roll a segment per append; else the wall-clock time
        since the segment was created."""
        if self.first_batch_timestamp >= 0:
            return incoming_max_timestamp - self.first_batch_timestamp
        return now_ms - self.created_ms

    def largest_timestamp(self) -> int:
        """What log.retention.ms compares with: the largest batch timestamp, or the file's
        modification time when no batch has a timestamp."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.fstat(self.file).st_mtime_ns // 1_000_000

    # ----- finding batches

    def _scan(self, start: int, end: int):
        return scan_file(self.file, start, end, verify_crc=False,
                         chunk_bytes=self.index_interval_bytes + 1024)

    def find_batch(self, offset: int) -> BatchInfo | None:
        """The batch holding `offset` (the first whose last offset >= offset), if any."""
        if offset >= self.next_offset:
            return None
        recent = self.recent.find(offset)
        if recent is not None:
            return recent
        start = self.offset_index.position_at_or_before_offset(offset)
        for batch in self._scan(start, self.size):
            if batch.last_offset >= offset:
                return batch
        return None

    def boundary_at_or_before(self, position: int) -> int:
        """The greatest batch boundary <= `position`."""
        position = min(position, self.size)
        end = self.offset_index.position_at_or_before(position)
        for batch in self._scan(end, position):
            end = batch.position + batch.size
        return end

    def find_batch_by_timestamp(self, timestamp: int, min_offset: int) -> BatchInfo | None:
        """The first batch ending at or after `min_offset` with maxTimestamp >= `timestamp`."""
        if self.max_timestamp < timestamp:
            return None
        before = self.time_index.offset_before(timestamp)
        start_offset = max(min_offset, before + 1 if before is not None else self.base_offset)
        start = self.offset_index.position_at_or_before_offset(start_offset)
        for batch in self._scan(start, self.size):
            if batch.last_offset >= min_offset and batch.max_timestamp >= timestamp:
                return batch
        return None

    # ----- changing and closing

    def truncate_to(self, offset: int) -> None:
        """Remove the batch holding `offset` and everything after it."""
        batch = self.find_batch(offset)
        if batch is None:
            return
        os.ftruncate(self.file, batch.position)
        self.size = batch.position
        self.recent.clear()
        self.offset_index.truncate_to_position(batch.position)
        self.time_index.truncate_to_offset(batch.base_offset)
        self.dirty = True
        if not self._load_tail():
            self.recover()  # indexes disagree with the log: rebuild them from it
        assert self.next_offset == batch.base_offset, "segment inconsistent after truncation"

    def flush(self) -> None:
        os.fsync(self.file)
        self.offset_index.flush()
        self.time_index.flush()
        self.dirty = False

    def close(self) -> None:
        """Let the `.log` go (index entries not yet written are dropped: flush first); its
        descriptor closes once no FetchSlice holds it. The segment is read no more."""
        self._closed = True
        self._own_file = None
        self._files.take(self)

    def delete(self) -> None:
        """Remove the files. The log file's descriptor stays open until no FetchSlice holds it."""
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            path.unlink(missing_ok=True)

    def retire(self) -> list[Path]:
        """Remove the segment from the log but not yet from the disk (Kafka's asyncDeleteSegment):
        rename its files `*.deleted`, the log file first, and return their new paths for the owner
        to delete after file.delete.delay.ms. Opening a log removes such leftovers. The log file's
        descriptor stays open until no FetchSlice holds it, as with delete()."""
        self.close()
        retired = []
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            target = path.with_name(path.name + DELETED_SUFFIX)
            try:
                os.rename(path, target)
            except FileNotFoundError:
                continue
            retired.append(target)
        return retired
