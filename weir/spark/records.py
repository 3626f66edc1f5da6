"""Decode Kafka magic-v2 record batches into Arrow columns, in bulk, for Spark.

A Fetch answer is a run of whole record batches (see `weir.protocol.record_batch` for the header
layout). Each batch may be compressed (gzip, snappy, lz4, zstd: attributes bits 0-2), may be a
control batch (bit 5: transaction markers, never user data), and carries the timestamp type in bit
3 (0 = CreateTime, 1 = LogAppendTime: every record then takes the batch's max timestamp).

A batch may start before the offset a reader asked for (the broker answers whole batches) and the
last one may be cut short by the fetch size limit: `decode` keeps only the records inside
[start, end) and stops at a truncated tail, telling the next offset to ask for.

Python looks at batch headers only (and decompresses whole batches); the records of all the kept
batches are walked once in C (`columns` in weir/log/_record_walk.c), which writes the Arrow
buffers of each column into buffers from pyarrow's memory pool, and pyarrow wraps those without a
copy. `ArrowBatches` adds the topic and partition columns and gives one `pyarrow.RecordBatch`
whose schema is exactly the one Spark expects.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from weir.log._record_walk import columns
from weir.protocol.compression import DecompressionError
from weir.protocol.record_batch import (CONTROL_BIT, HEADER_SIZE, MAGIC, TIMESTAMP_TYPE_BIT, read_batch_header,
                                        records_section)

MAX_OFFSET = 2**63 - 1
HEADER_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE))  # as Spark's Arrow schema names it


class CorruptBatch(ValueError):
    """A batch whose bytes do not decode (bad codec, bad varints, records past its end)."""


@dataclass(frozen=True)
class Columns:
    """The records of one Fetch answer inside [start, end), column by column (the Kafka source's)."""

    next_offset: int | None  # just past the last whole batch seen; None if there was none
    keys: pa.Array  # binary
    values: pa.Array  # binary
    offsets: pa.Array  # int64
    timestamps: pa.Array  # timestamp[us, UTC], Spark's
    timestamp_types: pa.Array  # int32: 0 CreateTime, 1 LogAppendTime
    headers: pa.Array | None  # HEADERS_TYPE, if asked for

    def __len__(self) -> int:
        return len(self.offsets)


def decode(buf, start: int = 0, end: int = MAX_OFFSET, keep_batch=None, with_headers: bool = False) -> Columns:
    """The records of every whole batch in `buf` whose offsets lie in [start, end).

    Control batches are skipped but still move `next_offset`, as do the batches
    `keep_batch(header, batch)` says no to (read_committed: aborted transactions).
    """
    pos, size = 0, len(buf)
    view = memoryview(buf)
    next_offset = None
    kept = []
    while pos + HEADER_SIZE <= size:
        h = read_batch_header(buf, pos)
        if h.length < HEADER_SIZE or pos + h.length > size:
            break  # a partial batch at the end of a size-limited fetch
        if h.magic != MAGIC:
            raise CorruptBatch(f"batch at offset {h.base_offset} has magic {h.magic}; only v2 is supported")
        batch = view[pos:pos + h.length]
        pos += h.length
        next_offset = h.last_offset + 1
        if keep_batch is not None and not keep_batch(h, batch):  # sees every batch, in order
            continue
        if h.attributes & CONTROL_BIT or h.last_offset < start or h.base_offset >= end:
            continue
        try:
            records = records_section(batch)
        except DecompressionError as e:
            raise CorruptBatch(f"batch at offset {h.base_offset}: {e}") from e
        kept.append((records, h.record_count, h.base_offset, h.base_timestamp, h.max_timestamp,
                     bool(h.attributes & TIMESTAMP_TYPE_BIT)))
    try:
        rows, offsets, timestamps, types, keys, values, headers = columns(kept, start, end, with_headers, _allocate)
    except ValueError as e:
        raise CorruptBatch(str(e)) from None
    return Columns(next_offset, _binary(keys), _binary(values), _fixed(pa.int64(), rows, offsets),
                   _fixed(pa.timestamp("us", tz="UTC"), rows, timestamps), _fixed(pa.int32(), rows, types),
                   None if headers is None else _headers(rows, *headers))


def _allocate(size: int) -> pa.ResizableBuffer:
    return pa.allocate_buffer(size, resizable=True)


def _cut(buffer: pa.ResizableBuffer, size: int) -> pa.ResizableBuffer:
    buffer.resize(size, shrink_to_fit=True)
    return buffer


def _fixed(type_: pa.DataType, rows: int, data: pa.ResizableBuffer) -> pa.Array:
    return pa.Array.from_buffers(type_, rows, [None, _cut(data, rows * type_.bit_width // 8)])


def _binary(column: tuple) -> pa.Array:
    validity, offsets, data, items, size, nulls = column
    return pa.Array.from_buffers(pa.binary(), items, [validity and _cut(validity, (items + 7) // 8),
                                                      _cut(offsets, (items + 1) * 4), _cut(data, size)],
                                 null_count=nulls)


def _headers(rows: int, list_offsets: pa.ResizableBuffer, keys: tuple, values: tuple) -> pa.Array:
    raw = _binary(keys)
    names = raw.view(pa.string())
    try:
        names.validate(full=True)  # checks the UTF-8
    except pa.ArrowInvalid:
        names = pa.array([k.decode("utf-8", "replace") for k in raw.to_pylist()], pa.string())
    pairs = pa.StructArray.from_arrays([names, _binary(values)], fields=list(HEADER_TYPE))
    return pa.Array.from_buffers(HEADERS_TYPE, rows, [None, _cut(list_offsets, (rows + 1) * 4)], children=[pairs])


class ArrowBatches:
    """Spark's record batches of one topic partition's `Columns`, with the (exact) schema Spark
    gave the reader: `arrow_schema` holds a subset of the Kafka source's columns, in Spark's order.

    The topic and partition columns hold one value in every row: each is built once, as long as the
    longest answer so far, and sliced (building them for every answer cost as much as a tenth of
    the read)."""

    def __init__(self, topic: str, partition: int, arrow_schema: pa.Schema) -> None:
        self.topic, self.partition, self.arrow_schema = topic, partition, arrow_schema
        self._constant: dict[str, pa.Array] = {}

    def batch(self, columns: Columns) -> pa.RecordBatch:
        n = len(columns)
        by_name = {"key": columns.keys, "value": columns.values, "offset": columns.offsets,
                   "timestamp": columns.timestamps, "timestampType": columns.timestamp_types,
                   "headers": columns.headers}
        arrays = []
        for f in self.arrow_schema:
            if f.name in ("topic", "partition"):
                array = self._repeated(f, n)
            elif f.name in by_name:
                array = by_name[f.name]
            else:
                raise ValueError(f"unknown column {f.name!r}")
            arrays.append(array if array.type == f.type else array.cast(f.type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def _repeated(self, field: pa.Field, n: int) -> pa.Array:
        array = self._constant.get(field.name)
        if array is None or len(array) < n:
            value = self.topic if field.name == "topic" else self.partition
            array = self._constant[field.name] = pa.repeat(pa.scalar(value, field.type), n)
        return array.slice(0, n)
