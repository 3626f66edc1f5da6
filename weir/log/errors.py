"""Exceptions raised by the log. The broker maps each to a Kafka error code."""


class LogError(Exception):
    """Base of every error the log raises on purpose."""


class OffsetOutOfRange(LogError):
    """A read or DeleteRecords asked for an offset outside [log_start_offset, log_end_offset]
    (Kafka: OFFSET_OUT_OF_RANGE)."""


class RecordBatchTooLarge(LogError):
    """An append is larger than a whole segment (Kafka: RECORD_LIST_TOO_LARGE)."""


class UnexpectedAppendOffset(LogError):
    """A follower append does not start at the log end offset, or its offsets are not contiguous."""


class CorruptRecord(LogError):
    """A batch handed to the log is malformed or fails its CRC (Kafka: CORRUPT_MESSAGE)."""


class SegmentClosed(LogError):
    """A segment was read after its log let it go (removed by retention, truncation or the
    cleaner, or the log closed): only a reader on another thread, the log cleaner, can meet one."""
