"""Record batches (magic v2) as opaque bytes: read the header, check the CRC.

Layout of a batch header (big-endian), from Kafka's message format docs:

    0  baseOffset int64         12 partitionLeaderEpoch int32   16 magic int8
    17 crc uint32 (CRC-32C of bytes 21..end)                  21 attributes int16
    23 lastOffsetDelta int32    27 baseTimestamp int64          35 maxTimestamp int64
    43 producerId int64         51 producerEpoch int16          53 baseSequence int32
    57 recordCount int32        61 records...

baseOffset and partitionLeaderEpoch lie outside the CRC, so the log patches
them in place without recomputing it.
"""

import struct
from typing import NamedTuple

from crc32c import crc32c

from weir.protocol.compression import decompress

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
MAGIC = 2
CRC_START = 21  # the CRC covers attributes to the end
_HEAD = struct.Struct(">qiibIhiqqqhii")
CODEC_MASK = 0x07  # attributes bits 0-2: the compression codec
TIMESTAMP_TYPE_BIT = 0x08  # 0 CreateTime, 1 LogAppendTime (every record then has the batch's max timestamp)
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20  # transaction markers, never user data
MAX_CODEC = 4  # none, gzip, snappy, lz4, zstd


class BatchHeader(NamedTuple):
    """Read for every batch produced or replicated: a named tuple, cheaper to build than a frozen
    dataclass, as immutable."""

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


def crc_matches(buf, pos: int, size: int, stored_crc: int) -> bool:
    """Whether the CRC-32C of the batch at buf[pos:pos+size] equals the one in its header."""
    return crc32c(memoryview(buf)[pos + CRC_START: pos + size]) == stored_crc


def records_section(batch) -> memoryview:
    """A batch's records, decompressed if it is compressed."""
    header = read_batch_header(batch)
    data = memoryview(batch)[HEADER_SIZE:header.length]
    if header.attributes & CODEC_MASK:
        data = memoryview(decompress(header.attributes & CODEC_MASK, data))
    return data
