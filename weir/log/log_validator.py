"""Kafka's LogValidator for Weir: every produced batch is checked, and its header put right, before
a byte of it is written. Pure: bytes and settings in, a batch to append or a Kafka error out.

What a client's batch must be (Kafka's rules, Kafka's error codes):
- one whole magic-v2 batch, its CRC right (CORRUPT_MESSAGE), no larger than max.message.bytes
  (MESSAGE_TOO_LARGE), of a known codec (UNSUPPORTED_COMPRESSION_TYPE);
- recordCount > 0 and lastOffsetDelta = recordCount - 1, and the records really there: exactly
  recordCount well-formed records, offset deltas 0, 1, 2, ..., nothing after the last
  (INVALID_RECORD); compressed records are decompressed to check, up to a cap;
- not a control batch (only the partition leader writes transaction markers), and a producer id
  with a sequence and epoch, or none at all; a transactional batch (KIP-98) with one: its
  transaction is its producer's, whose id and epoch the partition's producer state checks
  (INVALID_RECORD);
- CreateTime topics: each record's timestamp within message.timestamp.before.max.ms before and
  message.timestamp.after.max.ms after the broker's clock (INVALID_TIMESTAMP, per record);
- compacted topics: every record has a key (INVALID_RECORD, per record).

What the broker puts right, as Kafka does: the header's maxTimestamp becomes the largest record
timestamp (CreateTime; clients may leave it -1) or the append time (LogAppendTime), the
timestamp-type bit becomes the topic's, a batch in another codec than the topic's compression.type
(unless that is `producer`) is recompressed, and the CRC is recomputed when any of these changed.
A recompressed batch must still fit max.message.bytes (MESSAGE_TOO_LARGE).

Recovery reads the log with the same record walk (`recovered_max_timestamp`), minus what depends
on the clock and the topic's settings, and with compaction's gaps in offset deltas allowed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

from crc32c import crc32c

from weir.log._record_walk import walk
from weir.protocol.compression import CODEC_NONE, DecompressionError, compress, decompress
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.record_batch import (CODEC_MASK, CONTROL_BIT, CRC_START, HEADER_SIZE, MAGIC, MAX_CODEC,
                                        TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT, BatchHeader, crc_matches,
                                        read_batch_header)

MAX_LONG = 2**63 - 1
MIN_LONG = -2**63
NO_TIMESTAMP = -1
CREATE_TIME, LOG_APPEND_TIME = "CreateTime", "LogAppendTime"
NO_PRODUCER_ID = -1
DEFAULT_MAX_DECOMPRESSED_BYTES = 64 << 20
_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")
_LENGTH = struct.Struct(">i")
_LENGTH_AT, _ATTRIBUTES_AT, _MAX_TIMESTAMP_AT, _CRC_AT = 8, 21, 35, 17


@dataclass(frozen=True, slots=True)
class ValidationConfig:
    """A topic's settings that decide what it accepts (Kafka's topic config names in comments)."""

    max_message_bytes: int  # max.message.bytes
    timestamp_type: str = CREATE_TIME  # message.timestamp.type
    timestamp_before_max_ms: int = MAX_LONG  # message.timestamp.before.max.ms
    timestamp_after_max_ms: int = 3_600_000  # message.timestamp.after.max.ms (Kafka 4's default)
    compacted: bool = False  # cleanup.policy contains compact
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    compression: int | None = None  # compression.type: the codec to store batches in; None: the producer's
    compression_level: int | None = None  # compression.<codec>.level; None: the codec's default


@dataclass(frozen=True, slots=True)
class ValidatedBatch:
    records: bytearray  # the batch as it must be appended
    header: BatchHeader  # its header as appended
    log_append_time_ms: int  # the append time for LogAppendTime topics, else -1


class MalformedRecords(ValueError):
    """The records section does not hold what the header says."""


class RecordSummary(NamedTuple):
    max_timestamp: int  # of all records, -1 if none has a larger one
    keyless: list | None  # indexes of records without a key, when asked for
    out_of_range: list  # (index, timestamp) of records outside the timestamp window
    first_at_target: tuple[int, int] | None  # (offset delta, timestamp) of the first record at a target time


def validate_produced_batch(records, config: ValidationConfig, now_ms: int) -> ValidatedBatch:
    """Check a client's batch for one partition; return it ready to append, or raise KafkaError."""
    if records is None:
        raise KafkaError(ErrorCode.invalid_record, "null records")
    size = len(records)
    if size < HEADER_SIZE:
        raise KafkaError(ErrorCode.corrupt_message, f"record batch of {size} bytes is truncated")
    header = read_batch_header(records)
    if header.magic != MAGIC:
        raise KafkaError(ErrorCode.invalid_record, f"magic {header.magic}: only v2 batches")
    if header.length < HEADER_SIZE or header.length > size:
        raise KafkaError(ErrorCode.corrupt_message, "batch length does not match its bytes")
    if header.length != size:
        raise KafkaError(ErrorCode.invalid_record, "exactly one record batch per partition")
    if size > config.max_message_bytes:
        raise KafkaError(ErrorCode.message_too_large,
                         f"batch of {size} bytes exceeds max.message.bytes {config.max_message_bytes}")
    if not crc_matches(records, 0, size, header.crc):
        raise KafkaError(ErrorCode.corrupt_message, "record batch CRC mismatch")
    _check_header(header)
    log_append_time = config.timestamp_type == LOG_APPEND_TIME
    try:
        summary = summarize_records(
            records, header, strict_offsets=True, want_keyless=config.compacted,
            max_decompressed_bytes=config.max_decompressed_bytes,
            earliest=MIN_LONG if log_append_time else max(MIN_LONG, now_ms - config.timestamp_before_max_ms),
            latest=MAX_LONG if log_append_time else min(MAX_LONG, now_ms + config.timestamp_after_max_ms))
    except MalformedRecords as e:
        raise KafkaError(ErrorCode.invalid_record, str(e)) from None
    if summary.keyless:
        raise KafkaError(ErrorCode.invalid_record, "compacted topic cannot accept a record without a key",
                         [(i, "record without a key on a compacted topic") for i in summary.keyless])
    if summary.out_of_range:
        index, timestamp = summary.out_of_range[0]
        raise KafkaError(ErrorCode.invalid_timestamp,
                         f"{len(summary.out_of_range)} record timestamp(s) outside message.timestamp.before.max.ms="
                         f"{config.timestamp_before_max_ms} / after.max.ms={config.timestamp_after_max_ms} of the "
                         f"broker's clock {now_ms}, the first: record {index} at {timestamp}",
                         [(i, f"timestamp {ts} out of range") for i, ts in summary.out_of_range])
    if log_append_time:
        max_timestamp, attributes, append_time = now_ms, header.attributes | TIMESTAMP_TYPE_BIT, now_ms
    else:
        max_timestamp, attributes, append_time = (summary.max_timestamp, header.attributes & ~TIMESTAMP_TYPE_BIT,
                                                  NO_TIMESTAMP)
    buf = bytearray(records)
    if config.compression is not None and config.compression != header.attributes & CODEC_MASK:
        buf = _recompressed(buf, header, config)
        attributes = attributes & ~CODEC_MASK | config.compression
        if len(buf) > config.max_message_bytes:
            raise KafkaError(ErrorCode.message_too_large, f"batch of {len(buf)} bytes after compression.type "
                                                          f"exceeds max.message.bytes {config.max_message_bytes}")
    if len(buf) != size or max_timestamp != header.max_timestamp or attributes != header.attributes:
        _ATTRIBUTES.pack_into(buf, _ATTRIBUTES_AT, attributes)
        _MAX_TIMESTAMP.pack_into(buf, _MAX_TIMESTAMP_AT, max_timestamp)
        _CRC.pack_into(buf, _CRC_AT, crc32c(memoryview(buf)[CRC_START:]))
        header = read_batch_header(buf)
    return ValidatedBatch(buf, header, append_time)


def _recompressed(batch: bytearray, header: BatchHeader, config: ValidationConfig) -> bytearray:
    """The batch with its records section in the topic's codec: the records' bytes are the same
    once decompressed (offset deltas, timestamp deltas, keys, values, headers), and so is the
    header but for its length (its attributes and CRC are the caller's): base offset, producer id,
    epoch and sequence, timestamps. Kafka's LogValidator rebuilds the batch to the same effect."""
    records = _records_section(batch, header, config.max_decompressed_bytes)
    out = bytearray(batch[:HEADER_SIZE]) + compress(config.compression, records, config.compression_level)
    _LENGTH.pack_into(out, _LENGTH_AT, len(out) - 12)
    return out


def _check_header(h: BatchHeader) -> None:
    if h.attributes & CODEC_MASK > MAX_CODEC:
        raise KafkaError(ErrorCode.unsupported_compression_type, f"compression codec {h.attributes & CODEC_MASK}")
    if h.record_count <= 0 or h.last_offset_delta != h.record_count - 1:
        raise KafkaError(ErrorCode.invalid_record,
                         f"inconsistent batch: {h.record_count} records but last offset delta {h.last_offset_delta}")
    if h.attributes & CONTROL_BIT:
        raise KafkaError(ErrorCode.invalid_record, "clients are not allowed to write control records")
    if h.producer_id < NO_PRODUCER_ID:
        raise KafkaError(ErrorCode.invalid_record, f"invalid producer id {h.producer_id}")
    if h.producer_id >= 0 and (h.base_sequence < 0 or h.producer_epoch < 0):
        raise KafkaError(ErrorCode.invalid_record, f"producer {h.producer_id} with epoch {h.producer_epoch} "
                                                   f"and sequence {h.base_sequence}")
    if h.attributes & TRANSACTIONAL_BIT and h.producer_id < 0:
        raise KafkaError(ErrorCode.invalid_record, "a transactional batch without a producer id")


def recovered_max_timestamp(batch) -> int | None:
    """Recovery's check of a batch read from a segment (CRC already verified): its records must be
    what its header says (compaction's gaps in offset deltas allowed). Returns the batch's max
    timestamp as the validator would have set it, or None if the batch is invalid."""
    header = read_batch_header(batch)
    if header.attributes & CODEC_MASK > MAX_CODEC or header.record_count < 0 \
            or header.record_count > header.last_offset_delta + 1:
        return None
    try:
        summary = summarize_records(batch, header, strict_offsets=False, want_keyless=False,
                                    max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES)
    except MalformedRecords:
        return None
    if header.attributes & TIMESTAMP_TYPE_BIT or header.record_count == 0:
        return header.max_timestamp
    return summary.max_timestamp


def _records_section(batch, header: BatchHeader, max_decompressed_bytes: int):
    payload = memoryview(batch)[HEADER_SIZE:header.length]
    codec = header.attributes & CODEC_MASK
    if codec == CODEC_NONE:
        return payload
    try:
        return decompress(codec, payload, max_decompressed_bytes)
    except DecompressionError as e:
        raise MalformedRecords(str(e)) from None


def summarize_records(batch, header: BatchHeader, *, strict_offsets: bool, want_keyless: bool,
                      max_decompressed_bytes: int, earliest: int = MIN_LONG, latest: int = MAX_LONG,
                      target: int = MAX_LONG) -> RecordSummary:
    """Walk every record of the batch (in C: weir/log/_record_walk.c), checking its structure;
    raise MalformedRecords if the records are not exactly `record_count` well-formed records.
    With strict_offsets, offset deltas must be 0, 1, 2, ...; without, they must only increase up
    to lastOffsetDelta. Timestamps outside [earliest, latest] are listed, not refused; the first
    record at or after `target` is found."""
    data = _records_section(batch, header, max_decompressed_bytes)
    try:
        return RecordSummary(*walk(data, header.record_count, header.base_timestamp, header.last_offset_delta,
                                   strict_offsets, want_keyless, earliest, latest, target))
    except ValueError as e:
        raise MalformedRecords(str(e)) from None


def first_record_at_or_after(batch, timestamp: int) -> tuple[int, int] | None:
    """ListOffsets by timestamp inside one stored batch: (offset, timestamp) of its first record
    whose timestamp is >= `timestamp`, as Kafka answers; for LogAppendTime every record has the
    batch's time. None if no record qualifies, or the batch cannot be read."""
    header = read_batch_header(batch)
    if header.attributes & TIMESTAMP_TYPE_BIT:
        return (header.base_offset, header.max_timestamp) if header.max_timestamp >= timestamp else None
    try:
        summary = summarize_records(batch, header, strict_offsets=False, want_keyless=False,
                                    max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED_BYTES, target=timestamp)
    except MalformedRecords:
        return None
    if summary.first_at_target is None:
        return None
    offset_delta, found = summary.first_at_target
    return header.base_offset + offset_delta, found
