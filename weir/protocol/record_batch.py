"""Record batches (magic v2) as opaque bytes: read the header, check, patch.

Layout of a batch header (big-endian), from Kafka's message format docs:

    0  baseOffset int64         12 partitionLeaderEpoch int32   16 magic int8
    17 crc uint32 (CRC-32C of bytes 21..end)                  21 attributes int16
    23 lastOffsetDelta int32    27 baseTimestamp int64          35 maxTimestamp int64
    43 producerId int64         51 producerEpoch int16          53 baseSequence int32
    57 recordCount int32        61 records...

baseOffset and partitionLeaderEpoch lie outside the CRC, so the broker patches
them in place and never recomputes it.
"""

import struct
from dataclasses import dataclass

from crc32c import crc32c

from .errors import ErrorCode, KafkaError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
MAGIC = 2
CRC_START = 21  # the CRC covers attributes to the end
_HEAD = struct.Struct(">qiibIhiqqqhii")
CODEC_MASK = 0x07
MAX_CODEC = 4  # none, gzip, snappy, lz4, zstd
TRANSACTIONAL = 0x10


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    length: int  # whole batch, header included
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


def read_batch_header(buf, offset: int = 0) -> BatchHeader:
    (base, batch_length, epoch, magic, crc, attrs, delta, base_ts, max_ts, pid, pepoch, seq,
     count) = _HEAD.unpack_from(buf, offset)
    return BatchHeader(base, batch_length + LOG_OVERHEAD, epoch, magic, crc, attrs, delta,
                       base_ts, max_ts, pid, pepoch, seq, count)


def batch_headers(buf) -> list[BatchHeader]:
    """The headers of the whole batches in `buf` (a fetch response's records, say)."""
    headers = []
    position = 0
    while position + HEADER_SIZE <= len(buf):
        header = read_batch_header(buf, position)
        if header.length < HEADER_SIZE or position + header.length > len(buf):
            break
        headers.append(header)
        position += header.length
    return headers


def validate_produced_batch(records, max_message_bytes: int) -> BatchHeader:
    """Check what a client produced to one partition: exactly one valid v2 batch.

    Kafka accepts one batch per partition from produce v3 on; anything else is
    INVALID_RECORD. Bad framing or CRC is CORRUPT_MESSAGE, an oversized batch
    MESSAGE_TOO_LARGE, an unknown codec UNSUPPORTED_COMPRESSION_TYPE.
    """
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
    if size > max_message_bytes:
        raise KafkaError(ErrorCode.message_too_large,
                         f"batch of {size} bytes exceeds max.message.bytes {max_message_bytes}")
    if not crc_matches(records, 0, size, header.crc):
        raise KafkaError(ErrorCode.corrupt_message, "record batch CRC mismatch")
    if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
        raise KafkaError(ErrorCode.invalid_record,
                         f"{header.record_count} records but last offset delta {header.last_offset_delta}")
    if header.attributes & CODEC_MASK > MAX_CODEC:
        raise KafkaError(ErrorCode.unsupported_compression_type,
                         f"compression codec {header.attributes & CODEC_MASK}")
    if header.attributes & TRANSACTIONAL:
        raise KafkaError(ErrorCode.invalid_record, "transactional batches are not supported")
    return header


def crc_matches(buf, pos: int, size: int, stored_crc: int) -> bool:
    """Whether the CRC-32C of the batch at buf[pos:pos+size] equals the one in its header."""
    return crc32c(memoryview(buf)[pos + CRC_START: pos + size]) == stored_crc
