import pytest

from weir.log import LogConfig, RecordBatchTooLarge

from .batches import batch_headers, make_batch, record_values
from .conftest import NOW

BATCH = len(make_batch([b"v" * 100]))
HOUR = 3_600_000


def fill(log, count, now_ms=NOW, timestamp=NOW, epoch=0):
    for i in range(count):
        log.append(make_batch([b"%03d" % i + b"v" * 97], timestamp=timestamp), epoch, now_ms)


def test_rolls_a_new_segment_when_the_active_one_would_overflow(open_log, log_dir):
    log = open_log(LogConfig(segment_bytes=BATCH * 3))
    fill(log, 7)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert sorted(p.name for p in log_dir.glob("*.log")) == [
        "00000000000000000000.log", "00000000000000000003.log", "00000000000000000006.log"]
    assert all(s.size <= BATCH * 3 for s in log.segments)


def test_reads_cross_segments_at_batch_boundaries(open_log):
    log = open_log(LogConfig(segment_bytes=BATCH * 3))
    fill(log, 7)
    data = log.read(2, 1 << 20, 7).read_bytes()
    assert [h[0] for h in batch_headers(data)] == [2, 3, 4, 5, 6]
    assert [v[:3] for _, v in record_values(data)] == [b"002", b"003", b"004", b"005", b"006"]
    assert len(log.read(3, 1 << 20, 5).file_slices) == 1
    assert [h[0] for h in batch_headers(log.read(1, BATCH * 3, 7).read_bytes())] == [1, 2, 3]


def test_rolls_by_time(open_log):
    log = open_log(LogConfig(segment_ms=1000))
    log.append(make_batch([b"a"], timestamp=NOW), 0, NOW)
    log.append(make_batch([b"b"], timestamp=NOW + 500), 0, NOW + 500)
    log.append(make_batch([b"c"], timestamp=NOW + 1001), 0, NOW + 1001)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_records_stamped_long_ago_do_not_roll_a_segment_per_append(open_log):
    """log.roll.ms counts in the records' time, as Kafka's: a producer replaying old records
    (CreateTime, hours before the clock) fills one segment, not one segment (three files) per append."""
    log = open_log(LogConfig(segment_ms=HOUR))
    fill(log, 20, now_ms=NOW + 10 * HOUR, timestamp=NOW)
    assert len(log.segments) == 1


def test_rolls_by_the_records_time_even_when_the_clock_has_not_moved(open_log):
    log = open_log(LogConfig(segment_ms=1000))
    log.append(make_batch([b"a"], timestamp=NOW), 0, NOW)
    log.append(make_batch([b"b"], timestamp=NOW + 1001), 0, NOW)
    assert [s.base_offset for s in log.segments] == [0, 1]


def test_a_segment_whose_first_batch_has_no_timestamp_rolls_by_the_clock(open_log):
    log = open_log(LogConfig(segment_ms=1000))
    for offset, now_ms in enumerate((NOW, NOW + 500, NOW + 1001)):
        log.append(make_batch([b"%d" % offset], timestamp=-1), 0, now_ms)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_rolls_when_the_index_is_full(open_log):
    log = open_log(LogConfig(index_interval_bytes=0, segment_index_bytes=48))  # 6 offset / 4 time entries
    fill(log, 12)
    assert len(log.segments) > 1
    assert [h[0] for h in batch_headers(log.read(0, 1 << 20, 12).read_bytes())] == list(range(12))


def test_an_append_larger_than_a_segment_is_refused(open_log):
    log = open_log(LogConfig(segment_bytes=BATCH))
    with pytest.raises(RecordBatchTooLarge):
        log.append(make_batch([b"v" * 200]), 0, NOW)
    log.append(make_batch([b"v" * 100]), 0, NOW)  # exactly one segment's worth is fine
    assert log.log_end_offset == 1


def test_reopen_after_close_keeps_everything_and_offsets_continue(open_log):
    config = LogConfig(segment_bytes=BATCH * 3, index_interval_bytes=BATCH)
    log = open_log(config)
    fill(log, 8)
    log.delete_records_before(1)
    before = log.read(1, 1 << 20, 8).read_bytes()
    log.close()

    log = open_log(config, log_start_offset=1, clean_shutdown=True)
    assert (log.log_start_offset, log.log_end_offset) == (1, 8)
    assert log.read(1, 1 << 20, 8).read_bytes() == before
    assert log.append(make_batch([b"next"]), 1, NOW).first_offset == 8
    assert [h[0] for h in batch_headers(log.read(6, 1 << 20, 9).read_bytes())] == [6, 7, 8]
    assert log.offset_for_timestamp(NOW) == (1, NOW)


def test_reopen_rebuilds_nothing_after_clean_close_and_indexes_still_work(open_log):
    config = LogConfig(index_interval_bytes=BATCH)
    log = open_log(config)
    fill(log, 50)
    entries = len(log.active_segment.offset_index)
    log.close()
    log = open_log(config, recovery_point=50, clean_shutdown=True)
    assert len(log.active_segment.offset_index) == entries > 0
    assert log.active_segment.max_timestamp == NOW
    for offset in (0, 17, 49):
        assert batch_headers(log.read(offset, 1, 50).read_bytes())[0][0] == offset


def test_the_recent_batches_find_what_a_scan_of_the_file_finds(open_log):
    """A segment answers reads at its tail from the batches it last appended; through appends of
    several batches at once, a truncation and further appends, each answer is the file's."""
    log = open_log(LogConfig(segment_bytes=1 << 20))
    segment = log.active_segment
    segment.recent.KEEP = 4  # trimmed often
    fill(log, 5)
    log.append(make_batch([b"a"]) + make_batch([b"b", b"c"]) + make_batch([b"d"]), 0, NOW)
    fill(log, 9)
    log.truncate_to(12)
    fill(log, 3)

    def scanned(offset):
        recent, segment.recent = segment.recent, type(segment.recent)()
        try:
            return segment.find_batch(offset)
        finally:
            segment.recent = recent

    assert segment.recent.find(log.log_end_offset - 1) is not None
    for offset in range(log.log_end_offset + 1):
        assert segment.find_batch(offset) == scanned(offset), offset
