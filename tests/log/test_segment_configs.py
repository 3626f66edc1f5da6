"""Topic configs the log applies itself: segment.jitter.ms (each active segment rolls up to that
much before segment.ms) and file.delete.delay.ms (removed segments wait on disk as *.deleted)."""

import random

from weir.log import LogConfig

from .batches import make_batch
from .conftest import NOW

HOUR = 3_600_000


def append_at(log, timestamp):
    log.append(make_batch([b"v" * 100], timestamp=timestamp), 0, timestamp)


class Draws(random.Random):
    """A random source whose draws are known: each randrange(n) answers the next given value."""

    def __init__(self, *values):
        super().__init__(0)
        self.values, self.bounds = list(values), []

    def randrange(self, n):
        self.bounds.append(n)
        return self.values.pop(0)


def test_each_active_segment_rolls_its_jitter_before_segment_ms(open_log):
    draws = Draws(HOUR, 0)  # the first active segment rolls an hour early, the next one on time
    log = open_log(LogConfig(segment_ms=10 * HOUR, segment_jitter_ms=2 * HOUR), rng=draws)
    append_at(log, NOW)
    append_at(log, NOW + 9 * HOUR)
    assert len(log.segments) == 1
    append_at(log, NOW + 9 * HOUR + 1)  # older than segment.ms less its jitter
    assert [s.base_offset for s in log.segments] == [0, 2]
    append_at(log, NOW + 18 * HOUR + 1)
    assert len(log.segments) == 2, "the new segment drew no jitter"
    assert draws.bounds == [2 * HOUR, 2 * HOUR]


def test_the_jitter_is_never_more_than_segment_ms(open_log):
    draws = Draws(5)
    open_log(LogConfig(segment_ms=10, segment_jitter_ms=HOUR), rng=draws)
    assert draws.bounds == [10]


def test_no_jitter_draws_nothing(open_log):
    draws = Draws()
    log = open_log(LogConfig(segment_ms=10 * HOUR), rng=draws)
    append_at(log, NOW)
    append_at(log, NOW + 10 * HOUR + 1)
    assert len(log.segments) == 2 and draws.bounds == []


def test_retention_leaves_removed_segments_as_deleted_files_for_the_delay(open_log, log_dir):
    log = open_log(LogConfig(segment_bytes=200, retention_ms=HOUR, file_delete_delay_ms=60_000))
    for _ in range(4):
        append_at(log, NOW)  # [0] [1] [2] [3]
    assert log.enforce_retention(NOW + HOUR + 1) == 4
    retired = sorted(p.name for p in log_dir.glob("*.deleted"))
    assert retired == sorted(f"{base:020d}.{kind}.deleted" for base in range(4) for kind in ("log", "index", "timeindex"))
    assert [p.name for p in log_dir.glob("*.log")] == ["00000000000000000004.log"]

    assert log.delete_due_files(NOW + HOUR + 60_000) == 0
    assert log.delete_due_files(NOW + HOUR + 60_001) == 12
    assert not list(log_dir.glob("*.deleted"))


def test_delete_records_counts_the_delay_from_the_next_timer(open_log, log_dir):
    log = open_log(LogConfig(segment_bytes=200, file_delete_delay_ms=60_000))
    for _ in range(3):
        append_at(log, NOW)
    log.delete_records_before(2)  # DeleteRecords knows no time
    assert len(list(log_dir.glob("*.log.deleted"))) == 2
    assert log.delete_due_files(NOW) == 0  # the delay starts here
    assert log.delete_due_files(NOW + 59_999) == 0
    assert log.delete_due_files(NOW + 60_000) == 6


def test_a_restart_removes_deleted_files_left_behind(open_log, log_dir):
    log = open_log(LogConfig(segment_bytes=200, retention_ms=HOUR))
    for _ in range(3):
        append_at(log, NOW)
    log.enforce_retention(NOW + HOUR + 1)
    assert list(log_dir.glob("*.deleted"))
    log.close()
    reopened = open_log(LogConfig(segment_bytes=200, retention_ms=HOUR))
    assert not list(log_dir.glob("*.deleted")) and reopened.log_start_offset == 3


def test_no_delay_deletes_at_once(open_log, log_dir):
    log = open_log(LogConfig(segment_bytes=200, retention_ms=HOUR, file_delete_delay_ms=0))
    for _ in range(3):
        append_at(log, NOW)
    log.enforce_retention(NOW + HOUR + 1)
    assert not list(log_dir.glob("*.deleted")) and [p.name for p in log_dir.glob("*.log")] == [
        "00000000000000000003.log"]
