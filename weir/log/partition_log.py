"""The durable log of one partition: an ordered list of segments, the last one active.

Rules this module owns:
- Offsets are contiguous: each batch starts where the previous one ended, across segments too.
  `log_start_offset <= log_end_offset` always.
- A batch is written whole with one write per append; a failed write is cut back off.
- `recovery_point` is the offset below which everything is fsynced. Only data at or above it can
  be torn by a crash, so only segments from the one holding it on are CRC-checked at open.
- Retention and DeleteRecords remove whole segments from the front, never data above the high
  watermark, and never the active segment without rolling first. Their files are renamed
  `*.deleted` and deleted file.delete.delay.ms later (at once if it is 0); opening a log deletes
  any left over.

Theory of operation. `append` patches offsets and the leader epoch into the caller's batches
(a leader), or checks them (`append_as_follower`), rolls a new segment when the active one is
full or old, and writes. `read` turns (offset, max_bytes, max_offset) into whole-batch byte
ranges of segment files, found through the sparse offset index and a short header scan. Nothing
here reads the clock: callers pass `now_ms`.
"""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from weir.log.batch_header import BatchInfo, assign_offsets, crc_matches, read_prefix, scan_buffer, scan_file
from weir.log.errors import CorruptRecord, OffsetOutOfRange, RecordBatchTooLarge, UnexpectedAppendOffset
from weir.log.fetch_slice import FetchSlice
from weir.log.file_io import fsync_directory
from weir.log.leader_epoch_cache import LeaderEpochCache
from weir.log.log_config import LogConfig
from weir.log.log_validator import first_record_at_or_after
from weir.log.segment import DELETED_SUFFIX, MAX_RELATIVE_OFFSET, LogSegment
from weir.log.segment_files import SegmentFileCache
from weir.log.txn_index_files import AbortedTxnIndexes
from weir.protocol.record_batch import HEADER_SIZE, read_batch_header

_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)$")
_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, ".cleaned", ".swap")
CLEANING_DIRECTORY = "cleaning"
SET_ASIDE_PREFIX = "set-aside-"
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")  # the files of one segment

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int = -1  # -1: CreateTime


class PartitionLog:
    def __init__(self, directory: Path, config: LogConfig, segments: list[LogSegment],
                 log_start_offset: int, now_ms: int, leader_epochs: LeaderEpochCache,
                 files: SegmentFileCache, rng: random.Random | None = None):
        self.directory = directory
        self.leader_epochs = leader_epochs
        self.config = config
        self.files = files  # the closed segments' open files, shared with the broker's other logs
        self._rng = rng or random.Random()  # segment.jitter.ms
        segments[-1].hold_file()
        segments[-1].roll_jitter_ms = self._roll_jitter()
        # Files of removed segments, renamed *.deleted, as [due time or None, delay, paths]: deleted
        # by delete_due_files once file.delete.delay.ms is over (counted from its first call after
        # the removal when the removal knew no time: DeleteRecords).
        self.retired: list[list] = []
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self.log_end_offset = segments[-1].next_offset
        self.log_start_offset = log_start_offset
        # KIP-98's aborted transaction index, one .txnindex a segment (txn_index_files.py)
        self.txn_indexes = AbortedTxnIndexes.load(directory, self._bases, self.log_end_offset)
        self.recovery_point = segments[0].base_offset
        # The log cleaner's: the first offset not yet cleaned (None: never cleaned); truncation
        # lowers it. `truncations` tells a cleaning under way that the log was cut back.
        self.cleaner_checkpoint: int | None = None
        self.truncations = 0
        self.last_flush_ms = now_ms
        self._directory_dirty = True
        self._closed = False
        self.is_deleted = False
        # Set by the owner (LogDirectory) to persist recovery points and log start offsets when
        # they must not lag: after truncation and DeleteRecords.
        self.on_checkpoint_needed: Callable[[], None] | None = None
        self._check_invariants()

    # ----- opening

    @classmethod
    def open(cls, directory: Path, config: LogConfig, now_ms: int, *, recovery_point: int | None = None,
             log_start_offset: int = 0, clean_shutdown: bool = False, cleaner_checkpoint: int | None = None,
             files: SegmentFileCache | None = None, unwritten_epochs: set | None = None,
             rng: random.Random | None = None) -> "PartitionLog":
        """Create or recover the log in `directory`.

        After a clean shutdown every segment is trusted (checked only for sanity). Otherwise
        segments from the one holding `recovery_point` on are recovered: CRC-checked and cut at
        the first bad batch, with later segments deleted. Without a recovery point, all are.
        Flushed segments after a hole (one emptied or removed) are set aside, not deleted.
        `files`: the cache of closed segments' files the log shares (a cache of its own if none);
        `unwritten_epochs`: where its leader-epoch cache waits to be written (LeaderEpochCache).
        """
        files = SegmentFileCache() if files is None else files
        directory.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(directory / CLEANING_DIRECTORY, ignore_errors=True)  # a cleaning cut short
        bases = _clean_and_list_segments(directory)
        if clean_shutdown:
            first_unsafe = len(bases)
        elif recovery_point is None:
            first_unsafe = 0
        else:
            first_unsafe = max(bisect_right(bases, recovery_point) - 1, 0)

        leader_epochs = LeaderEpochCache.open(directory, unwritten_epochs)

        def learn_epoch(batch: BatchInfo) -> None:
            if batch.leader_epoch > leader_epochs.latest_epoch:
                leader_epochs.assign(batch.leader_epoch, batch.base_offset)

        segments: list[LogSegment] = []
        try:
            recovering = dropping = False
            set_aside: list[int] = []
            for i, base in enumerate(bases):
                if not dropping and segments and segments[-1].next_offset != base:
                    dropping = True  # a hole or an overlap: nothing after it can be trusted
                if dropping:
                    if clean_shutdown or (recovery_point is not None and base < recovery_point):
                        set_aside.append(base)  # flushed data: kept on disk (below)
                    else:
                        logger.warning("%s: deleting segment %d, after the log's recovered end at offset %d",
                                       directory, base, segments[-1].next_offset if segments else base)
                        _delete_segment_files(directory, base)
                    continue
                segment = cls._new_segment(directory, base, config, now_ms, files)
                segments.append(segment)
                if recovering or i >= first_unsafe or not segment.load_trusted():
                    recovering = True
                    if not segment.recover(learn_epoch):
                        dropping = True

            if set_aside:
                _set_aside_segments(directory, set_aside, segments[-1].next_offset if segments else set_aside[0],
                                    now_ms)
            log_start_offset = max(log_start_offset, segments[0].base_offset if segments else 0)
            if segments and segments[-1].next_offset < log_start_offset:
                # The checkpointed start is beyond what survived: start over there (as Kafka does).
                for segment in segments:
                    segment.delete()
                segments.clear()
            if not segments:
                segments.append(cls._new_segment(directory, log_start_offset, config, now_ms, files, active=True))
            log = cls(directory, config, segments, log_start_offset, now_ms, leader_epochs, files, rng)
            if cleaner_checkpoint is not None and cleaner_checkpoint <= log.log_end_offset:
                # past the recovered end: all to clean again (Kafka's cleanableOffsets resets it)
                log.cleaner_checkpoint = cleaner_checkpoint
            leader_epochs.truncate_from_end(log.log_end_offset)
            log._check_leader_epochs()
            leader_epochs.truncate_from_start(log.log_start_offset)
            log.flush()  # recovered tails are now durable, so the recovery point is the LEO
        except BaseException:
            for segment in segments:  # their files leave the cache now, not as it fills up
                segment.close()
            raise
        return log

    def _check_leader_epochs(self) -> None:
        """A checkpoint that is damaged, or whose latest epoch is not the one the last batch was
        written in, from that batch on (lost, or another log's), is rebuilt from every batch's
        leader epoch: OffsetsForLeaderEpoch answers from it, and followers truncate by those
        answers (KIP-101). Kafka would take the log directory offline."""
        epochs, last = self.leader_epochs, self._last_batch()
        if not epochs.damaged and (last is None or last.leader_epoch < 0
                                   or epochs.epoch_for_offset(last.base_offset) == last.leader_epoch
                                   == epochs.latest_epoch):
            return
        logger.warning("%s: %s does not match the log (%s); rebuilding it from the batches", self.directory,
                       epochs.path.name, "damaged" if epochs.damaged else
                       f"epoch {epochs.epoch_for_offset(last.base_offset)} at offset {last.base_offset} and "
                       f"latest {epochs.latest_epoch}, where the last batch says {last.leader_epoch}")
        epochs.rebuild(batch for segment in self._segments
                       for batch in scan_file(segment.file, 0, segment.size, verify_crc=False))

    def _last_batch(self) -> BatchInfo | None:
        for segment in reversed(self._segments):
            if segment.next_offset > segment.base_offset:
                return segment.find_batch(segment.next_offset - 1)
        return None

    @staticmethod
    def _new_segment(directory: Path, base_offset: int, config: LogConfig, now_ms: int, files: SegmentFileCache,
                     *, active: bool = False) -> LogSegment:
        return LogSegment(directory, base_offset, index_interval_bytes=config.index_interval_bytes,
                          index_max_bytes=config.segment_index_bytes, now_ms=now_ms, files=files, active=active)

    # ----- appending

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def append(self, records: bytes | bytearray | memoryview, leader_epoch: int, now_ms: int) -> AppendInfo:
        """Append batches as leader: assign offsets from the LEO and stamp `leader_epoch`.
        A bytearray argument is patched in place; other buffers are copied once."""
        buf = records if isinstance(records, bytearray) else bytearray(records)
        self._check_size(len(buf))
        batches = assign_offsets(buf, self.log_end_offset, leader_epoch)
        return self._append_batches(buf, batches, now_ms)

    def append_as_follower(self, records: bytes | bytearray | memoryview, now_ms: int) -> AppendInfo:
        """Append batches copied from the leader, keeping their offsets and epochs. They must
        start at the LEO and be contiguous; their CRCs are checked (they crossed the network).
        A fetch answer may hold more than log.segment.bytes: it is written segment by segment,
        still all or nothing (what was written is cut off again if a later piece fails). The
        bytes are checked and written where they are, not copied."""
        self._check_open()
        batches = list(scan_buffer(records))
        if not batches:
            raise CorruptRecord("no record batch to append")
        expected = self.log_end_offset
        for batch in batches:
            self._check_size(batch.size)
            if batch.base_offset != expected:
                raise UnexpectedAppendOffset(f"batch at offset {batch.base_offset}, expected {expected}")
            if not crc_matches(records, batch.position, batch.size, read_prefix(records, batch.position)[4]):
                raise CorruptRecord(f"CRC mismatch in batch at offset {batch.base_offset}")
            expected = batch.last_offset + 1
        if len(records) <= self.config.segment_bytes:
            return self._append_batches(records, batches, now_ms)
        start = self.log_end_offset
        try:
            appended = [self._append_batches(piece, chunk, now_ms) for piece, chunk in self._pieces(records, batches)]
        except BaseException:
            self.truncate_to(start)
            raise
        latest = max(appended, key=lambda info: info.max_timestamp)
        return AppendInfo(appended[0].first_offset, appended[-1].last_offset, latest.max_timestamp,
                          latest.offset_of_max_timestamp)

    def _pieces(self, buf, batches: list[BatchInfo]):
        """Runs of whole batches of at most log.segment.bytes, each as (its bytes, its batches)."""
        run: list[BatchInfo] = []
        for batch in batches + [None]:
            if run and (batch is None or batch.position + batch.size - run[0].position > self.config.segment_bytes):
                first = run[0].position
                yield (buf[first:run[-1].position + run[-1].size],
                       [b._replace(position=b.position - first) for b in run])
                run = []
            if batch is not None:
                run.append(batch)

    def _check_size(self, size: int) -> None:
        self._check_open()
        if size > self.config.segment_bytes:
            raise RecordBatchTooLarge(f"{size} bytes exceed log.segment.bytes={self.config.segment_bytes}")

    def _append_batches(self, buf, batches: list[BatchInfo], now_ms: int) -> AppendInfo:
        """Write the batches and learn their leader epochs, all or nothing: if any step fails, the
        segment, the epoch cache and the LEO are as they were (the segment append is all or
        nothing by itself; the epochs, assigned first as Kafka does, are put back)."""
        max_timestamp, offset_of_max = -1, batches[0].last_offset
        for batch in batches:
            if batch.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = batch.max_timestamp, batch.last_offset
        self._maybe_roll(len(buf), batches[-1].last_offset, max_timestamp, now_ms)
        new_epochs, latest = [], self.leader_epochs.latest_epoch
        for batch in batches:
            if batch.leader_epoch >= 0 and batch.leader_epoch != latest:
                new_epochs.append((batch.leader_epoch, batch.base_offset))
                latest = batch.leader_epoch
        epochs_before = self.leader_epochs.entries if new_epochs else None
        try:
            for epoch, start_offset in new_epochs:
                self.leader_epochs.assign(epoch, start_offset)
            self.active_segment.append(buf, batches)
        except BaseException:
            if epochs_before is not None:
                self.leader_epochs.restore(epochs_before)
            raise
        self.log_end_offset = batches[-1].last_offset + 1
        if self.log_end_offset - self.recovery_point >= self.config.flush_interval_messages:
            self.flush(now_ms)
        return AppendInfo(batches[0].base_offset, batches[-1].last_offset, max_timestamp, offset_of_max)

    def _maybe_roll(self, incoming_bytes: int, last_offset: int, incoming_max_timestamp: int, now_ms: int) -> None:
        """Kafka's maybeRoll: a non-empty active segment is rolled when the append would
        overflow log.segment.bytes, it has waited longer than log.roll.ms less its jitter
        (`LogSegment.time_waited_for_roll`), an index is full (segment.index.bytes), or an offset
        would not fit the index's int32 relative offsets."""
        active = self.active_segment
        if active.size == 0:
            return
        if (active.size + incoming_bytes > self.config.segment_bytes
                or active.time_waited_for_roll(now_ms, incoming_max_timestamp)
                > self.config.segment_ms - active.roll_jitter_ms
                or active.offset_index.is_full() or active.time_index.is_full()
                or last_offset - active.base_offset > MAX_RELATIVE_OFFSET):
            self.roll(now_ms)

    def roll(self, now_ms: int) -> None:
        """Start a new active segment at the LEO (no-op if the active one is empty). All or
        nothing: the new segment's files are made before the old one is sealed, and go again if
        sealing fails (out of descriptors, a full disk)."""
        self._check_open()
        if self.active_segment.size == 0:
            return
        segment = self._new_segment(self.directory, self.log_end_offset, self.config, now_ms, self.files, active=True)
        assert segment.size == 0, "a segment file already exists at the log end offset"
        try:
            self.active_segment.seal()
        except BaseException:
            segment.delete()
            raise
        segment.roll_jitter_ms = self._roll_jitter()
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        self._directory_dirty = True

    def _roll_jitter(self) -> int:
        """Kafka's randomSegmentJitter: a new active segment rolls up to segment.jitter.ms (at most
        segment.ms) early, so that partitions created together do not all roll at once."""
        jitter = min(self.config.segment_jitter_ms, self.config.segment_ms)
        return self._rng.randrange(jitter) if jitter > 0 else 0

    # ----- reading

    def read(self, offset: int, max_bytes: int, max_offset: int, *, min_one_batch: bool = True) -> FetchSlice:
        """Whole batches from the one holding `offset`, up to `max_bytes`, and only batches
        that end below `max_offset` (the high watermark, or the LEO for followers). KIP-74: if
        the first batch alone exceeds max_bytes it is still returned (unless min_one_batch is
        False, for a partition that is not the first of a fetch response)."""
        self._check_open()
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(f"offset {offset} outside [{self.log_start_offset}, {self.log_end_offset}]")
        max_offset = min(max_offset, self.log_end_offset)
        slices: list = []
        total = 0
        i = bisect_right(self._bases, offset) - 1
        while offset < max_offset and i < len(self._segments):
            segment = self._segments[i]
            first = segment.find_batch(offset)
            i += 1
            if first is None:
                continue  # offset is this segment's end: go on with the next one
            start = first.position
            if max_offset >= segment.next_offset:
                limit, last_segment = segment.size, False
            else:
                limit, last_segment = segment.find_batch(max_offset).position, True
            budget = max_bytes - total
            if limit - start > budget:
                end = segment.boundary_at_or_before(start + budget) if budget > 0 else start
                if end == start and not slices and min_one_batch and start + first.size <= limit:
                    end = start + first.size
                last_segment = True
            else:
                end = limit
            if end > start:
                slices.append((segment.file, start, end - start))
                total += end - start
            if last_segment:
                break
            offset = segment.next_offset
        return FetchSlice(slices, total)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp >= `timestamp_ms`, as
        ListOffsets answers (never below the log start offset); found through the time index and
        the batches' maxTimestamp, then inside the batch by its records. None if there is none."""
        self._check_open()
        for segment in self._segments:
            if segment.next_offset <= self.log_start_offset or segment.max_timestamp < timestamp_ms:
                continue
            batch = segment.find_batch_by_timestamp(timestamp_ms, self.log_start_offset)
            if batch is not None:
                stored = os.pread(segment.file, batch.size, batch.position)
                offset, found = (first_record_at_or_after(stored, timestamp_ms)
                                 or (batch.base_offset, batch.max_timestamp))
                return max(offset, self.log_start_offset), found
        return None

    def batch_headers(self, from_offset: int = 0):
        """The full headers of the batches from the one holding `from_offset` to the end (for
        rebuilding per-producer state: one small read per batch, never the records)."""
        for segment in self._segments:
            if segment.next_offset <= from_offset:
                continue
            file = segment.file
            for batch in scan_file(file, 0, segment.size, verify_crc=False):
                if batch.last_offset >= from_offset:
                    yield read_batch_header(os.pread(file, HEADER_SIZE, batch.position))

    def batch_at(self, offset: int) -> bytes:
        """The whole batch holding `offset` (a transaction marker, to read it back)."""
        self._check_open()
        segment = self._segments[bisect_right(self._bases, offset) - 1]
        batch = segment.find_batch(offset)
        if batch is None:
            raise OffsetOutOfRange(f"no batch holds offset {offset}")
        return os.pread(segment.file, batch.size, batch.position)

    def append_aborted_txns(self, entries) -> None:
        """Index aborted transactions (weir.transactions.txn_index.AbortedTxn) whose ABORT markers
        this log holds; those already indexed are skipped."""
        self._check_open()
        self.txn_indexes.append(entries, self._bases)

    def forget_aborted_txns(self, marker_offsets: set[int]) -> None:
        """The cleaner is about to remove these markers: their aborted index entries go first."""
        self._check_open()
        self.txn_indexes.forget(marker_offsets)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> list:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset) (READ_COMMITTED fetch)."""
        return self.txn_indexes.collect(fetch_offset, upper_bound_offset, self._bases)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp (ListOffsets
        MAX_TIMESTAMP, KIP-734), as Kafka's UnifiedLog answers since KAFKA-16310: the first batch
        with the largest maxTimestamp, then inside it the first record at that time (for
        LogAppendTime, the batch's first record)."""
        newest = max(self.segments, key=lambda segment: segment.max_timestamp)
        if newest.max_timestamp < 0:
            return None
        batch = newest.find_batch(newest.offset_of_max_timestamp)
        found = batch and first_record_at_or_after(os.pread(newest.file, batch.size, batch.position),
                                                   newest.max_timestamp)
        return found or (newest.offset_of_max_timestamp, newest.max_timestamp)

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch (KIP-101): (largest epoch <= leader_epoch, its end offset)."""
        return self.leader_epochs.end_offset_for(leader_epoch, self.log_end_offset)

    # ----- removing data

    def truncate_to(self, offset: int) -> None:
        """Drop everything at and above `offset` (a follower diverged from its leader). Whole
        batches only: if `offset` falls inside a batch, that batch goes too, and the LEO becomes
        its base offset; the epochs of the cut records go with them. The change is fsynced, so a
        crash cannot bring the data back. (A follower's truncation also trims an epoch that starts
        at the LEO: weir.replication.partition.)"""
        self._check_open()
        if offset >= self.log_end_offset:
            return
        if offset <= self._bases[0]:
            self._truncate_fully_and_start_at(offset)
        else:
            i = bisect_right(self._bases, offset) - 1
            self._segments[i].hold_file()  # the active segment from here on (opened before anything changes)
            for segment in self._segments[i + 1:]:
                segment.delete()
            del self._segments[i + 1:]
            del self._bases[i + 1:]
            self.active_segment.truncate_to(offset)
            self.log_end_offset = self.active_segment.next_offset
            self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
            self.txn_indexes.truncate_to(self.log_end_offset, self._bases)
        self._lower_cleaner_checkpoint()
        self.leader_epochs.truncate_from_end(self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._directory_dirty = True
        self.flush()
        self._checkpoint()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """A follower whose log ends below its leader's log start (DeleteRecords, retention):
        drop everything and go on, empty, from `offset` (Kafka's truncateFullyAndStartAt)."""
        self._check_open()
        self._truncate_fully_and_start_at(offset)
        self._lower_cleaner_checkpoint()
        self._directory_dirty = True
        self.flush()
        self._checkpoint()

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        for segment in self._segments:
            segment.delete()
        self.txn_indexes.clear()
        self._segments = [self._new_segment(self.directory, offset, self.config, self.last_flush_ms, self.files,
                                            active=True)]
        self._segments[0].roll_jitter_ms = self._roll_jitter()
        self._bases = [offset]
        self.log_start_offset = self.log_end_offset = self.recovery_point = offset
        self.leader_epochs.clear_and_flush()

    def _lower_cleaner_checkpoint(self) -> None:
        """After a truncation: what is appended again from the active segment on is dirty, not
        taken for cleaned (Kafka's LogManager.truncateTo, LogCleanerManager.maybeTruncateCheckpoint
        to the active segment's base offset)."""
        self.truncations += 1
        if self.cleaner_checkpoint is not None:
            self.cleaner_checkpoint = min(self.cleaner_checkpoint, self.active_segment.base_offset)

    def delete_records_before(self, offset: int) -> None:
        """DeleteRecords: advance the log start offset to `offset` (never backwards), and delete
        the segments wholly below it."""
        self._check_open()
        if offset > self.log_end_offset or offset < 0:
            raise OffsetOutOfRange(f"offset {offset} beyond log end offset {self.log_end_offset}")
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        self.leader_epochs.truncate_from_start(offset)
        self._delete_old_segments(lambda segment, next_base: next_base <= self.log_start_offset,
                                  self.log_end_offset, now_ms=None)
        self._check_invariants()
        self._checkpoint()

    def enforce_retention(self, now_ms: int, high_watermark: int | None = None) -> int:
        """Delete old segments by log.retention.ms, then log.retention.bytes, then those below
        the log start offset, as Kafka's deleteOldSegments does: from the oldest, stopping at the
        first segment to keep, only segments wholly below the high watermark (all of the log if
        none is given), and rolling first if every segment would go. Returns how many went."""
        self._check_open()
        hw = self.log_end_offset if high_watermark is None else min(high_watermark, self.log_end_offset)
        deleted = 0
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            deleted += self._delete_old_segments(
                lambda segment, next_base: now_ms - segment.largest_timestamp() > retention_ms, hw, now_ms)
        if self.config.retention_bytes >= 0:
            excess = self.size_in_bytes() - self.config.retention_bytes

            def over_size(segment: LogSegment, next_base: int) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True

            deleted += self._delete_old_segments(over_size, hw, now_ms)
        deleted += self._delete_old_segments(
            lambda segment, next_base: next_base <= self.log_start_offset, hw, now_ms)
        self._check_invariants()
        return deleted

    def _delete_old_segments(self, should_delete: Callable[[LogSegment, int], bool], high_watermark: int,
                             now_ms: int | None) -> int:
        count = 0
        for i, segment in enumerate(self._segments):
            is_last = i == len(self._segments) - 1
            next_base = self.log_end_offset if is_last else self._segments[i + 1].base_offset
            if is_last and segment.size == 0:
                break
            if next_base > high_watermark or not should_delete(segment, next_base):
                break
            count += 1
        if count == len(self._segments) and now_ms is None:
            count -= 1  # cannot roll without a time: keep the active segment
        if count == 0:
            return 0
        if count == len(self._segments):
            assert now_ms is not None
            self.roll(now_ms)
        delay = self.config.file_delete_delay_ms
        for segment in self._segments[:count]:
            if delay == 0:
                segment.delete()
            else:
                self.retired.append([None if now_ms is None else now_ms + delay, delay, segment.retire()])
        del self._segments[:count]
        del self._bases[:count]
        self.txn_indexes.retain(self._bases)
        self.log_start_offset = max(self.log_start_offset, self._bases[0])
        self.recovery_point = max(self.recovery_point, self._bases[0])
        self.leader_epochs.truncate_from_start(self.log_start_offset)
        self._directory_dirty = True
        return count

    def delete_due_files(self, now_ms: int) -> int:
        """Delete the *.deleted files of removed segments whose file.delete.delay.ms is over;
        returns how many files went."""
        removed = 0
        for entry in self.retired:
            if entry[0] is None:
                entry[0] = now_ms + entry[1]
            if entry[0] <= now_ms:
                for path in entry[2]:
                    path.unlink(missing_ok=True)
                    removed += 1
        self.retired = [entry for entry in self.retired if entry[0] > now_ms]
        return removed

    # ----- durability

    def flush(self, now_ms: int | None = None) -> None:
        """fsync every segment written since the last flush, and the directory if files came or
        went; then everything below the LEO is durable."""
        self._check_open()
        for segment in self._segments:
            if segment.dirty:
                segment.flush()
        self.txn_indexes.flush()
        if self._directory_dirty:
            fsync_directory(self.directory)
            self._directory_dirty = False
        self.leader_epochs.flush()
        self.recovery_point = self.log_end_offset
        if now_ms is not None:
            self.last_flush_ms = now_ms

    def flush_if_due(self, now_ms: int) -> None:
        """log.flush.interval.ms: flush if unflushed data is older than the interval."""
        if self.log_end_offset > self.recovery_point and now_ms - self.last_flush_ms >= self.config.flush_interval_ms:
            self.flush(now_ms)

    def close(self) -> None:
        """Flush and close the files. The owner records the recovery point (LogDirectory)."""
        if self._closed:
            return
        self.flush()
        for segment in self._segments:
            segment.close()
        self._closed = True

    def delete(self) -> None:
        """Close and remove the partition's directory (topic deletion)."""
        if not self._closed:
            for segment in self._segments:
                segment.close()
            self._closed = True
        self.is_deleted = True
        self.leader_epochs.forget()
        shutil.rmtree(self.directory, ignore_errors=True)

    # ----- compaction

    @property
    def closed_segments(self) -> tuple[LogSegment, ...]:
        """Every segment but the active one: what the cleaner may rewrite."""
        return tuple(self._segments[:-1])

    def cleaned_to(self, offset: int) -> None:
        """A cleaning ended at `offset` (the log's cleaner checkpoint, written at once as Kafka's
        LogCleanerManager.doneCleaning does)."""
        self.cleaner_checkpoint = offset
        self._checkpoint()

    def staging_directory(self) -> Path:
        """Where the cleaner builds a segment's replacement (removed when the log opens)."""
        return self.directory / CLEANING_DIRECTORY

    def replace_segment(self, old: LogSegment) -> bool:
        """Swap in the cleaned copy of closed segment `old` built in the staging directory (same
        offsets, fewer records); False if `old` is no longer a closed segment of this log
        (truncated, deleted, or active again). Crash-safe: the old indexes go first, then the log
        file is replaced in one rename, then the new indexes come in; a crash anywhere leaves a
        log file whose indexes are missing, which opening rebuilds."""
        self._check_open()
        if old not in self._segments[:-1]:
            return False
        staged = self.staging_directory()
        old.hold_file()  # reads of `old` stay on its own file until `new` takes its place, whatever fails
        old.offset_index.path.unlink(missing_ok=True)
        old.time_index.path.unlink(missing_ok=True)
        os.replace(staged / old.log_path.name, old.log_path)
        os.replace(staged / old.offset_index.path.name, old.offset_index.path)
        os.replace(staged / old.time_index.path.name, old.time_index.path)
        fsync_directory(self.directory)
        new = self._new_segment(self.directory, old.base_offset, self.config, self.last_flush_ms, self.files)
        if not new.load_trusted():
            new.recover()
        assert new.next_offset == old.next_offset, "cleaning never changes a segment's offsets"
        self._segments[self._segments.index(old)] = new
        old.close()  # its descriptor closes with its last FetchSlice
        return True

    # ----- state

    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    def _checkpoint(self) -> None:
        if self.on_checkpoint_needed is not None:
            self.on_checkpoint_needed()

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"log {self.directory} is closed")

    def _check_invariants(self) -> None:
        assert self._segments and self._bases == [s.base_offset for s in self._segments]
        assert 0 <= self.log_start_offset <= self.log_end_offset, (self.log_start_offset, self.log_end_offset)
        assert self._bases[0] <= self.log_start_offset
        assert self.log_end_offset == self.active_segment.next_offset
        assert self.active_segment.holds_file, "the active segment keeps its file open"


def _clean_and_list_segments(directory: Path) -> list[int]:
    """Remove leftovers of interrupted deletions and index files without a log; return the base
    offsets of the `.log` files, ascending."""
    logs, indexes = set(), []
    for entry in os.scandir(directory):
        if entry.name.endswith(_LEFTOVER_SUFFIXES):
            os.unlink(entry.path)
            continue
        match = _SEGMENT_FILE.match(entry.name)
        if match is None:
            continue
        if match.group(2) == "log":
            logs.add(int(match.group(1)))
        else:
            indexes.append((int(match.group(1)), entry.path))
    for base, path in indexes:
        if base not in logs:
            os.unlink(path)
    return sorted(logs)


def _set_aside_segments(directory: Path, bases: list[int], log_end_offset: int, now_ms: int) -> None:
    """Segments below the recovery point that do not follow on from the segment before them (one
    was emptied, removed or renamed by hand or by the file system): Weir's log must be contiguous,
    so they leave it, but their data was flushed and acknowledged, so they are moved into a
    `set-aside-<time>` directory of the partition (where nothing reads them, and which goes with
    the partition) instead of being deleted, and said loudly. Kafka would keep serving them
    beyond the gap: its LogLoader deletes segments only from the one holding the recovery point on,
    after one of those was cut (recoverLog)."""
    target = directory / f"{SET_ASIDE_PREFIX}{now_ms}"
    target.mkdir(exist_ok=True)
    for base in bases:
        for suffix in SEGMENT_SUFFIXES:
            name = f"{base:020d}{suffix}"
            try:
                os.rename(directory / name, target / name)
            except FileNotFoundError:
                pass
    fsync_directory(target)
    fsync_directory(directory)
    logger.error("%s: the segments at %s hold flushed data but do not follow on from the log's end at offset %d "
                 "(a segment was emptied, removed or renamed): moved to %s and no longer served", directory,
                 ", ".join(map(str, bases)), log_end_offset, target)


def _delete_segment_files(directory: Path, base_offset: int) -> None:
    for suffix in SEGMENT_SUFFIXES:
        (directory / f"{base_offset:020d}{suffix}").unlink(missing_ok=True)
