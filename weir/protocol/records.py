"""Encoding records into uncompressed magic-v2 batches (Kafka's record format v2).

Clients build batches; the broker only does so for what it writes itself (the group
coordinator's records in __consumer_offsets), and tests use it to make batches by hand.
Each record: length, attributes, timestamp delta, offset delta, key, value, headers, with
lengths and deltas as zigzag varints (-1 length = null).
"""

import struct

from crc32c import crc32c

from weir.protocol.record_batch import MAGIC


def zigzag_varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers: list[tuple[bytes, bytes | None]] | tuple = ()) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += zigzag_varint(timestamp_delta)
    body += zigzag_varint(offset_delta)
    for field in (key, value):
        body += zigzag_varint(-1) if field is None else zigzag_varint(len(field)) + field
    body += zigzag_varint(len(headers))
    for name, header_value in headers:
        body += zigzag_varint(len(name)) + name
        body += zigzag_varint(-1) if header_value is None else zigzag_varint(len(header_value)) + header_value
    return zigzag_varint(len(body)) + bytes(body)


def encode_batch(values: list[bytes | None], *, keys: list[bytes | None] | None = None, timestamp: int = 1_000,
                 timestamps: list[int] | None = None, base_offset: int = 0, leader_epoch: int = -1,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """One batch holding a record per value; timestamps default to `timestamp` for all."""
    assert values, "a batch holds at least one record"
    timestamps = timestamps or [timestamp] * len(values)
    keys = keys or [None] * len(values)
    base_ts = timestamps[0]
    records = b"".join(encode_record(i, ts - base_ts, k, v)
                       for i, (k, v, ts) in enumerate(zip(keys, values, timestamps)))
    after_crc = struct.pack(">hiqqqhii", 0, len(values) - 1, base_ts, max(timestamps), producer_id,
                            producer_epoch, base_sequence, len(values)) + records
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, the rest
    return struct.pack(">qiibI", base_offset, batch_length, leader_epoch, MAGIC, crc32c(after_crc)) + after_crc
