"""Build valid, uncompressed Kafka magic-v2 record batches for tests (and read them back)."""

from __future__ import annotations

import struct

from crc32c import crc32c


def zigzag_varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += zigzag_varint(timestamp_delta)
    body += zigzag_varint(offset_delta)
    for field in (key, value):
        if field is None:
            body += zigzag_varint(-1)
        else:
            body += zigzag_varint(len(field)) + field
    body += zigzag_varint(0)  # no headers
    return zigzag_varint(len(body)) + bytes(body)


def make_batch(values: list[bytes | None], *, timestamp: int = 1_000, timestamps: list[int] | None = None,
               base_offset: int = 0, leader_epoch: int = -1, keys: list[bytes | None] | None = None,
               producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """One batch holding a record per value; timestamps default to `timestamp` for all."""
    assert values
    timestamps = timestamps or [timestamp] * len(values)
    keys = keys or [None] * len(values)
    base_ts = timestamps[0]
    records = b"".join(encode_record(i, ts - base_ts, k, v)
                       for i, (k, v, ts) in enumerate(zip(keys, values, timestamps)))
    after_crc = struct.pack(">hiqqqhii", 0, len(values) - 1, base_ts, max(timestamps), producer_id,
                            producer_epoch, base_sequence, len(values)) + records
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, rest
    return struct.pack(">qiibI", base_offset, batch_length, leader_epoch, 2, crc) + after_crc


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
