"""Build valid, uncompressed Kafka magic-v2 record batches for tests (and read them back)."""

from __future__ import annotations

import gzip
import struct

import lz4.frame
import snappy
import zstandard
from crc32c import crc32c

from weir.protocol.records import encode_batch, encode_record, zigzag_varint  # noqa: F401 (re-exported)

# Each codec's compressor, by its attributes value (the broker only decompresses).
COMPRESS = {1: gzip.compress, 2: snappy.compress, 3: lz4.frame.compress,
            4: lambda b: zstandard.ZstdCompressor().compress(b)}

# The encoder is the broker's own (weir.protocol.records); tests call it make_batch.
make_batch = encode_batch


def batch_headers(data: bytes) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, leader epoch, size) of each batch in `data`."""
    out = []
    pos = 0
    while pos < len(data):
        base, length, epoch = struct.unpack_from(">qii", data, pos)
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append((base, base + delta, epoch, length + 12))
        pos += length + 12
    assert pos == len(data)
    return out


def batch_crc_ok(data: bytes, pos: int = 0) -> bool:
    length, = struct.unpack_from(">i", data, pos + 8)
    stored, = struct.unpack_from(">I", data, pos + 17)
    return crc32c(data[pos + 21:pos + 12 + length]) == stored


def record_values(data: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in a run of uncompressed batches."""
    out = []
    pos = 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        count, = struct.unpack_from(">i", data, pos + 57)
        rpos = pos + 61
        for _ in range(count):
            _len, rpos = _read_varint(data, rpos)
            rpos += 1  # attributes
            _ts, rpos = _read_varint(data, rpos)
            delta, rpos = _read_varint(data, rpos)
            klen, rpos = _read_varint(data, rpos)
            rpos += max(klen, 0)
            vlen, rpos = _read_varint(data, rpos)
            value = None if vlen < 0 else data[rpos:rpos + vlen]
            rpos += max(vlen, 0)
            _headers, rpos = _read_varint(data, rpos)
            out.append((base + delta, value))
        pos += 12 + length
    return out


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos


_HEADER_FIELDS = {  # name: (position, struct format) of the header fields after the CRC
    "attributes": (21, ">h"), "last_offset_delta": (23, ">i"), "base_timestamp": (27, ">q"),
    "max_timestamp": (35, ">q"), "producer_id": (43, ">q"), "producer_epoch": (51, ">h"),
    "base_sequence": (53, ">i"), "record_count": (57, ">i"),
}


def raw_batch(records: bytes, count: int, *, attributes: int = 0, last_offset_delta: int | None = None,
              base_timestamp: int = 1_000, max_timestamp: int = 1_000, producer_id: int = -1,
              producer_epoch: int = -1, base_sequence: int = -1, magic: int = 2) -> bytes:
    """A batch around a records section given as bytes (compressed or not, right or wrong), with
    every header field as given and a CRC that matches."""
    delta = count - 1 if last_offset_delta is None else last_offset_delta
    after_crc = struct.pack(">hiqqqhii", attributes, delta, base_timestamp, max_timestamp, producer_id,
                            producer_epoch, base_sequence, count) + records
    return struct.pack(">qiibI", 0, 9 + len(after_crc), -1, magic, crc32c(after_crc)) + after_crc


def patched(batch: bytes, **fields) -> bytes:
    """`batch` with header fields changed (names as in raw_batch; values wrap to the field's
    width) and its CRC made to match."""
    buf = bytearray(batch)
    for name, value in fields.items():
        position, fmt = _HEADER_FIELDS[name]
        half = 1 << (struct.calcsize(fmt) * 8 - 1)
        struct.pack_into(fmt, buf, position, (value + half) % (2 * half) - half)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)
