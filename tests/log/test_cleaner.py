"""Log compaction's batch rewriting (weir.log.cleaner), on bytes the broker's encoder made."""

from weir.log.batch_header import scan_buffer
from weir.log.cleaner import clean_segment, latest_offsets, records_of
from weir.log.log_validator import recovered_max_timestamp
from weir.protocol.record_batch import read_batch_header
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
    cleaned = clean_segment(segment, offsets, drop_tombstones=False)
    assert values(cleaned) == [(3, b"c", False), (4, b"b", False), (5, b"a", False)]
    headers = [read_batch_header(cleaned, p.position) for p in scan_buffer(cleaned, 0)]
    assert [(h.base_offset, h.last_offset, h.record_count) for h in headers] == [(0, 2, 0), (3, 3, 1), (4, 5, 2)], \
        "an emptied batch keeps its offsets as an empty header; the others keep theirs"
    assert all(recovered_max_timestamp(cleaned[p.position:p.position + p.size]) is not None
               for p in scan_buffer(cleaned, 0)), "every batch is valid (CRC, records) for recovery"
    assert clean_segment(cleaned, offsets, drop_tombstones=False) is None, "cleaning again changes nothing"


def test_tombstones_stay_until_their_segment_is_past_the_delete_retention():
    segment = batch(0, [(b"a", b"1"), (b"b", b"1")]) + batch(2, [(b"a", None)])
    offsets = latest_offsets([segment])
    kept = clean_segment(segment, offsets, drop_tombstones=False)
    assert values(kept) == [(1, b"b", False), (2, b"a", True)]
    assert values(clean_segment(kept, offsets, drop_tombstones=True)) == [(1, b"b", False)]


def test_records_without_a_key_go_and_an_idempotent_batch_keeps_its_producer_fields():
    segment = batch(0, [(None, b"x"), (b"k", b"1")], producer_id=7, producer_epoch=0, base_sequence=10) + \
        batch(2, [(b"k", b"2")], producer_id=7, producer_epoch=0, base_sequence=12)
    cleaned = clean_segment(segment, latest_offsets([segment]), drop_tombstones=False)
    first = read_batch_header(cleaned)
    assert (first.record_count, first.producer_id, first.base_sequence, first.last_offset_delta) == (0, 7, 10, 1)
    assert values(cleaned) == [(2, b"k", False)]


def test_records_a_later_segment_replaces_go_from_an_earlier_one():
    old, new = batch(0, [(b"a", b"1"), (b"b", b"1")]), batch(2, [(b"a", b"2")])
    offsets = latest_offsets([old, new])
    assert values(clean_segment(old, offsets, drop_tombstones=False)) == [(1, b"b", False)]
    assert clean_segment(new, offsets, drop_tombstones=False) is None
