"""Decoding record batches (no Spark, no broker): codecs, control batches, ranges, Arrow schema."""

import struct

import pytest
import snappy
from crc32c import crc32c
from log.batches import COMPRESS, encode_record, make_batch, raw_batch

from weir.spark.records import CONTROL_BIT, TIMESTAMP_TYPE_BIT, ArrowBatches, CorruptBatch, decode


def xerial(raw: bytes) -> bytes:
    block = snappy.compress(raw)
    return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block


def batch(values, *, base_offset=0, attributes=0, compress=None, timestamp=1000, headers=None):
    """A v2 batch with the given attributes; records compressed by `compress`."""
    encoded_headers = [(name if isinstance(name, bytes) else name.encode(), value) for name, value in headers or ()]
    records = b"".join(encode_record(i, i, f"k{i}".encode(), v, encoded_headers) for i, v in enumerate(values))
    if compress:
        records = compress(records)
    after_crc = struct.pack(">hiqqqhii", attributes, len(values) - 1, timestamp, timestamp + 99, -1, -1, -1,
                            len(values)) + records
    return struct.pack(">qiibI", base_offset, 9 + len(after_crc), 0, 2, crc32c(after_crc)) + after_crc


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4, "xerial"])
def test_every_codec_decodes(codec):
    values = [f"value-{i}".encode() * (i % 5) for i in range(300)]
    values[7] = None
    if codec == "xerial":
        data = batch(values, attributes=2, compress=xerial)
    else:
        data = batch(values, attributes=codec, compress=COMPRESS.get(codec))
    cols = decode(data)
    assert cols.values.to_pylist() == values
    assert cols.keys.to_pylist() == [f"k{i}".encode() for i in range(300)]
    assert cols.offsets.to_pylist() == list(range(300))
    assert cols.timestamps.cast("int64").to_pylist() == [(1000 + i) * 1000 for i in range(300)]  # microseconds
    assert cols.timestamp_types.to_pylist() == [0] * 300
    assert cols.next_offset == 300


def test_ranges_control_batches_and_log_append_time():
    data = (batch([b"a", b"b", b"c"], base_offset=10)
            + batch([b"commit-marker"], base_offset=13, attributes=CONTROL_BIT)
            + batch([b"d", b"e"], base_offset=14, attributes=TIMESTAMP_TYPE_BIT, timestamp=5000))
    cols = decode(data, start=11, end=15)
    assert cols.values.to_pylist() == [b"b", b"c", b"d"]
    assert cols.offsets.to_pylist() == [11, 12, 14]
    assert cols.timestamp_types.to_pylist() == [0, 0, 1]
    assert cols.timestamps.cast("int64").to_pylist()[2] == 5_099_000  # LogAppendTime: the batch's max timestamp
    assert cols.next_offset == 16
    # a torn tail (a fetch cut by its size limit) is ignored
    torn = decode(data + make_batch([b"x"], base_offset=16)[:30])
    assert torn.offsets.to_pylist() == [10, 11, 12, 14, 15] and torn.next_offset == 16
    assert decode(data[:30]).next_offset is None


def test_headers_and_arrow_schema_match_spark():
    from weir.spark.source import arrow_schema, kafka_schema
    data = batch([b"v0", b"v1"], headers=[("h1", b"x"), ("h2", None)])
    cols = decode(data, with_headers=True)
    assert cols.headers.to_pylist()[0] == [{"key": "h1", "value": b"x"}, {"key": "h2", "value": None}]
    schema = arrow_schema(kafka_schema(include_headers=True))
    rb = ArrowBatches("t", 3, schema).batch(cols)
    assert rb.schema.equals(schema)
    assert rb.column("partition").to_pylist() == [3, 3]
    assert rb.column("topic").to_pylist() == ["t", "t"]
    assert rb.column("timestamp").cast("int64").to_pylist() == [1_000_000, 1_001_000]  # microseconds
    assert rb.column("headers").to_pylist()[1] == [{"key": "h1", "value": b"x"}, {"key": "h2", "value": None}]


def test_each_answer_gets_topic_and_partition_columns_of_its_own_length():
    from weir.spark.source import arrow_schema, kafka_schema
    batches = ArrowBatches("orders", 7, arrow_schema(kafka_schema()))
    for n in (3, 5, 2, 5):  # the columns built for 3 rows, rebuilt longer for 5, then cut to fit
        rb = batches.batch(decode(batch([b"v"] * n)))
        rb.validate(full=True)
        assert rb.num_rows == n
        assert rb.column("topic").to_pylist() == ["orders"] * n
        assert rb.column("partition").to_pylist() == [7] * n


def test_a_header_key_that_is_not_utf8_is_read_with_replacement_characters():
    cols = decode(batch([b"v"], headers=[(b"\xffkey", b"x")]), with_headers=True)
    assert cols.headers.to_pylist() == [[{"key": "\ufffdkey", "value": b"x"}]]


def test_a_timestamp_beyond_what_microseconds_hold_fails_the_read_naming_it():
    """Spark's Kafka source fails alike: its TimestampType holds microseconds in a long."""
    with pytest.raises(CorruptBatch, match="timestamp 4611686018427387904 ms is out of range in microseconds"):
        decode(batch([b"v"], timestamp=2**62))


def test_headers_of_records_outside_the_range_are_dropped_with_them():
    from weir.spark.source import arrow_schema, kafka_schema
    data = batch([b"v0", b"v1", b"v2"], headers=[("h", b"x")]) + batch([None], base_offset=3)
    cols = decode(data, start=1, end=4, with_headers=True)
    rb = ArrowBatches("t", 0, arrow_schema(kafka_schema(include_headers=True))).batch(cols)
    rb.validate(full=True)
    assert rb.column("headers").to_pylist() == [[{"key": "h", "value": b"x"}]] * 2 + [[]]
    assert rb.column("value").to_pylist() == [b"v1", b"v2", None]
    assert rb.column("key").null_count == 0


@pytest.mark.parametrize("cut", [1, 5, 20])
def test_records_running_past_their_batch_are_corrupt(cut):
    data = bytearray(batch([b"value"] * 3))
    struct.pack_into(">i", data, 8, len(data) - 12 - cut)  # the batch ends before its records do
    with pytest.raises(CorruptBatch, match="batch at offset 0"):
        decode(bytes(data[:len(data) - cut]))


def test_a_compacted_batch_keeps_its_offsets_and_gaps():
    records = b"".join(encode_record(delta, delta, b"k%d" % delta, b"v%d" % delta) for delta in (0, 2, 5))
    cols = decode(raw_batch(records, 3, last_offset_delta=5), start=1, end=6)
    assert cols.offsets.to_pylist() == [2, 5]
    assert cols.values.to_pylist() == [b"v2", b"v5"]
    assert cols.timestamps.cast("int64").to_pylist() == [1_002_000, 1_005_000]
    assert cols.next_offset == 6
