"""Message formats 0 and 1 (before KIP-98's record batches), converted to and from format 2 for
the clients that speak Produce v0-v2 and Fetch v0-v3, as Kafka 3.9 converts them: a produced
message set becomes one format-2 batch (LogValidator's up-conversion), a fetched batch becomes a
message set (the fetch's down-conversion, `message.downconversion.enable`).

A message (Kafka's LegacyRecord), big-endian:

    offset int64 | size int32 | crc uint32 (CRC-32 of magic..end) | magic int8 | attributes int8
    | [timestamp int64, magic 1] | key bytes (int32 length, -1 null) | value bytes

Attributes bits 0-2 are the codec (none, gzip, snappy, lz4): a compressed message is a wrapper
whose value is the compressed message set of the real ones; bit 3 (magic 1) is LogAppendTime,
the wrapper's timestamp then standing for each inner one's. Messages converted down are written
uncompressed (Kafka keeps the codec; a client reads either), control batches are left out (an old
consumer knows no transaction markers).
"""

import struct
import zlib

from weir.protocol.compression import DecompressionError, decompress
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.record_batch import (CODEC_MASK, CONTROL_BIT, HEADER_SIZE, LOG_OVERHEAD, TIMESTAMP_TYPE_BIT,
                                        read_batch_header, records_section)
from weir.protocol.records import encode_batch

_MESSAGE_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_TIMESTAMP = struct.Struct(">q")
_LENGTH = struct.Struct(">i")
_CRC_START = 16  # the CRC covers magic to the end: offset (8), size (4), crc (4) before it
MAGIC_OFFSET = 16  # where a format-2 batch and a message both keep their magic
NO_TIMESTAMP = -1
LZ4 = 3  # the last codec formats 0 and 1 know
MAX_NESTED_BYTES = 64 << 20  # a wrapper's messages, decompressed, at most this (as the validator's cap)


def _bytes_field(buf, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise KafkaError(ErrorCode.corrupt_message, "a message's key or value runs past its end")
    n, = _LENGTH.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise KafkaError(ErrorCode.corrupt_message, "a message's key or value runs past its end")
    return bytes(buf[pos:pos + n]), pos + n


def _messages(buf, wrapper_timestamp: int | None = None, nested: bool = False):
    """(key, value, timestamp) of each whole message in `buf`, the compressed ones' inner messages
    in their place. A trailing partial message is a producer's error: CORRUPT_MESSAGE."""
    pos = 0
    while pos < len(buf):
        if len(buf) - pos < _MESSAGE_HEAD.size:
            raise KafkaError(ErrorCode.corrupt_message, "a truncated message")
        _, size, crc, magic, attributes = _MESSAGE_HEAD.unpack_from(buf, pos)
        end = pos + LOG_OVERHEAD + size
        if size < 14 or end > len(buf):
            raise KafkaError(ErrorCode.corrupt_message, f"a message of {size} bytes does not fit")
        if magic not in (0, 1):
            raise KafkaError(ErrorCode.invalid_record, f"magic {magic} in a message set of format 0 or 1")
        if zlib.crc32(memoryview(buf)[pos + _CRC_START:end]) != crc:
            raise KafkaError(ErrorCode.corrupt_message, "a message's CRC does not match")
        body = pos + _CRC_START + 2
        timestamp = NO_TIMESTAMP
        if magic == 1:
            if body + 8 > end:
                raise KafkaError(ErrorCode.corrupt_message, "a message of format 1 without its timestamp")
            timestamp, = _TIMESTAMP.unpack_from(buf, body)
            body += 8
        key, body = _bytes_field(buf, body, end)
        value, body = _bytes_field(buf, body, end)
        codec = attributes & CODEC_MASK
        if wrapper_timestamp is not None:
            timestamp = wrapper_timestamp
        if codec > LZ4:
            raise KafkaError(ErrorCode.corrupt_message, f"codec {codec} in a message of format {magic}")
        if codec:
            if nested or value is None:
                raise KafkaError(ErrorCode.corrupt_message, "a compressed message inside a compressed one, or empty")
            log_append = magic == 1 and attributes & TIMESTAMP_TYPE_BIT
            try:
                inner = decompress(codec, value, MAX_NESTED_BYTES)
            except DecompressionError as e:
                raise KafkaError(ErrorCode.corrupt_message, f"a compressed message does not decompress: {e}") from e
            yield from _messages(inner, timestamp if log_append else None, nested=True)
        else:
            yield key, value, timestamp
        pos = end


def up_convert(message_set) -> bytes:
    """The one format-2 batch (uncompressed, offsets from 0) holding a message set's messages; a
    set already of format 2 as it is. KafkaError on a broken set."""
    if len(message_set) > MAGIC_OFFSET and message_set[MAGIC_OFFSET] == 2:
        return bytes(message_set)
    messages = list(_messages(message_set))
    if not messages:
        raise KafkaError(ErrorCode.invalid_record, "a produce with no messages")
    keys, values, timestamps = zip(*messages)
    return encode_batch(list(values), keys=list(keys), timestamps=list(timestamps))


def _message(offset: int, magic: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    fields = [struct.pack(">bb", magic, 0)]
    if magic == 1:
        fields.append(_TIMESTAMP.pack(timestamp))
    for data in (key, value):
        fields.append(_LENGTH.pack(-1) if data is None else _LENGTH.pack(len(data)) + data)
    after_crc = b"".join(fields)
    crc = zlib.crc32(after_crc)
    return struct.pack(">qiI", offset, 4 + len(after_crc), crc) + after_crc


def _v2_records(batch) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of a format-2 batch's records."""
    header = read_batch_header(batch)
    data = records_section(batch)
    log_append = header.attributes & TIMESTAMP_TYPE_BIT
    out, pos = [], 0
    for _ in range(header.record_count):
        size, pos = _varint(data, pos)
        end = pos + size
        pos += 1  # attributes
        ts_delta, pos = _varint(data, pos)
        offset_delta, pos = _varint(data, pos)
        fields = []
        for _ in range(2):
            n, pos = _varint(data, pos)
            fields.append(None if n < 0 else bytes(data[pos:pos + n]))
            pos += max(n, 0)
        timestamp = header.max_timestamp if log_append else header.base_timestamp + ts_delta
        out.append((header.base_offset + offset_delta, timestamp, fields[0], fields[1]))
        pos = end  # headers: format 0 and 1 have none
    return out


def _varint(buf, pos: int) -> tuple[int, int]:
    """A zigzag varint (format 2's lengths and deltas)."""
    shift = raw = 0
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def down_convert(records: bytes, magic: int, from_offset: int) -> bytes:
    """The whole format-2 batches at the start of `records` as an uncompressed message set of
    `magic` (0 for Fetch v0-v1, 1 for v2-v3), from offset `from_offset` on (a fetch may start in a
    batch); control batches and a trailing partial batch left out."""
    out, pos = [], 0
    while len(records) - pos >= HEADER_SIZE:
        header = read_batch_header(records, pos)
        if header.length < HEADER_SIZE or pos + header.length > len(records):
            break
        if not header.attributes & CONTROL_BIT:
            for offset, timestamp, key, value in _v2_records(memoryview(records)[pos:pos + header.length]):
                if offset >= from_offset:
                    out.append(_message(offset, magic, timestamp, key, value))
        pos += header.length
    return b"".join(out)
