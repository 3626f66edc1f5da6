import pytest

from weir.log import LogConfig, OffsetOutOfRange

from .batches import batch_headers, make_batch
from .conftest import NOW

BATCH = len(make_batch([b"v" * 100]))
DAY = 86_400_000


def append_at(log, timestamp, count=1):
    for _ in range(count):
        log.append(make_batch([b"v" * 100], timestamp=timestamp), 0, timestamp)


def test_retention_by_time_deletes_whole_expired_segments(open_log, log_dir):
    log = open_log(LogConfig(segment_bytes=BATCH * 2, retention_ms=DAY))
    append_at(log, NOW, 4)           # segments [0,1] [2,3]
    append_at(log, NOW + DAY, 2)     # segment [4,5]
    append_at(log, NOW + DAY + 10, 1)  # active [6]
    assert log.enforce_retention(NOW + DAY) == 0  # nothing older than a day yet
    assert log.enforce_retention(NOW + DAY + 1) == 2
    assert [s.base_offset for s in log.segments] == [4, 6]
    assert log.log_start_offset == 4
    assert not (log_dir / "00000000000000000000.log").exists()
    with pytest.raises(OffsetOutOfRange):
        log.read(3, 100, 7)
    assert [h[0] for h in batch_headers(log.read(4, 1 << 20, 7).read_bytes())] == [4, 5, 6]


def test_retention_by_time_stops_at_the_first_segment_to_keep(open_log):
    log = open_log(LogConfig(segment_bytes=BATCH * 2, retention_ms=DAY))
    append_at(log, NOW + DAY, 2)  # a newer segment first (client timestamps are not ordered)
    append_at(log, NOW, 2)
    append_at(log, NOW + 2 * DAY, 1)
    assert log.enforce_retention(NOW + DAY + 10) == 0
    assert log.log_start_offset == 0


def test_an_expired_active_segment_is_rolled_then_deleted(open_log):
    log = open_log(LogConfig(retention_ms=DAY))
    append_at(log, NOW, 3)
    assert log.enforce_retention(NOW + 2 * DAY) == 1
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)
    assert [s.base_offset for s in log.segments] == [3]
    assert log.append(make_batch([b"x"], timestamp=NOW + 2 * DAY), 0, NOW + 2 * DAY).first_offset == 3
    assert log.enforce_retention(NOW + 2 * DAY) == 0


def test_retention_never_deletes_above_the_high_watermark(open_log):
    log = open_log(LogConfig(segment_bytes=BATCH * 2, retention_ms=DAY))
    append_at(log, NOW, 6)  # [0,1] [2,3] [4,5]
    assert log.enforce_retention(NOW + 2 * DAY, high_watermark=3) == 1
    assert log.log_start_offset == 2


def test_retention_by_size_keeps_the_newest_segments_within_the_limit(open_log):
    log = open_log(LogConfig(segment_bytes=BATCH * 2, retention_bytes=BATCH * 3, retention_ms=-1))
    append_at(log, NOW, 7)  # [0,1] [2,3] [4,5] [6]: 7 batches, limit 3
    assert log.enforce_retention(NOW) == 2
    assert [s.base_offset for s in log.segments] == [4, 6]
    assert log.size_in_bytes() <= BATCH * 3
    assert log.log_start_offset == 4
    assert log.enforce_retention(NOW) == 0


def test_unlimited_retention_deletes_nothing(open_log):
    log = open_log(LogConfig(segment_bytes=BATCH * 2, retention_ms=-1, retention_bytes=-1))
    append_at(log, 0, 9)
    assert log.enforce_retention(NOW + 1000 * DAY) == 0
    assert log.log_start_offset == 0


def test_delete_records_advances_the_start_and_drops_segments_below_it(open_log):
    log = open_log(LogConfig(segment_bytes=BATCH * 2))
    append_at(log, NOW, 6)
    log.delete_records_before(3)
    assert log.log_start_offset == 3
    assert [s.base_offset for s in log.segments] == [2, 4]
    log.delete_records_before(1)  # never backwards
    assert log.log_start_offset == 3
    log.delete_records_before(6)  # everything: the active segment stays until retention rolls it
    assert log.log_start_offset == 6 and log.read(6, 100, 6).size == 0
    assert log.enforce_retention(NOW) == 1
    assert [s.base_offset for s in log.segments] == [6]


def test_a_fetch_in_flight_keeps_reading_a_segment_retention_deleted(open_log):
    import os
    log = open_log(LogConfig(segment_bytes=BATCH * 2, retention_ms=DAY))
    append_at(log, NOW, 3)
    fetched = log.read(0, 1 << 20, 2)
    (file, position, size), = fetched.file_slices
    assert isinstance(file, int)  # usable as a descriptor as is
    expected = fetched.read_bytes()
    assert log.enforce_retention(NOW + 2 * DAY) == 2
    assert os.pread(file, size, position) == expected
    del fetched, file
