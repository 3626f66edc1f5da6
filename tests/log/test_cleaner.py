"""Log compaction's batch rewriting (weir.log.cleaner), on bytes the broker's encoder made."""

import struct

import pytest
from crc32c import crc32c

from weir.log.batch_header import scan_buffer
from weir.log.cleaner import clean_segment, latest_offsets, records_of
from weir.log.log_validator import recovered_max_timestamp
from weir.protocol.compression import CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY, CODEC_ZSTD, compress
from weir.protocol.record_batch import CODEC_MASK, CRC_START, HEADER_SIZE, read_batch_header
from weir.protocol.records import encode_batch


def batch(base: int, pairs, **fields) -> bytes:
    return encode_batch([v for _, v in pairs], keys=[k for k, _ in pairs], base_offset=base, leader_epoch=0,
                        **fields)


def values(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, tombstone?) of every record left, with each batch's offsets."""
    out, position = [], 0
    while position < len(data):
        header = read_batch_header(data, position)
        whole = data[position:position + header.length]
        out += [(header.base_offset + delta, key, tombstone) for _, _, delta, key, tombstone in records_of(whole)]
        position += header.length
    return out


def test_the_latest_record_of_each_key_stays_and_offsets_do_not_move():
    segment = (batch(0, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")]) + batch(3, [(b"c", b"1")])
               + batch(4, [(b"b", b"2"), (b"a", b"3")]))
    offsets = latest_offsets([segment])
    assert offsets == {b"a": 5, b"b": 4, b"c": 3}
    cleaned = clean_segment(segment, offsets, 0, 0)
    assert values(cleaned) == [(3, b"c", False), (4, b"b", False), (5, b"a", False)]
    headers = [read_batch_header(cleaned, p.position) for p in scan_buffer(cleaned, 0)]
    assert [(h.base_offset, h.last_offset, h.record_count) for h in headers] == [(0, 2, 0), (3, 3, 1), (4, 5, 2)], \
        "an emptied batch keeps its offsets as an empty header; the others keep theirs"
    assert all(recovered_max_timestamp(cleaned[p.position:p.position + p.size]) is not None
               for p in scan_buffer(cleaned, 0)), "every batch is valid (CRC, records) for recovery"
    assert clean_segment(cleaned, offsets, 0, 0) is None, "cleaning again changes nothing"


@pytest.mark.parametrize("codec", [0, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD])
def test_tombstones_stay_until_the_delete_horizon_their_first_cleaning_stamped(codec):
    """KIP-534: the cleaning that first keeps a tombstone stamps its batch with now +
    delete.retention.ms (attributes bit 6, the base timestamp; the records' timestamps do not
    change); a cleaning at or after that horizon removes it."""
    head = batch(0, [(b"a", b"1"), (b"b", b"1")])
    pairs = [(b"a", None), (b"c", b"1"), (b"d", None)]
    segment = head + (compressed_batch(codec, 2, pairs, timestamps=[5, 6, 7]) if codec
                      else batch(2, pairs, timestamps=[5, 6, 7]))
    offsets = latest_offsets([segment])
    kept = clean_segment(segment, offsets, 10_000, 1_000)
    assert values(kept) == [(1, b"b", False), (2, b"a", True), (3, b"c", False), (4, b"d", True)]
    stamped = read_batch_header(kept, read_batch_header(kept).length)
    assert (stamped.attributes & 0x40, stamped.attributes & CODEC_MASK, stamped.base_timestamp,
            stamped.max_timestamp) == (0x40, codec, 11_000, 7)
    assert recovered_max_timestamp(kept[read_batch_header(kept).length:]) == 7, "each record keeps its timestamp"
    assert clean_segment(kept, offsets, 10_999, 1_000) is None, "before the horizon: kept, the horizon unchanged"
    gone = clean_segment(kept, offsets, 11_000, 1_000)
    assert values(gone) == [(1, b"b", False), (3, b"c", False)]
    assert read_batch_header(gone, read_batch_header(gone).length).base_timestamp == 11_000
    assert clean_segment(gone, offsets, 20_000, 1_000) is None


def test_records_without_a_key_go_and_an_idempotent_batch_keeps_its_producer_fields():
    segment = batch(0, [(None, b"x"), (b"k", b"1")], producer_id=7, producer_epoch=0, base_sequence=10) + \
        batch(2, [(b"k", b"2")], producer_id=7, producer_epoch=0, base_sequence=12)
    cleaned = clean_segment(segment, latest_offsets([segment]), 0, 0)
    first = read_batch_header(cleaned)
    assert (first.record_count, first.producer_id, first.base_sequence, first.last_offset_delta) == (0, 7, 10, 1)
    assert values(cleaned) == [(2, b"k", False)]


def test_records_a_later_segment_replaces_go_from_an_earlier_one():
    old, new = batch(0, [(b"a", b"1"), (b"b", b"1")]), batch(2, [(b"a", b"2")])
    offsets = latest_offsets([old, new])
    assert values(clean_segment(old, offsets, 0, 0)) == [(1, b"b", False)]
    assert clean_segment(new, offsets, 0, 0) is None


@pytest.mark.parametrize("codec", [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD])
def test_a_compressed_batch_keeps_its_live_records_compressed_in_its_codec(codec):
    """As Kafka's cleaner: the records kept are compressed again, offsets and header fields kept."""
    plain = bytearray(batch(0, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1")],
                            producer_id=7, producer_epoch=0, base_sequence=0))
    header = read_batch_header(plain)
    compressed = bytearray(plain[:HEADER_SIZE]) + compress(codec, plain[HEADER_SIZE:])
    compressed[21:23] = struct.pack(">h", header.attributes | codec)
    compressed[8:12] = struct.pack(">i", len(compressed) - 12)
    compressed[17:21] = struct.pack(">I", crc32c(memoryview(compressed)[CRC_START:]))
    segment = bytes(compressed) + batch(4, [(b"b", b"2")])

    cleaned = clean_segment(segment, latest_offsets([segment]), 0, 0)
    first = read_batch_header(cleaned)
    assert first.attributes & CODEC_MASK == codec
    assert (first.base_offset, first.last_offset_delta, first.record_count, first.producer_id, first.base_sequence) \
        == (0, 3, 2, 7, 0)
    assert values(cleaned) == [(2, b"a", False), (3, b"c", False), (4, b"b", False)]
    assert recovered_max_timestamp(cleaned[:first.length]) is not None, "valid: CRC and records"


def compressed_batch(codec: int, base: int, pairs, **fields) -> bytes:
    plain = bytearray(batch(base, pairs, **fields))
    header = read_batch_header(plain)
    out = bytearray(plain[:HEADER_SIZE]) + compress(codec, plain[HEADER_SIZE:])
    out[21:23] = struct.pack(">h", header.attributes | codec)
    out[8:12] = struct.pack(">i", len(out) - 12)
    out[17:21] = struct.pack(">I", crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


@pytest.mark.parametrize("codec, others", [(CODEC_GZIP, 85), (CODEC_ZSTD, 19)])
def test_a_cleaned_segment_of_the_same_length_is_still_written(codec, others):
    """Compressed again without a stale record, a batch can be exactly as long as it was (here
    gzip's and zstd's output for these records): the cleaning still rewrites it, as Kafka's
    cleaner writes whatever filterTo retains, whatever its size."""
    pairs = [(b"k", b"v")] + [(b"key-%d" % i, b"v") for i in range(1, others + 1)] + [(b"k", b"v")]
    segment = compressed_batch(codec, 0, pairs)
    cleaned = clean_segment(segment, latest_offsets([segment]), 0, 0)
    assert cleaned is not None, "the stale record of k goes"
    assert len(cleaned) == len(segment)
    assert [key for _, key, _ in values(cleaned)].count(b"k") == 1


def test_records_whose_timestamps_are_far_apart_are_cleaned():
    """A record's timestamp delta is a varlong (Kafka's DefaultRecord): a batch whose records'
    timestamps are more than 2^34 ms (about 200 days) apart, which Kafka accepts and cleans,
    must not stop the cleaner."""
    segment = encode_batch([b"old", b"new", b"x"], keys=[b"k", b"k", b"y"], timestamps=[0, 2**40, 2**41],
                           leader_epoch=0)
    offsets = latest_offsets([segment])
    assert offsets == {b"k": 1, b"y": 2}
    assert values(clean_segment(segment, offsets, 0, 0)) == [(1, b"k", False), (2, b"y", False)]


@pytest.mark.parametrize("codec", [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD])
def test_a_compressed_batch_that_keeps_no_record_becomes_an_uncompressed_empty_header(codec):
    """As Kafka's DefaultRecordBatch.writeEmptyHeader: an emptied batch has no records section and
    no codec (an empty snappy or lz4 payload is not a valid one: recovery refused the cleaned
    segment, which stopped the cleaner); its other fields stay."""
    segment = compressed_batch(codec, 0, [(b"a", b"1"), (b"b", b"1")], producer_id=7, producer_epoch=0,
                               base_sequence=0) + batch(2, [(b"a", b"2"), (b"b", b"2")])
    cleaned = clean_segment(segment, latest_offsets([segment]), 0, 0)
    first = read_batch_header(cleaned)
    assert (first.record_count, first.attributes & CODEC_MASK, first.length) == (0, 0, HEADER_SIZE)
    assert (first.base_offset, first.last_offset_delta, first.producer_id, first.base_sequence) == (0, 1, 7, 0)
    assert recovered_max_timestamp(cleaned[:first.length]) is not None, "valid: CRC and records"
