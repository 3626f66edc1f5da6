import pytest

from weir.log import AppendInfo, CorruptRecord, LogConfig, OffsetOutOfRange, UnexpectedAppendOffset

from .batches import batch_crc_ok, batch_headers, make_batch, record_values
from .conftest import NOW


def test_fresh_log_is_empty_at_offset_zero(open_log, log_dir):
    log = open_log()
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert (log_dir / "00000000000000000000.log").exists()
    assert log.read(0, 1 << 20, 0).read_bytes() == b""


def test_append_assigns_offsets_and_stamps_leader_epoch(open_log):
    log = open_log()
    first = log.append(make_batch([b"a", b"b", b"c"], timestamp=NOW), leader_epoch=7, now_ms=NOW)
    second = log.append(make_batch([b"d"], timestamp=NOW + 5), leader_epoch=7, now_ms=NOW)
    assert first == AppendInfo(0, 2, NOW, 2, -1)
    assert second == AppendInfo(3, 3, NOW + 5, 3, -1)
    assert log.log_end_offset == 4
    data = log.read(0, 1 << 20, log.log_end_offset).read_bytes()
    assert [(b, l, e) for b, l, e, _ in batch_headers(data)] == [(0, 2, 7), (3, 3, 7)]
    assert record_values(data) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    assert batch_crc_ok(data)  # patching offset and epoch keeps the CRC valid


def test_one_append_of_several_batches(open_log):
    log = open_log()
    records = make_batch([b"a", b"b"]) + make_batch([b"c"], timestamp=2_000) + make_batch([b"d"], timestamp=1_500)
    info = log.append(memoryview(records), leader_epoch=0, now_ms=NOW)
    assert (info.first_offset, info.last_offset, info.max_timestamp, info.offset_of_max_timestamp) == (0, 3, 2_000, 2)
    data = log.read(0, 1 << 20, 4).read_bytes()
    assert [h[:2] for h in batch_headers(data)] == [(0, 1), (2, 2), (3, 3)]


def test_bytearray_is_patched_in_place(open_log):
    log = open_log()
    log.append(make_batch([b"x"] * 5), 0, NOW)
    buf = bytearray(make_batch([b"y"]))
    log.append(buf, 3, NOW)
    assert batch_headers(bytes(buf))[0][:3] == (5, 5, 3)


def test_read_stops_before_max_offset(open_log):
    log = open_log()
    for i in range(5):
        log.append(make_batch([b"%d" % i, b"x"]), 0, NOW)  # batches [0,1] [2,3] ... [8,9]
    data = log.read(0, 1 << 20, 6).read_bytes()
    assert [h[0] for h in batch_headers(data)] == [0, 2, 4]
    assert log.read(6, 1 << 20, 6).size == 0
    assert log.read(10, 1 << 20, 10).size == 0  # at the log end: nothing, no error


def test_read_from_inside_a_batch_returns_the_whole_containing_batch(open_log):
    log = open_log()
    log.append(make_batch([b"a", b"b", b"c"]), 0, NOW)
    log.append(make_batch([b"d", b"e"]), 0, NOW)
    data = log.read(4, 1 << 20, 5).read_bytes()
    assert batch_headers(data)[0][:2] == (3, 4)
    data = log.read(1, 1 << 20, 5).read_bytes()
    assert [h[:2] for h in batch_headers(data)] == [(0, 2), (3, 4)]


def test_read_respects_max_bytes_with_whole_batches(open_log):
    log = open_log()
    sizes = [len(make_batch([b"v" * 100]))] * 10
    for _ in range(10):
        log.append(make_batch([b"v" * 100]), 0, NOW)
    fetched = log.read(0, sizes[0] * 3 + 10, 10)
    assert fetched.size == sizes[0] * 3
    assert [h[0] for h in batch_headers(fetched.read_bytes())] == [0, 1, 2]


def test_first_batch_larger_than_max_bytes_is_still_returned(open_log):
    log = open_log()
    log.append(make_batch([b"v" * 1000]), 0, NOW)
    log.append(make_batch([b"w"]), 0, NOW)
    data = log.read(0, 10, 2).read_bytes()
    assert [h[0] for h in batch_headers(data)] == [0]
    assert log.read(0, 10, 2, min_one_batch=False).size == 0


def test_read_many_batches_through_the_sparse_index(open_log):
    log = open_log(LogConfig(index_interval_bytes=256))
    for i in range(300):
        log.append(make_batch([b"%d" % i] * 3), 0, NOW)
    assert len(log.active_segment.offset_index) > 10
    for offset in (0, 1, 299, 450, 451, 452, 899):
        data = log.read(offset, 200, 900).read_bytes()
        base, last = batch_headers(data)[0][:2]
        assert base <= offset <= last
        assert base == offset // 3 * 3


def test_file_slices_are_sendfile_ready(open_log, tmp_path):
    import os
    log = open_log()
    log.append(make_batch([b"a"]), 0, NOW)
    fetched = log.read(0, 1 << 20, 1)
    (file, position, size), = fetched.file_slices
    out = tmp_path / "out"
    with open(out, "wb") as f:
        assert os.sendfile(f.fileno(), file.fileno(), position, size) == size
    assert out.read_bytes() == fetched.read_bytes()


def test_out_of_range_offsets(open_log):
    log = open_log()
    log.append(make_batch([b"a", b"b"]), 0, NOW)
    with pytest.raises(OffsetOutOfRange):
        log.read(3, 100, 2)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100, 2)
    log.delete_records_before(1)
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100, 2)
    assert batch_headers(log.read(1, 100, 2).read_bytes())[0][0] == 0  # the containing batch
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(3)


def test_append_as_follower_keeps_offsets_and_epochs(open_log):
    log = open_log()
    log.append_as_follower(make_batch([b"a", b"b"], base_offset=0, leader_epoch=4), NOW)
    log.append_as_follower(make_batch([b"c"], base_offset=2, leader_epoch=5), NOW)
    data = log.read(0, 1 << 20, 3).read_bytes()
    assert [(b, l, e) for b, l, e, _ in batch_headers(data)] == [(0, 1, 4), (2, 2, 5)]
    with pytest.raises(UnexpectedAppendOffset):
        log.append_as_follower(make_batch([b"d"], base_offset=7), NOW)
    bad = bytearray(make_batch([b"d"], base_offset=3))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecord):
        log.append_as_follower(bad, NOW)
    assert log.log_end_offset == 3


def test_malformed_append_is_rejected_and_changes_nothing(open_log):
    log = open_log()
    with pytest.raises(CorruptRecord):
        log.append(make_batch([b"a"])[:-3], 0, NOW)
    with pytest.raises(CorruptRecord):
        log.append(b"", 0, NOW)
    assert log.log_end_offset == 0 and log.active_segment.size == 0
