"""A partition's durable, segmented log (Kafka's UnifiedLog and LogSegment): segments, sparse
offset and time indexes, crash recovery, retention. Knows nothing of replication or the network."""

from weir.log.errors import (CorruptRecord, LogError, OffsetOutOfRange, RecordBatchTooLarge, SegmentClosed,
                             UnexpectedAppendOffset)
from weir.log.fetch_slice import FetchSlice
from weir.log.leader_epoch_cache import LeaderEpochCache
from weir.log.log_config import LogConfig
from weir.log.log_directory import (LogDirectory, TopicPartition, parse_partition_directory_name,
                                    partition_directory_name)
from weir.log.partition_log import AppendInfo, PartitionLog
from weir.log.segment_files import SegmentFileCache

__all__ = [
    "AppendInfo",
    "CorruptRecord",
    "FetchSlice",
    "LeaderEpochCache",
    "LogConfig",
    "LogDirectory",
    "LogError",
    "OffsetOutOfRange",
    "PartitionLog",
    "RecordBatchTooLarge",
    "SegmentClosed",
    "SegmentFileCache",
    "TopicPartition",
    "UnexpectedAppendOffset",
    "parse_partition_directory_name",
    "partition_directory_name",
]
