"""Kafka's LogValidator for Weir: every produced batch is checked, and its header put right, before
a byte of it is written. Pure: bytes and settings in, a batch to append or a Kafka error out.

What a client's batch must be (Kafka's rules, Kafka's error codes):
- one whole magic-v2 batch, its CRC right (CORRUPT_MESSAGE), no larger than max.message.bytes
  (MESSAGE_TOO_LARGE), of a known codec (UNSUPPORTED_COMPRESSION_TYPE);
- recordCount > 0 and lastOffsetDelta = recordCount - 1, and the records really there: exactly
  recordCount well-formed records, offset deltas 0, 1, 2, ..., nothing after the last
  (INVALID_RECORD); compressed records are decompressed to check, up to a cap;
- not a control batch, not transactional (transactions are not supported yet), and a producer
  id with a sequence and epoch, or none at all (INVALID_RECORD);
- CreateTime topics: each record's timestamp within message.timestamp.before.max.ms before and
  message.timestamp.after.max.ms after the broker's clock (INVALID_TIMESTAMP, per record);
- compacted topics: every record has a key (INVALID_RECORD, per record).

What the broker puts right, as Kafka does: the header's maxTimestamp becomes the largest record
timestamp (CreateTime; clients may leave it -1) or the append time (LogAppendTime), the
timestamp-type bit becomes the topic's, and the CRC is recomputed when either changed.

Recovery reads the log with the same record walk (`recovered_max_timestamp`), minus what depends
on the clock and the topic's settings, and with compaction's gaps in offset deltas allowed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from weir.protocol.compression import CODEC_NONE, DecompressionError, decompress
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.record_batch import (CODEC_MASK, CRC_START, HEADER_SIZE, MAGIC, MAX_CODEC, BatchHeader,
                                        crc_matches, read_batch_header)

MAX_LONG = 2**63 - 1
NO_TIMESTAMP = -1
CREATE_TIME, LOG_APPEND_TIME = "CreateTime", "LogAppendTime"
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
NO_PRODUCER_ID = -1
DEFAULT_MAX_DECOMPRESSED_BYTES = 64 << 20
_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")
_ATTRIBUTES_AT, _MAX_TIMESTAMP_AT, _CRC_AT = 21, 35, 17


@dataclass(frozen=True, slots=True)
class ValidationConfig:
    """A topic's settings that decide what it accepts (Kafka's topic config names in comments)."""

    max_message_bytes: int  # max.message.bytes
    timestamp_type: str = CREATE_TIME  # message.timestamp.type
    timestamp_before_max_ms: int = MAX_LONG  # message.timestamp.before.max.ms
    timestamp_after_max_ms: int = 3_600_000  # message.timestamp.after.max.ms (Kafka 4's default)
    compacted: bool = False  # cleanup.policy contains compact
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES


@dataclass(frozen=True, slots=True)
class ValidatedBatch:
    records: bytearray  # the batch as it must be appended
    header: BatchHeader  # its header as appended
    log_append_time_ms: int  # the append time for LogAppendTime topics, else -1


class MalformedRecords(ValueError):
    """The records section does not hold what the header says."""


@dataclass(slots=True)
class RecordSummary:
    max_timestamp: int = NO_TIMESTAMP
    min_timestamp: int = MAX_LONG  # of the records that have one
    keyless: list | None = None  # indexes of records without a key, when asked for


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
    try:
        summary = summarize_records(records, header, strict_offsets=True, want_keyless=config.compacted,
                                    max_decompressed_bytes=config.max_decompressed_bytes)
    except MalformedRecords as e:
        raise KafkaError(ErrorCode.invalid_record, str(e)) from None
    if summary.keyless:
        raise KafkaError(ErrorCode.invalid_record, "compacted topic cannot accept a record without a key",
                             [(i, "record without a key on a compacted topic") for i in summary.keyless])
    if config.timestamp_type == LOG_APPEND_TIME:
        max_timestamp, attributes, append_time = now_ms, header.attributes | TIMESTAMP_TYPE_BIT, now_ms
    else:
        _check_timestamps(records, header, summary, config, now_ms)
        max_timestamp, attributes, append_time = (summary.max_timestamp, header.attributes & ~TIMESTAMP_TYPE_BIT,
                                                  NO_TIMESTAMP)
    buf = bytearray(records)
    if max_timestamp != header.max_timestamp or attributes != header.attributes:
        _ATTRIBUTES.pack_into(buf, _ATTRIBUTES_AT, attributes)
        _MAX_TIMESTAMP.pack_into(buf, _MAX_TIMESTAMP_AT, max_timestamp)
        _CRC.pack_into(buf, _CRC_AT, crc32c(memoryview(buf)[CRC_START:]))
        header = read_batch_header(buf)
    return ValidatedBatch(buf, header, append_time)


def _check_header(h: BatchHeader) -> None:
    if h.attributes & CODEC_MASK > MAX_CODEC:
        raise KafkaError(ErrorCode.unsupported_compression_type, f"compression codec {h.attributes & CODEC_MASK}")
    if h.record_count <= 0 or h.last_offset_delta != h.record_count - 1:
        raise KafkaError(ErrorCode.invalid_record,
                         f"inconsistent batch: {h.record_count} records but last offset delta {h.last_offset_delta}")
    if h.attributes & CONTROL_BIT:
        raise KafkaError(ErrorCode.invalid_record, "clients are not allowed to write control records")
    if h.attributes & TRANSACTIONAL_BIT:
        raise KafkaError(ErrorCode.invalid_record, "transactional batches are not supported")
    if h.producer_id < NO_PRODUCER_ID:
        raise KafkaError(ErrorCode.invalid_record, f"invalid producer id {h.producer_id}")
    if h.producer_id >= 0 and (h.base_sequence < 0 or h.producer_epoch < 0):
        raise KafkaError(ErrorCode.invalid_record, f"producer {h.producer_id} with epoch {h.producer_epoch} "
                                                   f"and sequence {h.base_sequence}")


def _check_timestamps(records, header: BatchHeader, summary: RecordSummary, config: ValidationConfig,
                      now_ms: int) -> None:
    earliest = now_ms - config.timestamp_before_max_ms
    latest = now_ms + config.timestamp_after_max_ms
    if summary.min_timestamp >= earliest and (summary.max_timestamp <= latest):
        return
    errors = [(i, f"timestamp {ts} of record {i} is out of range [{earliest}, {latest}]")
              for i, ts in enumerate(record_timestamps(records, header, config.max_decompressed_bytes))
              if ts != NO_TIMESTAMP and not earliest <= ts <= latest]
    if errors:
        raise KafkaError(ErrorCode.invalid_timestamp,
                             f"{len(errors)} record timestamp(s) outside message.timestamp.before.max.ms="
                             f"{config.timestamp_before_max_ms} / after.max.ms={config.timestamp_after_max_ms}: "
                             f"{errors[0][1]}", errors)


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
                      max_decompressed_bytes: int) -> RecordSummary:
    """Walk every record of the batch, checking its structure; raise MalformedRecords if the
    records are not exactly `record_count` well-formed records. With strict_offsets, offset deltas
    must be 0, 1, 2, ...; without, they must only increase up to lastOffsetDelta."""
    data = _records_section(batch, header, max_decompressed_bytes)
    base_ts = header.base_timestamp
    summary = RecordSummary(keyless=[] if want_keyless else None)
    max_ts, min_ts = NO_TIMESTAMP, MAX_LONG
    end = len(data)
    p = 0
    previous_delta = -1
    try:
        for i in range(header.record_count):
            length, p = _varint(data, p)
            record_end = p + length
            if length < 6 or record_end > end:  # attributes + 5 one-byte varints at least
                raise MalformedRecords(f"record {i}: length {length} does not fit the batch")
            p += 1  # attributes: unused in v2
            ts_delta, p = _varlong(data, p)
            offset_delta, p = _varint(data, p)
            in_order = (offset_delta == i if strict_offsets
                        else previous_delta < offset_delta <= header.last_offset_delta)
            if not in_order:
                raise MalformedRecords(f"record {i} has offset delta {offset_delta}")
            previous_delta = offset_delta
            key_length, p = _varint(data, p)
            if key_length < -1:
                raise MalformedRecords(f"record {i}: key length {key_length}")
            if key_length < 0 and want_keyless:
                summary.keyless.append(i)
            p += max(key_length, 0)
            value_length, p = _varint(data, p)
            if value_length < -1:
                raise MalformedRecords(f"record {i}: value length {value_length}")
            p += max(value_length, 0)
            header_count, p = _varint(data, p)
            if header_count < 0:
                raise MalformedRecords(f"record {i}: {header_count} headers")
            for _ in range(header_count):
                header_key_length, p = _varint(data, p)
                if header_key_length < 0:
                    raise MalformedRecords(f"record {i}: a header without a key")
                p += header_key_length
                header_value_length, p = _varint(data, p)
                if header_value_length < -1:
                    raise MalformedRecords(f"record {i}: header value length {header_value_length}")
                p += max(header_value_length, 0)
            if p != record_end:
                raise MalformedRecords(f"record {i}: fields end at {p - record_end:+d} bytes from its length")
            ts = base_ts + ts_delta
            if ts > max_ts:
                max_ts = ts
            if ts != NO_TIMESTAMP and ts < min_ts:
                min_ts = ts
    except IndexError:
        raise MalformedRecords(f"records run past the end of the batch ({end} bytes)") from None
    if p != end:
        raise MalformedRecords(f"{end - p} bytes after the {header.record_count} declared records")
    summary.max_timestamp, summary.min_timestamp = max_ts, min_ts
    return summary


def record_timestamps(batch, header: BatchHeader, max_decompressed_bytes: int) -> list[int]:
    """The CreateTime timestamp of each record (the batch is known to be well formed)."""
    data = _records_section(batch, header, max_decompressed_bytes)
    out = []
    p = 0
    for _ in range(header.record_count):
        length, p = _varint(data, p)
        record_end = p + length
        ts_delta, _ = _varlong(data, p + 1)
        out.append(header.base_timestamp + ts_delta)
        p = record_end
    return out


def _varint(data, p: int) -> tuple[int, int]:
    """A zigzag varint of at most 5 bytes (Kafka's varint: an int32)."""
    b = data[p]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1
    return _varint_rest(data, p, 5)


def _varlong(data, p: int) -> tuple[int, int]:
    """A zigzag varint of at most 10 bytes (Kafka's varlong: an int64)."""
    b = data[p]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1
    return _varint_rest(data, p, 10)


def _varint_rest(data, p: int, max_bytes: int) -> tuple[int, int]:
    n = shift = 0
    for q in range(p, p + max_bytes):
        b = data[q]
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return (n >> 1) ^ -(n & 1), q + 1
        shift += 7
    raise MalformedRecords(f"varint longer than {max_bytes} bytes at {p}")
