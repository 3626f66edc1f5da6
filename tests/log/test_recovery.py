"""Crash recovery: reopen without a clean shutdown after the tail of the log was torn or damaged."""

import os

import pytest

from weir.log import LogConfig

from .batches import batch_headers, make_batch, record_values
from .conftest import NOW

BATCH = len(make_batch([b"000" + b"v" * 97, b"second"]))


def fill(log, start, count):
    for i in range(start, start + count):
        log.append(make_batch([b"%03d" % i + b"v" * 97, b"second"]), 0, NOW)  # 2 offsets per batch


def crash(log):
    """Drop the log without flushing or closing properly (the page cache survives, as after a
    process crash); damage is then done to the files directly."""
    for segment in log.segments:
        segment.close()
    log._closed = True


def last_log_file(log_dir):
    return sorted(log_dir.glob("*.log"))[-1]


def assert_intact_prefix(log, batches):
    assert log.log_end_offset == 2 * batches
    data = log.read(0, 1 << 30, log.log_end_offset).read_bytes()
    assert [h[0] for h in batch_headers(data)] == list(range(0, 2 * batches, 2))
    assert [v[:3] for o, v in record_values(data) if o % 2 == 0] == [b"%03d" % i for i in range(batches)]


def reopen_and_check_appends_continue(open_log, config, batches):
    log = open_log(config)
    assert_intact_prefix(log, batches)
    info = log.append(make_batch([b"after"]), 1, NOW)
    assert info.first_offset == 2 * batches
    return log


@pytest.mark.parametrize("config", [LogConfig(), LogConfig(segment_bytes=BATCH * 4 + 50, index_interval_bytes=100)])
def test_file_cut_mid_batch(open_log, log_dir, config):
    log = open_log(config)
    fill(log, 0, 10)
    crash(log)
    path = last_log_file(log_dir)
    os.truncate(path, path.stat().st_size - 7)
    log = reopen_and_check_appends_continue(open_log, config, 9)
    assert path.stat().st_size == log.active_segment.size


def test_file_cut_inside_a_batch_header(open_log, log_dir):
    log = open_log()
    fill(log, 0, 3)
    crash(log)
    os.truncate(last_log_file(log_dir), 2 * BATCH + 20)
    reopen_and_check_appends_continue(open_log, LogConfig(), 2)


def test_flipped_byte_in_the_last_batch_fails_its_crc(open_log, log_dir):
    log = open_log()
    fill(log, 0, 5)
    crash(log)
    path = last_log_file(log_dir)
    data = bytearray(path.read_bytes())
    data[-10] ^= 0x01
    path.write_bytes(bytes(data))
    reopen_and_check_appends_continue(open_log, LogConfig(), 4)


@pytest.mark.parametrize("garbage", [b"\x00" * 100, b"\xad\x90c", bytes(range(256)) * 4])
def test_garbage_after_the_last_batch(open_log, log_dir, garbage):
    log = open_log()
    fill(log, 0, 5)
    crash(log)
    with open(last_log_file(log_dir), "ab") as f:
        f.write(garbage)
    reopen_and_check_appends_continue(open_log, LogConfig(), 5)


def test_a_replayed_batch_with_the_wrong_offset_is_cut(open_log, log_dir):
    log = open_log()
    fill(log, 0, 3)
    first = log.read(0, 1, 2).read_bytes()
    crash(log)
    with open(last_log_file(log_dir), "ab") as f:
        f.write(first)  # valid CRC, but offset 0 where 6 is expected
    reopen_and_check_appends_continue(open_log, LogConfig(), 3)


def test_damage_in_an_earlier_segment_drops_every_later_segment(open_log, log_dir):
    config = LogConfig(segment_bytes=BATCH * 2)
    log = open_log(config)
    fill(log, 0, 6)  # segments at 0, 4, 8
    crash(log)
    middle = log_dir / "00000000000000000004.log"
    data = bytearray(middle.read_bytes())
    data[BATCH + 70] ^= 0xFF  # second batch of the middle segment
    middle.write_bytes(bytes(data))
    log = reopen_and_check_appends_continue(open_log, config, 3)
    assert not (log_dir / "00000000000000000008.log").exists()
    assert [s.base_offset for s in log.segments] == [0, 4]


def test_only_segments_from_the_recovery_point_on_are_checked(open_log, log_dir):
    config = LogConfig(segment_bytes=BATCH * 2)
    log = open_log(config)
    fill(log, 0, 6)  # segments at 0, 4, 8
    crash(log)
    first = log_dir / "00000000000000000000.log"
    data = bytearray(first.read_bytes())
    data[80] ^= 0xFF  # a record byte: a CRC check would cut here
    first.write_bytes(bytes(data))
    with open(log_dir / "00000000000000000008.log", "ab") as f:
        f.write(b"torn")
    log = open_log(config, recovery_point=8)
    assert log.log_end_offset == 12  # segment 0 trusted as flushed; the torn tail was cut
    assert log.read(0, 1, 12).size == BATCH
    assert log.recovery_point == 12


def test_lost_or_damaged_index_files_are_rebuilt(open_log, log_dir):
    config = LogConfig(index_interval_bytes=BATCH)
    log = open_log(config)
    fill(log, 0, 40)
    entries = len(log.active_segment.offset_index)
    crash(log)
    (log_dir / "00000000000000000000.index").write_bytes(b"\x7f" * 13)
    (log_dir / "00000000000000000000.timeindex").unlink()
    log = open_log(config)
    assert len(log.active_segment.offset_index) == entries
    assert log.offset_for_timestamp(1_000) == (0, 1_000)
    for offset in (0, 33, 79):
        assert batch_headers(log.read(offset, 1, 80).read_bytes())[0][0] == offset // 2 * 2


def test_damaged_index_of_a_trusted_segment_is_rebuilt_after_clean_shutdown(open_log, log_dir):
    config = LogConfig(index_interval_bytes=BATCH)
    log = open_log(config)
    fill(log, 0, 40)
    log.close()
    (log_dir / "00000000000000000000.index").write_bytes(b"\x00\x00\x00\x05\x7f\x00\x00\x00")
    log = open_log(config, clean_shutdown=True)
    assert_intact_prefix(log, 40)


def test_index_entries_are_on_disk_once_their_segment_is_sealed_or_flushed(open_log, log_dir):
    """An append writes no index entry (as Kafka's memory-mapped indexes, they are written out
    later); sealing a segment writes its entries, and so does a flush, before the recovery point
    moves past them: what a restart trusts without recovering is whole on disk."""
    config = LogConfig(segment_bytes=BATCH * 10, index_interval_bytes=BATCH)
    log = open_log(config)
    fill(log, 0, 15)  # segments at 0 (sealed) and 20
    sealed, active = log.segments

    def on_disk(segment):
        return segment.offset_index.path.stat().st_size // 8, segment.time_index.path.stat().st_size // 12

    assert on_disk(sealed) == (len(sealed.offset_index), len(sealed.time_index)) and len(sealed.offset_index) > 0
    assert on_disk(active) == (0, 0) < (len(active.offset_index), len(active.time_index))
    log.flush()
    assert on_disk(active) == (len(active.offset_index), len(active.time_index))
    for segment in (sealed, active):  # what the files hold is what memory served
        offsets, times = (type(index)(index.path, index.base_offset, index.max_entries)
                          for index in (segment.offset_index, segment.time_index))
        offsets.load()
        times.load()
        assert all(offsets.position_at_or_before_offset(o) == segment.offset_index.position_at_or_before_offset(o)
                   for o in range(segment.base_offset, segment.next_offset))
        assert all(times.offset_before(t) == segment.time_index.offset_before(t) for t in (0, NOW, NOW + 1))
    fill(log, 15, 3)  # entries after the flush: lost with the crash, rebuilt at the open
    entries = len(active.offset_index)
    assert on_disk(active)[0] < entries
    crash(log)
    log = open_log(config, recovery_point=30)
    assert_intact_prefix(log, 18)
    assert len(log.segments[1].offset_index) == entries
    for offset in (0, 21, 29, 35):
        assert batch_headers(log.read(offset, 1, 36).read_bytes())[0][0] == offset // 2 * 2


def test_an_index_write_that_fails_part_way_leaves_whole_entries(open_log, log_dir, monkeypatch):
    """A flush whose index write stops part way (a full disk) raises, and leaves the file whole
    entries only: the next flush's entries must not land after a torn one."""
    config = LogConfig(index_interval_bytes=BATCH)
    log = open_log(config)
    fill(log, 0, 10)
    index = log.active_segment.offset_index
    real_write = os.write

    def torn(fd, data):
        real_write(fd, bytes(data)[:5])
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "write", torn)
    with pytest.raises(OSError):
        log.flush()
    monkeypatch.setattr(os, "write", real_write)
    assert index.path.stat().st_size == 0
    log.flush()
    assert index.path.stat().st_size == 8 * len(index) > 0
    log.close()
    log = open_log(config, clean_shutdown=True)
    assert_intact_prefix(log, 10)


def test_recovering_an_empty_or_fully_torn_log(open_log, log_dir):
    log = open_log()
    fill(log, 0, 1)
    crash(log)
    os.truncate(last_log_file(log_dir), 30)
    log = open_log()
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.append(make_batch([b"a"]), 0, NOW).first_offset == 0


def test_flush_interval_messages_advances_the_recovery_point(open_log):
    log = open_log(LogConfig(flush_interval_messages=4))
    fill(log, 0, 1)
    assert log.recovery_point == 0
    fill(log, 1, 1)
    assert log.recovery_point == 4


def test_flush_if_due_by_time(open_log):
    log = open_log(LogConfig(flush_interval_ms=1000))
    fill(log, 0, 1)
    log.flush_if_due(NOW + 999)
    assert log.recovery_point == 0
    log.flush_if_due(NOW + 1000)
    assert log.recovery_point == 2


@pytest.mark.parametrize("garbage", [b"\xff" * 120, b"\x00\x00\x00\x05\xff\xff\xff\xf0" * 3,
                                     b"\x00\x00\x00\x09\x00\x00\x02\x00\x00\x00\x00\x03\x00\x00\x01\x00"])
def test_an_index_full_of_garbage_in_a_trusted_segment_is_rebuilt(open_log, log_dir, garbage):
    """A clean shutdown trusts the segments, but an index whose positions are negative or
    descend must not be read from: it is rebuilt (Kafka's LogLoader recovers a segment whose
    index fails its sanity check). Before, the tail scan started at position -1: OSError at every
    start."""
    config = LogConfig(segment_bytes=BATCH * 10, index_interval_bytes=BATCH)
    log = open_log(config)
    fill(log, 0, 25)  # segments at 0, 20, 40
    entries = len(log.segments[0].offset_index)
    log.close()
    (log_dir / "00000000000000000000.index").write_bytes(garbage)
    log = open_log(config, clean_shutdown=True)
    assert_intact_prefix(log, 25)
    assert len(log.segments[0].offset_index) == entries > 0  # rebuilt
    for offset in (0, 13, 19, 49):
        assert batch_headers(log.read(offset, 1, 50).read_bytes())[0][0] == offset // 2 * 2


@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_flushed_segments_after_a_hole_are_set_aside_not_deleted(open_log, log_dir, clean_shutdown, caplog):
    """A flushed middle segment emptied (or removed) leaves a hole Weir's contiguous log cannot
    serve across. The segments after it were flushed and acknowledged: Kafka keeps them (its
    LogLoader deletes only segments from the recovery point on); Weir moves them out of the log
    into a set-aside directory and says so. Before, they were deleted, without a word."""
    config = LogConfig(segment_bytes=BATCH * 2)
    log = open_log(config)
    fill(log, 0, 6)  # segments at 0, 4, 8, each of two batches
    log.close()
    kept = {name: (log_dir / name).read_bytes() for name in ("00000000000000000008.log", "00000000000000000008.index")}
    os.truncate(log_dir / "00000000000000000004.log", 0)
    log = open_log(config, clean_shutdown=clean_shutdown, recovery_point=None if clean_shutdown else 12)
    assert [s.base_offset for s in log.segments] == [0, 4] and log.log_end_offset == 4
    assert not (log_dir / "00000000000000000008.log").exists()
    [aside] = log_dir.glob("set-aside-*")
    assert {name: (aside / name).read_bytes() for name in kept} == kept
    assert "segments at 8 hold flushed data" in caplog.text and "set-aside" in caplog.text
    assert log.append(make_batch([b"after"]), 1, NOW).first_offset == 4
    log.close()
    log = open_log(config, clean_shutdown=True)
    assert log.log_end_offset == 5 and aside.is_dir()


def test_segments_after_a_torn_unflushed_segment_are_still_deleted(open_log, log_dir):
    """Above the recovery point a cut segment's successors are deleted, as Kafka's recoverLog does."""
    config = LogConfig(segment_bytes=BATCH * 2)
    log = open_log(config)
    fill(log, 0, 6)
    crash(log)
    os.truncate(log_dir / "00000000000000000004.log", BATCH + 10)
    log = open_log(config, recovery_point=4)
    assert log.log_end_offset == 6 and not (log_dir / "00000000000000000008.log").exists()
    assert not list(log_dir.glob("set-aside-*"))
