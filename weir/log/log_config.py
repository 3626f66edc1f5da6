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
    segment_jitter_ms: int = 0  # log.roll.jitter.ms: up to this much, drawn per segment, off segment_ms
    file_delete_delay_ms: int = 60000  # log.segment.delete.delay.ms: removed segments wait as *.deleted

    def __post_init__(self):
        # File positions are int32 in the offset index, as in Kafka.
        assert 0 < self.segment_bytes <= 0x7FFFFFFF, "log.segment.bytes must fit an int32"
        assert self.segment_ms >= 1 and self.segment_jitter_ms >= 0
        assert self.index_interval_bytes >= 0
        assert self.segment_index_bytes >= 4  # an index with room for one entry at least (IndexFile)
        assert self.flush_interval_messages >= 1
        assert self.file_delete_delay_ms >= 0
