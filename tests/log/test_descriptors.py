"""Issue 41: a log holds about one descriptor however many segments it has (its active segment's
`.log`); its closed segments' files come and go through one bounded cache, and reading them after
the cache dropped them still returns the right records. Counted in /proc/self/fd."""

import os
import uuid

import pytest

from weir.log import LogConfig, LogDirectory, PartitionLog, SegmentFileCache

from .batches import make_batch, record_values
from .conftest import NOW
from .descriptor_limits import descriptors_left, open_descriptors
from .test_recovery import crash

CACHED = 4  # the cache's limit in these tests
BATCH = len(make_batch([b"value 000"]))
TWO_BATCHES = LogConfig(segment_bytes=2 * BATCH, retention_ms=-1)


def value(offset: int) -> bytes:
    return b"value %03d" % offset


def fill(log, start: int, count: int, now_ms: int = NOW) -> None:
    for offset in range(start, start + count):
        log.append(make_batch([value(offset)], timestamp=now_ms), 0, now_ms)


def every_record(log, start: int = 0) -> list[tuple[int, bytes]]:
    """Each record from `start`, read one fetch at a time from its batch on (every segment's
    file asked for again, in order, through the cache)."""
    out = []
    for offset in range(start, log.log_end_offset):
        out += record_values(log.read(offset, 1, log.log_end_offset).read_bytes())[:1]
    return out


def expected(start: int, end: int) -> list[tuple[int, bytes]]:
    return [(offset, value(offset)) for offset in range(start, end)]


@pytest.fixture
def files():
    return SegmentFileCache(CACHED)


def test_a_log_of_many_segments_holds_its_active_file_and_at_most_the_cache(tmp_path, files):
    before = open_descriptors()
    log = PartitionLog.open(tmp_path / "t-0", TWO_BATCHES, NOW, files=files)
    fill(log, 0, 200)
    assert len(log.segments) == 100
    assert open_descriptors() - before <= 1 + CACHED
    assert every_record(log) == expected(0, 200)  # every closed segment read again, long after it was dropped
    assert len(files) == CACHED and open_descriptors() - before <= 1 + CACHED
    log.close()
    assert len(files) == 0 and open_descriptors() == before


def test_logs_of_a_directory_share_one_cache(tmp_path, files):
    before = open_descriptors()
    directory = LogDirectory(tmp_path, TWO_BATCHES, files=files)
    logs = [directory.open_partition("t", p, uuid.uuid4(), None, NOW) for p in range(20)]
    for log in logs:
        fill(log, 0, 10)
    assert open_descriptors() - before <= len(logs) + CACHED
    assert all(every_record(log) == expected(0, 10) for log in logs)
    directory.close()
    assert open_descriptors() == before
    reopened = LogDirectory.open(tmp_path, TWO_BATCHES, NOW, files=files)  # every log opened, each segment read
    assert open_descriptors() - before <= len(logs) + CACHED
    assert all(every_record(log) == expected(0, 10) for log in reopened.logs.values())
    reopened.close()


def test_a_fetch_keeps_reading_a_file_the_cache_dropped(tmp_path, files):
    log = PartitionLog.open(tmp_path / "t-0", TWO_BATCHES, NOW, files=files)
    fill(log, 0, 40)
    fetched = log.read(0, 1 << 20, 2)  # the first segment
    data = fetched.read_bytes()
    assert every_record(log, 2) == expected(2, 40)  # the cache has dropped the first segment's file since
    assert fetched.read_bytes() == data
    (file, position, size), = fetched.file_slices
    assert os.pread(file, size, position) == data
    log.close()


def test_recovery_after_a_crash_opens_every_segment_through_the_cache(tmp_path, files):
    before = open_descriptors()
    log = PartitionLog.open(tmp_path / "t-0", TWO_BATCHES, NOW, files=files)
    fill(log, 0, 60)
    crash(log)
    assert open_descriptors() == before
    log = PartitionLog.open(tmp_path / "t-0", TWO_BATCHES, NOW, files=files)  # no recovery point: all recovered
    assert log.log_end_offset == 60 and open_descriptors() - before <= 1 + CACHED
    assert every_record(log) == expected(0, 60)
    fill(log, 60, 4)
    assert every_record(log, 58) == expected(58, 64)
    log.close()


def test_truncation_into_a_closed_segment_makes_it_active_again(tmp_path, files):
    before = open_descriptors()
    log = PartitionLog.open(tmp_path / "t-0", TWO_BATCHES, NOW, files=files)
    fill(log, 0, 60)
    log.truncate_to(21)  # inside segment 20-21, long dropped by the cache
    assert log.log_end_offset == 21 and log.active_segment.base_offset == 20
    fill(log, 21, 5)
    assert every_record(log) == expected(0, 26)
    assert open_descriptors() - before <= 1 + CACHED
    log.close()
    assert PartitionLog.open(tmp_path / "t-0", TWO_BATCHES, NOW, files=files, clean_shutdown=True).log_end_offset == 26


def test_retention_deletes_segments_whose_files_the_cache_held(tmp_path, files):
    before = open_descriptors()
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=2 * BATCH, retention_bytes=10 * BATCH,
                                                        file_delete_delay_ms=0), NOW, files=files)
    fill(log, 0, 60)
    assert every_record(log, 50) == expected(50, 60)  # the cache holds the newest closed segments' files
    assert log.enforce_retention(NOW) == 25
    assert log.log_start_offset == 50 and len(files) <= CACHED
    assert every_record(log, 50) == expected(50, 60)
    assert open_descriptors() - before <= 1 + CACHED
    log.close()
    assert open_descriptors() == before


def test_with_no_descriptor_to_spare_reads_and_appends_go_on_and_a_roll_fails_whole(tmp_path, files):
    """Out of descriptors (EMFILE), the cache closes the file it read least recently to open the
    one a read needs, so fetches from old segments go on; so do appends to the active segment. A
    roll, which needs new files, fails and leaves the log as it was."""
    log = PartitionLog.open(tmp_path / "t-0", TWO_BATCHES, NOW, files=files)
    fill(log, 0, 39)  # the active segment holds offset 38, with room for one more batch
    assert every_record(log, 29) == expected(29, 39)  # the cache is full
    with descriptors_left(0):
        assert every_record(log) == expected(0, 39)
        fill(log, 39, 1)
        with pytest.raises(OSError):
            fill(log, 40, 1)  # the active segment is full: a new one cannot be made
        assert log.log_end_offset == 40 and log.active_segment.base_offset == 38
    fill(log, 40, 1)
    assert every_record(log) == expected(0, 41)
    log.close()
