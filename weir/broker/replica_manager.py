"""The partitions this broker hosts: create, delete, append, read, and wake long polls."""

import logging
from dataclasses import replace
from pathlib import Path

from ..config import BrokerConfig
from ..log import LogConfig, LogDirectory, OffsetOutOfRange, RecordBatchTooLarge
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.hot_responses import FetchPartitionResult, FileRegion
from ..protocol.record_batch import validate_produced_batch
from .fetch_waiters import FetchWaiters
from .partition import Partition
from .topics import Topic, TopicTable

log = logging.getLogger(__name__)

# how a topic config maps onto the log's settings
_LOG_FIELDS = {
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "flush.messages": "flush_interval_messages",
    "flush.ms": "flush_interval_ms",
    "index.interval.bytes": "index_interval_bytes",
}


class ReplicaManager:
    def __init__(self, config: BrokerConfig, now_ms: int) -> None:
        self.config = config
        root = Path(config["log.dirs"])
        root.mkdir(parents=True, exist_ok=True)
        self.topics = TopicTable(root / "topics.json")
        self.logs = LogDirectory(root)
        self.waiters = FetchWaiters()
        self.partitions: dict[tuple[str, int], Partition] = {}
        for topic in self.topics.by_name.values():
            self._open_partitions(topic, range(topic.partitions), now_ms)

    def log_config(self, topic: Topic) -> LogConfig:
        overrides = {_LOG_FIELDS[k]: int(v) for k, v in topic.configs.items() if k in _LOG_FIELDS}
        return replace(self.config.log_config(), **overrides)

    def max_message_bytes(self, topic: Topic) -> int:
        return int(topic.configs.get("max.message.bytes", self.config["message.max.bytes"]))

    def _open_partitions(self, topic: Topic, indexes, now_ms: int) -> None:
        log_config = self.log_config(topic)
        for index in indexes:
            plog = self.logs.open_partition(topic.name, index, topic.topic_id, log_config, now_ms)
            self.partitions[(topic.name, index)] = Partition(topic.name, index, plog)

    def create_topic(self, name: str, partitions: int, configs: dict[str, str], now_ms: int) -> Topic:
        topic = self.topics.create(name, partitions, configs)
        self._open_partitions(topic, range(partitions), now_ms)
        log.info("created topic %s with %d partitions", name, partitions)
        return topic

    def add_partitions(self, topic: Topic, count: int, now_ms: int) -> None:
        old = topic.partitions
        self.topics.add_partitions(topic, count)
        self._open_partitions(topic, range(old, count), now_ms)

    def delete_topic(self, topic: Topic) -> None:
        for index in range(topic.partitions):
            partition = self.partitions.pop((topic.name, index))
            partition.log.delete()
        self.topics.delete(topic)
        log.info("deleted topic %s", topic.name)

    def partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic}-{index} is not hosted here")
        return partition

    def append(self, topic: Topic, index: int, records: bytes, now_ms: int) -> tuple[int, int]:
        """Validate and append a produced batch; returns (base offset, log start offset)."""
        partition = self.partition(topic.name, index)
        if records is None:
            raise KafkaError(ErrorCode.invalid_record, "null records")
        header = validate_produced_batch(records, self.max_message_bytes(topic))
        try:
            base_offset = partition.append(bytearray(records), header, now_ms)
        except RecordBatchTooLarge as e:
            raise KafkaError(ErrorCode.record_list_too_large, str(e)) from None
        self.waiters.notify((topic.name, index))
        return base_offset, partition.log.log_start_offset

    def read(self, topic: str, index: int, offset: int, max_bytes: int) -> FetchPartitionResult:
        """Committed data (below the high watermark) for a consumer's fetch."""
        partition = self.partition(topic, index)
        plog = partition.log
        result = FetchPartitionResult(index, 0, partition.high_watermark, partition.high_watermark,
                                      plog.log_start_offset)
        if offset > partition.high_watermark or offset < plog.log_start_offset:
            result.error_code = ErrorCode.offset_out_of_range
            return result
        if offset == partition.high_watermark or max_bytes <= 0:
            return result
        try:
            fetched = plog.read(offset, max_bytes, partition.high_watermark)
        except OffsetOutOfRange:
            result.error_code = ErrorCode.offset_out_of_range
            return result
        result.records = [FileRegion(fd, position, size) for fd, position, size in fetched.file_slices]
        return result

    def maintain(self, now_ms: int) -> None:
        """Retention: delete whole segments past retention.ms / retention.bytes."""
        for partition in list(self.partitions.values()):
            deleted = partition.log.enforce_retention(now_ms)
            if deleted:
                log.info("retention deleted %d segment(s) of %s-%d", deleted, partition.topic, partition.index)

    def flush_due(self, now_ms: int) -> None:
        """fsync the logs whose flush.ms has passed."""
        for partition in list(self.partitions.values()):
            partition.log.flush_if_due(now_ms)

    def checkpoint(self) -> None:
        self.logs.write_checkpoints()

    def close(self) -> None:
        self.logs.close()
