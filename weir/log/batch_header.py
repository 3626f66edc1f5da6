"""The fixed header of a Kafka magic-v2 record batch, read with struct.

Layout (big-endian), offsets in bytes from the start of the batch:

    baseOffset int64 @0, batchLength int32 @8 (bytes after this field), partitionLeaderEpoch
    int32 @12, magic int8 @16, crc uint32 @17 (CRC-32C of bytes @21..end), attributes int16 @21,
    lastOffsetDelta int32 @23, baseTimestamp int64 @27, maxTimestamp int64 @35, producerId int64
    @43, producerEpoch int16 @51, baseSequence int32 @53, recordCount int32 @57, records @61.

The CRC does not cover baseOffset nor partitionLeaderEpoch, so the log patches both in place.
The log treats everything after the header as opaque bytes.
"""

from __future__ import annotations

import os
import struct
from typing import Callable, Iterator, NamedTuple

from weir.log.errors import CorruptRecord
from weir.protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, MAGIC, crc_matches

MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49

BASE_OFFSET_OFFSET = 0
LEADER_EPOCH_OFFSET = 12

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp: the first 43 bytes, everything the log needs.
_PREFIX = struct.Struct(">qiibIhiqq")
PREFIX_SIZE = _PREFIX.size  # 43
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")


class BatchInfo(NamedTuple):
    """What the log keeps of one batch: where it is and which offsets and time it covers."""

    position: int  # byte position of the batch (in a buffer or a segment file)
    size: int  # total bytes, header included
    base_offset: int
    last_offset: int
    max_timestamp: int
    leader_epoch: int


def read_prefix(buf, pos: int = 0) -> tuple:
    """(baseOffset, batchLength, leaderEpoch, magic, crc, attributes, lastOffsetDelta,
    baseTimestamp, maxTimestamp) of the batch at `pos`; `buf` must hold 43 bytes there."""
    return _PREFIX.unpack_from(buf, pos)


def is_plausible(batch_length: int, magic: int, last_offset_delta: int) -> bool:
    """Header checks that need no CRC: a length that can hold a header, magic 2, offsets that go
    forward."""
    return batch_length >= MIN_BATCH_LENGTH and magic == MAGIC and last_offset_delta >= 0


def scan_file(fd: int, position: int, end: int, *, verify_crc: bool, chunk_bytes: int = 1 << 20,
              inspect: Callable[[memoryview], int | None] | None = None) -> Iterator[BatchInfo]:
    """Yield the batches of a segment file from `position` (a batch boundary) up to `end`.

    Stops silently at the first batch that is torn (ends past `end`), has an impossible header,
    or (with verify_crc) fails its CRC, or (with `inspect`, which needs verify_crc) for which
    inspect(batch bytes) returns None; otherwise inspect's answer is the batch's max timestamp.
    The caller compares the end of the last batch it got with `end` to learn whether the file has
    a bad tail. Reads `chunk_bytes` at a time with pread; without verify_crc it reads only what is
    needed to see the headers.
    """
    buf = b""
    buf_start = position
    while position < end:
        off = position - buf_start
        if off + PREFIX_SIZE > len(buf):
            want = min(max(chunk_bytes, HEADER_SIZE), end - position)
            buf = os.pread(fd, want, position)
            buf_start, off = position, 0
            if len(buf) < PREFIX_SIZE:
                return
        base, length, epoch, magic, crc, _attrs, delta, _first_ts, max_ts = _PREFIX.unpack_from(buf, off)
        size = length + LOG_OVERHEAD
        if not is_plausible(length, magic, delta) or position + size > end:
            return
        if verify_crc:
            if off + size > len(buf):
                buf = os.pread(fd, min(max(chunk_bytes, size), end - position), position)
                buf_start, off = position, 0
                if len(buf) < size:
                    return
            if not crc_matches(buf, off, size, crc):
                return
            if inspect is not None:
                max_ts = inspect(memoryview(buf)[off:off + size])
                if max_ts is None:
                    return
        yield BatchInfo(position, size, base, base + delta, max_ts, epoch)
        position += size


def scan_buffer(buf, position: int = 0) -> Iterator[BatchInfo]:
    """Yield the batches of an in-memory buffer holding whole batches; raise CorruptRecord at
    anything else (the caller's bytes are wrong, not a disk)."""
    end = len(buf)
    while position < end:
        if position + HEADER_SIZE > end:
            raise CorruptRecord(f"truncated batch header at byte {position}")
        base, length, epoch, magic, _crc, _attrs, delta, _first_ts, max_ts = _PREFIX.unpack_from(buf, position)
        size = length + LOG_OVERHEAD
        if not is_plausible(length, magic, delta) or position + size > end:
            raise CorruptRecord(f"malformed batch at byte {position}")
        yield BatchInfo(position, size, base, base + delta, max_ts, epoch)
        position += size


def assign_offsets(buf: bytearray, first_offset: int, leader_epoch: int) -> list[BatchInfo]:
    """Patch every batch in `buf` in place with its base offset (consecutive from
    `first_offset`) and `leader_epoch`; return the batches with their new offsets.
    Per batch, never per record: one header unpack and two small packs."""
    batches = []
    next_offset = first_offset
    for batch in scan_buffer(buf):  # each header is read before it is patched
        _INT64.pack_into(buf, batch.position + BASE_OFFSET_OFFSET, next_offset)
        _INT32.pack_into(buf, batch.position + LEADER_EPOCH_OFFSET, leader_epoch)
        last_offset = next_offset + batch.last_offset - batch.base_offset
        batches.append(BatchInfo(batch.position, batch.size, next_offset, last_offset, batch.max_timestamp,
                                 leader_epoch))
        next_offset = last_offset + 1
    if not batches:
        raise CorruptRecord("no record batch to append")
    return batches
