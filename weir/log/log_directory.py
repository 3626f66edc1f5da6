"""One `log.dirs` directory: the partition logs in it, and the files that make restarts fast.

Layout, as Kafka's:

    <log.dir>/<topic>-<partition>/...segments...       one directory per partition
    <log.dir>/<topic>-<partition>/partition.metadata   the topic id
    <log.dir>/recovery-point-offset-checkpoint    offset below which each log is fsynced
    <log.dir>/log-start-offset-checkpoint         each log's start offset (DeleteRecords, retention)
    <log.dir>/cleaner-offset-checkpoint           where each compacted log's cleaning ended
    <log.dir>/.kafka_cleanshutdown                present only between a clean close and the next open

Rules: the clean-shutdown marker is written last on close (after every log is flushed and the
checkpoints written) and removed when the directory is opened, before any log can be appended
to, so it exists only when every log is fully durable. Without it, each log is recovered from its
checkpointed recovery point. Topic names may hold '-' and '.', so a directory name is split at its
last '-'.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Mapping, NamedTuple

from weir.log.checkpoint_file import (read_offset_checkpoint, read_partition_metadata, write_atomically,
                                      write_offset_checkpoint, write_partition_metadata)
from weir.log.file_io import fsync_directory
from weir.log.leader_epoch_cache import write_unwritten
from weir.log.log_config import LogConfig
from weir.log.partition_log import PartitionLog
from weir.log.segment_files import SegmentFileCache

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
DELETE_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"


class TopicPartition(NamedTuple):
    topic: str
    partition: int


def partition_directory_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def moved_directory_name(tp: TopicPartition, suffix: str) -> str:
    """Where a partition's directory goes to be deleted (DELETE_SUFFIX) or set aside
    (STRAY_SUFFIX), as Kafka's LocalLog.logDeleteDirName and logStrayDirName: the topic cut short
    so that the name fits in the 255 bytes a file name may have (a topic name has up to 249 ASCII
    characters). Not a partition's name, so never opened as one."""
    suffix = f"-{tp.partition}.{uuid.uuid4().hex}{suffix}"
    return tp.topic[:255 - len(suffix)] + suffix


def parse_partition_directory_name(name: str) -> TopicPartition | None:
    """`my.topic-name-3` -> ('my.topic-name', 3); None for anything that is not a partition."""
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


class LogDirectory:
    """Construct it once at start-up (it reads the checkpoints and the clean-shutdown marker),
    then `open_partition` each hosted partition, or `open_all` to open whatever is on disk. Its
    logs share one bounded cache of their closed segments' open files (`files`)."""

    def __init__(self, path: Path, config: LogConfig = LogConfig(),
                 topic_configs: Mapping[str, LogConfig] | None = None, files: SegmentFileCache | None = None):
        self.path = Path(path)
        self.config = config
        self.topic_configs = dict(topic_configs or {})
        self.files = SegmentFileCache() if files is None else files
        self.unwritten_epochs: set = set()  # its logs' leader-epoch caches with a new epoch to write
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.topic_ids: dict[TopicPartition, uuid.UUID] = {}
        self._closed = False
        self.path.mkdir(parents=True, exist_ok=True)
        for entry in os.scandir(self.path):
            if entry.is_dir() and entry.name.endswith(DELETE_SUFFIX):
                shutil.rmtree(entry.path, ignore_errors=True)  # finish an interrupted deletion
        # What the last run left: used when each partition is first opened.
        self._recovery_points = read_offset_checkpoint(self.path / RECOVERY_POINT_CHECKPOINT)
        self._log_start_offsets = read_offset_checkpoint(self.path / LOG_START_OFFSET_CHECKPOINT)
        self._cleaner_checkpoints = read_offset_checkpoint(self.path / CLEANER_CHECKPOINT)
        marker = self.path / CLEAN_SHUTDOWN_MARKER
        self.had_clean_shutdown = marker.exists()
        if self.had_clean_shutdown:
            marker.unlink()  # from here on, a crash must lead to recovery
            fsync_directory(self.path)

    @classmethod
    def open(cls, path: Path, config: LogConfig, now_ms: int, *,
             topic_configs: Mapping[str, LogConfig] | None = None,
             files: SegmentFileCache | None = None) -> "LogDirectory":
        """Open the directory and every partition log in it."""
        directory = cls(path, config, topic_configs, files)
        directory.open_all(now_ms)
        return directory

    def open_all(self, now_ms: int) -> None:
        for tp in self.partitions_on_disk():
            if tp not in self.logs:
                self._open_existing(tp, now_ms)
        self.write_checkpoints()

    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.config)

    def partition_path(self, topic: str, partition: int) -> Path:
        return self.path / partition_directory_name(topic, partition)

    def _open_existing(self, tp: TopicPartition, now_ms: int) -> PartitionLog:
        log = PartitionLog.open(self.partition_path(*tp), self.config_for(tp.topic), now_ms,
                                recovery_point=self._recovery_points.get(tp),
                                log_start_offset=self._log_start_offsets.get(tp, 0),
                                cleaner_checkpoint=self._cleaner_checkpoints.get(tp),
                                clean_shutdown=self.had_clean_shutdown and tp in self._recovery_points,
                                files=self.files, unwritten_epochs=self.unwritten_epochs)
        self._adopt(tp, log, read_partition_metadata(log.directory))
        return log

    def _adopt(self, tp: TopicPartition, log: PartitionLog, topic_id: uuid.UUID | None) -> None:
        log.on_checkpoint_needed = self.write_checkpoints
        self.logs[tp] = log
        if topic_id is not None:
            self.topic_ids[tp] = topic_id

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get(TopicPartition(topic, partition))

    def topic_id(self, topic: str, partition: int) -> uuid.UUID | None:
        return self.topic_ids.get(TopicPartition(topic, partition))

    def open_partition(self, topic: str, partition: int, topic_id: uuid.UUID, config: LogConfig | None,
                       now_ms: int) -> PartitionLog:
        """The log of a partition: already open, recovered from disk, or created. A partition on
        disk under another topic id (a copy of a deleted topic of the same name, or a damaged
        partition.metadata): raise ValueError."""
        tp = TopicPartition(topic, partition)
        assert parse_partition_directory_name(partition_directory_name(topic, partition)) == tp
        if config is not None:
            self.topic_configs[topic] = config
        log = self.logs.get(tp)
        if log is None and self.partition_path(topic, partition).is_dir():
            log = self._open_existing(tp, now_ms)
        if log is not None:
            known = self.topic_ids.get(tp)
            if known is not None and known != topic_id:
                raise ValueError(f"{topic}-{partition} exists with topic id {known}, not {topic_id}")
            if known is None:
                write_partition_metadata(log.directory, topic_id)
                self.topic_ids[tp] = topic_id
            log.config = self.config_for(topic)
            return log
        log_path = self.partition_path(topic, partition)
        log = PartitionLog.open(log_path, self.config_for(topic), now_ms, files=self.files,
                                unwritten_epochs=self.unwritten_epochs)
        write_partition_metadata(log_path, topic_id)
        fsync_directory(self.path)
        self._adopt(tp, log, topic_id)
        return log

    def delete_partition(self, topic: str, partition: int) -> None:
        """Remove a partition's log, open or only on disk: rename its directory out of the way (so
        a crash midway leaves nothing that looks like a partition), then delete it."""
        log, doomed = self._move_out(TopicPartition(topic, partition), DELETE_SUFFIX)
        if doomed is None:
            return
        if log is None:
            shutil.rmtree(doomed, ignore_errors=True)
        else:
            log.directory = doomed
            log.delete()
        self.write_checkpoints()

    def set_aside_partition(self, topic: str, partition: int) -> Path | None:
        """Move a partition's log, open or only on disk, out of the way but keep it, for an
        operator to look at or delete (Kafka's stray replicas) → where it went."""
        kept = self._move_out(TopicPartition(topic, partition), STRAY_SUFFIX)[1]
        self.write_checkpoints()
        return kept

    def _move_out(self, tp: TopicPartition, suffix: str) -> tuple[PartitionLog | None, Path | None]:
        """Forget the partition, close its log if open, and rename its directory → the log (if
        it was open) and the directory's new path (if it had one)."""
        log = self.logs.pop(tp, None)
        self.topic_ids.pop(tp, None)
        self._recovery_points.pop(tp, None)
        self._log_start_offsets.pop(tp, None)
        self._cleaner_checkpoints.pop(tp, None)
        directory = self.partition_path(*tp) if log is None else log.directory
        if log is not None:
            log.on_checkpoint_needed = None
            log.close()
        if not directory.is_dir():
            return log, None
        moved = self.path / moved_directory_name(tp, suffix)
        os.rename(directory, moved)
        fsync_directory(self.path)
        return log, moved

    def is_on_disk(self, tp: TopicPartition) -> bool:
        return (self.path / partition_directory_name(*tp)).is_dir()

    def partitions_on_disk(self) -> list[TopicPartition]:
        """Every partition directory, open in this run or not."""
        return [tp for name in sorted(os.listdir(self.path))
                if (tp := parse_partition_directory_name(name)) is not None and (self.path / name).is_dir()]

    def write_checkpoints(self) -> None:
        """Write every log's recovery point, log start offset and cleaner checkpoint (Kafka does
        this periodically, log.flush.offset.checkpoint.interval.ms, and after truncation).
        Partitions on disk but not opened in this run keep their entries from the last run."""
        for tp in [tp for tp, log in self.logs.items() if log.is_deleted]:
            del self.logs[tp]
            self._recovery_points.pop(tp, None)
            self._log_start_offsets.pop(tp, None)
            self._cleaner_checkpoints.pop(tp, None)
        recovery_points = {**self._recovery_points, **{tp: log.recovery_point for tp, log in self.logs.items()}}
        log_starts = {**self._log_start_offsets, **{tp: log.log_start_offset for tp, log in self.logs.items()}}
        write_offset_checkpoint(self.path / RECOVERY_POINT_CHECKPOINT, recovery_points)
        write_offset_checkpoint(self.path / LOG_START_OFFSET_CHECKPOINT, log_starts)
        cleaned = {**{tp: offset for tp, offset in self._cleaner_checkpoints.items() if tp not in self.logs},
                   **{tp: log.cleaner_checkpoint for tp, log in self.logs.items() if log.cleaner_checkpoint is not None}}
        write_offset_checkpoint(self.path / CLEANER_CHECKPOINT, cleaned)

    def flush_if_due(self, now_ms: int) -> None:
        """Every second: the new leader epochs are written, and the logs whose flush.ms is over
        since their last flush are asked (with the default, never: an idle broker's second costs
        no call per log)."""
        if self.unwritten_epochs:
            write_unwritten(self.unwritten_epochs)
        for log in self.logs.values():
            if now_ms - log.last_flush_ms >= log.config.flush_interval_ms and not log.is_deleted:
                log.flush_if_due(now_ms)

    def delete_due_files(self, now_ms: int) -> None:
        """Delete removed segments' files whose file.delete.delay.ms is over (those a stop leaves
        behind are removed when their log next opens); only logs with such files are asked."""
        for log in self.logs.values():
            if log.retired and not log.is_deleted:
                log.delete_due_files(now_ms)

    def close(self) -> None:
        """Flush and close every log, write the checkpoints, then the clean-shutdown marker."""
        if self._closed:
            return
        for log in self.logs.values():
            if not log.is_deleted:
                log.close()
        self.write_checkpoints()
        write_atomically(self.path / CLEAN_SHUTDOWN_MARKER, "")
        self._closed = True
