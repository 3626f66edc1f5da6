"""Kafka's log cleaner: compacts the logs of topics whose cleanup.policy has `compact`.

A thread of its own, never the event loop, does the reading and rewriting; the event loop only
hands it a snapshot of each log's closed segments and swaps each cleaned segment in
(PartitionLog.replace_segment), so a read or an append never waits for it. Which records stay is
weir.log.cleaner's. Leaders and followers clean their own copies, as in Kafka.

Only closed segments wholly below the last stable offset (KIP-98: never an undecided
transaction; the LSO is at most the high watermark) are cleaned, and of those written since the
log's last cleaning (dirty), none from the first one holding a record newer than
min.compaction.lag.ms (Kafka's first uncleanable offset). A log is cleaned when the bytes of its
dirty cleanable segments are more than min.cleanable.dirty.ratio of all of its cleanable ones, or
when its oldest dirty record is older than max.compaction.lag.ms whatever the ratio (KIP-354).
A tombstone goes delete.retention.ms after the first cleaning that kept it (KIP-534: that cleaning
stamps its batch with the delete horizon); so does a transaction marker whose transaction holds
no record any more (weir.log.cleaner).

As Kafka's: the offset map holds the keys of the dirty segments only (a key of the clean part
newer in the dirty part is superseded; the clean part has no key twice), at most as many as
log.cleaner.dedupe.buffer.size allows (24 bytes a key, log.cleaner.io.buffer.load.factor full):
when the dirty part has more, a pass cleans up to the last dirty segment whose keys fit (at least
one) and the next pass goes on. Where each log's cleaning ended is the log's cleaner checkpoint
(PartitionLog.cleaner_checkpoint, kept in the log directory's cleaner-offset-checkpoint), so a
restart does not clean everything again; a truncation lowers it, and a cleaning under way when
its log is truncated is given up (Kafka's abortAndPauseCleaning): its offset map may hold records
that are gone. One whole segment at a time is read into memory.

A log whose cleaning fails (a damaged segment, say) is logged and left uncleanable, and the pass
goes on with the other logs, as Kafka's LogCleanerManager.markPartitionUncleanable: it is tried
again only as a new log (its partition deleted and made anew, moved away and back) or after a
restart (the uncleanable-partitions-count metric counts them).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import shutil
import threading
import time
from typing import NamedTuple

from weir.log.cleaner import MarkerRetention, aborted_spans, clean_segment, expired_markers, latest_offsets
from weir.log.errors import SegmentClosed
from weir.log.segment import LogSegment

log = logging.getLogger(__name__)

BYTES_PER_KEY = 24  # Kafka's SkimpyOffsetMap: a 16-byte MD5 of the key and an 8-byte offset


class CleaningAborted(Exception):
    """The log was truncated while being cleaned."""


class CleaningConfig(NamedTuple):
    """A compacted topic's settings for the cleaner, in the order of CONFIGS."""
    delete_retention_ms: int
    min_cleanable_ratio: float
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int

    CONFIGS = ("delete.retention.ms", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "max.compaction.lag.ms")


class LogToClean(NamedTuple):
    """What a pass reads of a compacted log on the event loop."""
    key: tuple[str, int]
    log: object  # its PartitionLog
    closed: tuple[LogSegment, ...]  # below the LSO
    config: CleaningConfig
    cleaned_to: int  # the log's cleaner checkpoint, -1 if never cleaned
    truncations: int  # PartitionLog.truncations then
    aborted: dict  # aborted_spans of its aborted transactions


def cleanable_segments(closed: tuple[LogSegment, ...], cleaned_to: int,
                       newest_cleanable_ms: int) -> tuple[LogSegment, ...]:
    """The segments the cleaner may rewrite (min.compaction.lag.ms, Kafka's first uncleanable
    offset): `closed` up to the first dirty one (at or above `cleaned_to`) holding a record
    newer than `newest_cleanable_ms`, now less the lag."""
    for i, segment in enumerate(closed):
        if segment.next_offset > cleaned_to and segment.largest_timestamp() > newest_cleanable_ms:
            return closed[:i]
    return closed


def is_due(cleanable: tuple[LogSegment, ...], cleaned_to: int, config: CleaningConfig, now_ms: int) -> bool:
    """Whether to clean the log now: its dirty bytes are more than min.cleanable.dirty.ratio of
    its cleanable bytes (Kafka's grabFilthiestCompactedLog: cleanableRatio > minCleanableRatio, so
    1 never and 0 only with dirty bytes), or some are dirty and its oldest dirty batch is older
    than max.compaction.lag.ms (needCompactionNow, from each dirty segment's first batch timestamp)."""
    total = sum(s.size for s in cleanable)
    dirty = [s for s in cleanable if s.next_offset > cleaned_to]
    if total == 0:
        return False
    if sum(s.size for s in dirty) / total > config.min_cleanable_ratio:
        return True
    first_timestamps = [s.first_batch_timestamp for s in dirty if s.first_batch_timestamp > 0]
    return bool(first_timestamps) and min(first_timestamps) < now_ms - config.max_compaction_lag_ms


def map_capacity(config) -> int:
    """The most keys one cleaning maps (log.cleaner.dedupe.buffer.size, .io.buffer.load.factor)."""
    return max(1, int(config["log.cleaner.dedupe.buffer.size"] // BYTES_PER_KEY
                      * config["log.cleaner.io.buffer.load.factor"]))


class LogCleaner:
    def __init__(self, replicas, loop) -> None:
        self.replicas = replicas
        self.loop = loop
        self.uncleanable: set = set()  # the PartitionLogs whose cleaning failed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="log-cleaner", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.replicas.config["log.cleaner.backoff.ms"] / 1000):
            try:
                self.clean_once()
            except Exception:
                log.exception("log cleaner: a pass failed")

    def _on_loop(self, fn, *args):
        """Run fn(*args) on the event loop and return its result (the cleaner's thread waits)."""
        done: concurrent.futures.Future = concurrent.futures.Future()

        def call() -> None:
            try:
                done.set_result(fn(*args))
            except BaseException as e:
                done.set_exception(e)
        self.loop.call_soon_threadsafe(call)
        while not self._stop.is_set():
            try:
                return done.result(timeout=1)
            except concurrent.futures.TimeoutError:
                continue
        raise InterruptedError("the broker is stopping")

    def _candidates(self) -> list[LogToClean]:
        """On the loop: each compacted log's LogToClean."""
        replicas, out = self.replicas, []
        # Kafka's maintainUncleanablePartitions: a log no longer hosted is forgotten
        if self.uncleanable:
            self.uncleanable &= {partition.log for partition in replicas.partitions.values()}
        compacted = {topic for topic in {key[0] for key in replicas.partitions}
                     if "compact" in replicas.cleanup_policy(topic)}
        for key, partition in [item for item in replicas.partitions.items() if item[0][0] in compacted]:
            topic = key[0]
            if partition.log in self.uncleanable:
                continue
            # Only what is committed: a record above the HW may yet be truncated away, and the
            # older record of its key it replaced must then still be there (Kafka's first
            # uncleanable offset is at most the HW); nor a transaction not yet decided (the LSO).
            closed = tuple(s for s in partition.log.closed_segments if s.next_offset <= partition.last_stable_offset)
            if not closed:
                continue
            try:
                aborted = partition.log.collect_aborted_txns(partition.log.log_start_offset, closed[-1].next_offset)
            except Exception:
                self._mark_uncleanable(key, partition.log)
                continue
            checkpoint = partition.log.cleaner_checkpoint
            out.append(LogToClean(key, partition.log, closed, CleaningConfig(
                *(replicas.topic_config(topic, name) for name in CleaningConfig.CONFIGS)),
                -1 if checkpoint is None else checkpoint, partition.log.truncations, aborted_spans(aborted)))
        return out

    def _mark_uncleanable(self, key, plog) -> None:
        """Call from an except block: log the error and clean the log no more."""
        log.exception("%s-%d: cleaning failed; the partition is marked uncleanable", *key)
        self.uncleanable.add(plog)

    def clean_once(self, now_ms: int | None = None) -> int:
        """One pass over the compacted logs; returns how many segments were rewritten."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        rewritten = 0
        for candidate in self._on_loop(self._candidates):
            config = candidate.config
            try:
                closed = cleanable_segments(candidate.closed, candidate.cleaned_to,
                                            now_ms - config.min_compaction_lag_ms)
                if closed and is_due(closed, candidate.cleaned_to, config, now_ms):
                    rewritten += self._clean(candidate._replace(closed=closed), now_ms)
            except CleaningAborted:
                log.info("%s-%d: truncated while being cleaned; cleaning it again from its new checkpoint",
                         *candidate.key)
            except SegmentClosed:
                log.info("%s-%d: a segment went (retention, truncation) while being cleaned; cleaning it again "
                         "at the next pass", *candidate.key)
            except InterruptedError:
                raise
            except Exception:
                self._mark_uncleanable(candidate.key, candidate.log)
        return rewritten

    def _offset_map(self, dirty: tuple[LogSegment, ...], aborted: dict) -> tuple[dict, int]:
        """The latest offset of each key of the first dirty segments whose keys fit the map (at
        least one segment), and how many segments that is."""
        capacity = map_capacity(self.replicas.config)
        offsets: dict = {}
        for mapped, segment in enumerate(dirty):
            keys = latest_offsets([os.pread(segment.file, segment.size, 0)], aborted=aborted)
            if mapped and len(offsets) + sum(1 for k in keys if k not in offsets) > capacity:
                return offsets, mapped
            offsets.update(keys)
        return offsets, len(dirty)

    @staticmethod
    def _swap_in(plog, truncations: int, segment: LogSegment, markers: set[int]) -> bool:
        """On the loop: replace `segment` with its cleaned copy, the aborted index entries of the
        `markers` it empties first (never an entry without its marker); False if the segment is no
        longer the log's. Raises CleaningAborted if the log was truncated since the pass read it."""
        if plog.truncations != truncations:
            raise CleaningAborted
        if markers:
            plog.forget_aborted_txns(markers)
        return plog.replace_segment(segment)

    @staticmethod
    def _done(plog, truncations: int, offset: int) -> None:
        """On the loop: the cleaning ended at `offset`, unless the log was truncated meanwhile."""
        if plog.truncations != truncations:
            raise CleaningAborted
        plog.cleaned_to(offset)

    def _clean(self, candidate: LogToClean, now_ms: int) -> int:
        plog, closed, aborted = candidate.log, candidate.closed, candidate.aborted
        delete_retention_ms = candidate.config.delete_retention_ms
        clean = sum(1 for s in closed if s.next_offset <= candidate.cleaned_to)
        offsets, mapped = self._offset_map(closed[clean:], aborted)
        closed = closed[:clean + mapped]
        rewritten = 0
        retention = MarkerRetention()  # reads every closed segment in order, from the log's start
        for segment in closed:
            file = segment.file
            data = os.pread(file, segment.size, 0)
            modified = os.fstat(file).st_mtime
            removable = retention.removable(data)
            cleaned = clean_segment(data, offsets, now_ms, delete_retention_ms, aborted=aborted, removable=removable)
            if cleaned is None:
                continue
            markers = expired_markers(data, removable, now_ms)  # the markers this cleaning empties
            staging = plog.staging_directory()
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir()
            (staging / segment.log_path.name).write_bytes(cleaned)
            staged = LogSegment(staging, segment.base_offset, index_interval_bytes=plog.config.index_interval_bytes,
                                index_max_bytes=plog.config.segment_index_bytes, now_ms=int(time.time() * 1000),
                                files=plog.files)
            assert staged.recover(), "a cleaned segment is whole"
            staged.flush()
            staged.close()
            os.utime(staged.log_path, (modified, modified))  # as Kafka: the original's last modified time
            try:
                rewritten += self._on_loop(self._swap_in, plog, candidate.truncations, segment, markers)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        if rewritten:
            log.info("%s-%d: compacted %d segment(s), %d key(s) mapped", *candidate.key, rewritten, len(offsets))
        self._on_loop(self._done, plog, candidate.truncations, closed[-1].next_offset)
        return rewritten
