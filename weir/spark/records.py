"""Decode Kafka magic-v2 record batches into columns, in bulk, for Spark.

A Fetch answer is a run of whole record batches (see `weir.protocol.record_batch` for the header
layout). Each batch may be compressed (gzip, snappy, lz4, zstd: attributes bits 0-2), may be a
control batch (bit 5: transaction markers, never user data), and carries the timestamp type in bit
3 (0 = CreateTime, 1 = LogAppendTime: every record then takes the batch's max timestamp).

A batch may start before the offset a reader asked for (the broker answers whole batches) and the
last one may be cut short by the fetch size limit: `decode_into` keeps only the records inside
[start, end) and stops at a truncated tail, returning the next offset to ask for.

The columns are plain Python lists, appended to in one tight loop per batch; `to_arrow` turns them
into one `pyarrow.RecordBatch` whose schema is exactly the one Spark expects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protocol.compression import DecompressionError, decompress
from ..protocol.record_batch import CONTROL_BIT, HEADER_SIZE, MAGIC, TIMESTAMP_TYPE_BIT, read_batch_header


class CorruptBatch(ValueError):
    """A batch whose bytes do not decode (bad codec, bad varints, records past its end)."""


@dataclass
class Columns:
    """The decoded records of one read, column by column (the Kafka source's schema)."""

    with_headers: bool = False
    keys: list = field(default_factory=list)
    values: list = field(default_factory=list)
    offsets: list = field(default_factory=list)
    timestamps: list = field(default_factory=list)  # milliseconds since the epoch
    timestamp_types: list = field(default_factory=list)
    headers: list = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)


def decode_into(out: Columns, buf: bytes, start: int, end: int, keep_batch=None) -> int | None:
    """Append the records of every batch in `buf` whose offsets lie in [start, end).

    Returns the offset just past the last whole batch seen (the next fetch position), or None if
    `buf` held no whole batch. Control batches are skipped but still move the position, as do the
    batches `keep_batch(header, batch)` says no to (read_committed: aborted transactions).
    """
    pos, size = 0, len(buf)
    view = memoryview(buf)
    next_offset = None
    with_headers = out.with_headers
    keys, values, offsets = out.keys, out.values, out.offsets
    timestamps, timestamp_types, headers = out.timestamps, out.timestamp_types, out.headers
    while pos + HEADER_SIZE <= size:
        h = read_batch_header(buf, pos)
        if h.length < HEADER_SIZE or pos + h.length > size:
            break  # a partial batch at the end of a size-limited fetch
        if h.magic != MAGIC:
            raise CorruptBatch(f"batch at offset {h.base_offset} has magic {h.magic}; only v2 is supported")
        batch_end = pos + h.length
        next_offset = h.last_offset + 1
        kept = keep_batch is None or keep_batch(h, view[pos:batch_end])  # sees every batch, in order
        if not kept or h.attributes & CONTROL_BIT or h.last_offset < start or h.base_offset >= end:
            pos = batch_end
            continue
        codec = h.attributes & 0x07
        records = buf[pos + HEADER_SIZE:batch_end]
        if codec:
            try:
                records = decompress(codec, records)
            except DecompressionError as e:
                raise CorruptBatch(f"batch at offset {h.base_offset}: {e}") from e
        log_append = h.attributes & TIMESTAMP_TYPE_BIT
        ts_type = 1 if log_append else 0
        base_offset, base_ts, max_ts = h.base_offset, h.base_timestamp, h.max_timestamp
        try:
            _decode_records(records, h.record_count, base_offset, base_ts, max_ts if log_append else None,
                            ts_type, start, end, keys, values, offsets, timestamps, timestamp_types,
                            headers if with_headers else None)
        except IndexError as e:
            raise CorruptBatch(f"batch at offset {base_offset}: records run past the batch end") from e
        pos = batch_end
    return next_offset


def _decode_records(r: bytes, count: int, base_offset: int, base_ts: int, append_ts, ts_type: int,
                    start: int, end: int, keys, values, offsets, timestamps, timestamp_types, headers) -> None:
    """The hot loop: one record at a time, varints decoded inline (one byte is the common case)."""
    p = 0
    for _ in range(count):
        # record length (we walk the fields instead), then attributes (unused in v2)
        b = r[p]
        p += 1
        while b & 0x80:
            b = r[p]
            p += 1
        p += 1
        # timestamp delta
        b = r[p]
        p += 1
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
        else:
            n, shift = b & 0x7F, 7
            while True:
                b = r[p]
                p += 1
                n |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
            ts_delta = (n >> 1) ^ -(n & 1)
        # offset delta
        b = r[p]
        p += 1
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
        else:
            n, shift = b & 0x7F, 7
            while True:
                b = r[p]
                p += 1
                n |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
            off_delta = (n >> 1) ^ -(n & 1)
        # key
        b = r[p]
        p += 1
        if b < 0x80:
            klen = (b >> 1) ^ -(b & 1)
        else:
            n, shift = b & 0x7F, 7
            while True:
                b = r[p]
                p += 1
                n |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
            klen = (n >> 1) ^ -(n & 1)
        if klen < 0:
            key = None
        else:
            key = r[p:p + klen]
            p += klen
        # value
        b = r[p]
        p += 1
        if b < 0x80:
            vlen = (b >> 1) ^ -(b & 1)
        else:
            n, shift = b & 0x7F, 7
            while True:
                b = r[p]
                p += 1
                n |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
            vlen = (n >> 1) ^ -(n & 1)
        if vlen < 0:
            value = None
        else:
            value = r[p:p + vlen]
            p += vlen
        # headers
        b = r[p]
        p += 1
        if b < 0x80:
            hcount = (b >> 1) ^ -(b & 1)
        else:
            hcount, p = _varint_rest(r, p, b)
        record_headers = [] if headers is not None else None
        for _h in range(hcount):
            hklen, p = _varint(r, p)
            hkey = r[p:p + hklen].decode("utf-8", "replace")
            p += hklen
            hvlen, p = _varint(r, p)
            if hvlen < 0:
                hvalue = None
            else:
                hvalue = r[p:p + hvlen]
                p += hvlen
            if record_headers is not None:
                record_headers.append({"key": hkey, "value": hvalue})
        if p > len(r):
            raise IndexError("record past the end")
        offset = base_offset + off_delta
        if offset < start or offset >= end:
            continue
        keys.append(key)
        values.append(value)
        offsets.append(offset)
        timestamps.append(base_ts + ts_delta if append_ts is None else append_ts)
        timestamp_types.append(ts_type)
        if headers is not None:
            headers.append(record_headers)


def _varint(r: bytes, p: int) -> tuple[int, int]:
    b = r[p]
    p += 1
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p
    return _varint_rest(r, p, b)


def _varint_rest(r: bytes, p: int, b: int) -> tuple[int, int]:
    n, shift = b & 0x7F, 7
    while True:
        b = r[p]
        p += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return (n >> 1) ^ -(n & 1), p
        shift += 7


def decode(buf: bytes, start: int = 0, end: int = 2**63 - 1, with_headers: bool = False) -> Columns:
    """All records of the whole batches in `buf` with offsets in [start, end)."""
    out = Columns(with_headers)
    decode_into(out, buf, start, end)
    return out


# -- Arrow ---------------------------------------------------------------------------------------

def to_arrow(columns: Columns, topic: str, partition: int, arrow_schema):
    """One pyarrow.RecordBatch of `columns`, with the (exact) schema Spark gave the reader.

    `arrow_schema` holds a subset of the Kafka source's columns, in Spark's order.
    """
    import pyarrow as pa
    n = len(columns)
    arrays = []
    for f in arrow_schema:
        name = f.name
        if name == "key":
            arrays.append(pa.array(columns.keys, type=f.type))
        elif name == "value":
            arrays.append(pa.array(columns.values, type=f.type))
        elif name == "topic":
            arrays.append(pa.array([topic] * n, type=f.type))
        elif name == "partition":
            arrays.append(pa.array([partition] * n, type=f.type))
        elif name == "offset":
            arrays.append(pa.array(columns.offsets, type=f.type))
        elif name == "timestamp":
            millis = pa.array(columns.timestamps, type=pa.timestamp("ms", tz=f.type.tz))
            arrays.append(millis.cast(f.type))
        elif name == "timestampType":
            arrays.append(pa.array(columns.timestamp_types, type=f.type))
        elif name == "headers":
            arrays.append(pa.array(columns.headers if columns.with_headers else [None] * n, type=f.type))
        else:
            raise ValueError(f"unknown column {name!r}")
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)

