"""The settings of one partition log, with Kafka's names and defaults. The broker maps its
broker- and topic-level configuration onto this."""

from __future__ import annotations

from dataclasses import dataclass

NEVER = 2**63 - 1


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1073741824  # log.segment.bytes
    segment_ms: int = 604800000  # log.roll.ms (7 days)
    retention_ms: int = 604800000  # log.retention.ms (-1 = unlimited)
    retention_bytes: int = -1  # log.retention.bytes (per partition, -1 = unlimited)
    index_interval_bytes: int = 4096  # log.index.interval.bytes
    flush_interval_messages: int = NEVER  # log.flush.interval.messages
    flush_interval_ms: int = NEVER  # log.flush.interval.ms (checked by flush_if_due)
    segment_index_bytes: int = 10485760  # log.index.size.max.bytes

    def __post_init__(self):
        # File positions are int32 in the offset index, as in Kafka.
        assert 0 < self.segment_bytes <= 0x7FFFFFFF, "log.segment.bytes must fit an int32"
        assert self.index_interval_bytes >= 0
        assert self.segment_index_bytes >= 12
        assert self.flush_interval_messages >= 1
