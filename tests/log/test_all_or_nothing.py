"""A failed append leaves the log as it was, and recovery always starts.

The regression behind these: a batch whose header carried max timestamp -1 made the time-index
step of an append fail after the batch was already in the segment file, so the partition refused
every later append ("offsets must be contiguous") and recovery failed the same way at start-up.
Disk failures are injected at each step after the segment write (an index write, the epoch file),
as a full disk would make them fail.
"""

import errno
import logging

import pytest

import weir.log.segment as segment_module
from weir.log import LogConfig
from weir.log.offset_index import OffsetIndex
from weir.log.time_index import TimeIndex

from .batches import batch_headers, encode_record, make_batch, patched, raw_batch
from .conftest import NOW
from .test_recovery import crash

SMALL_INDEX_INTERVAL = LogConfig(index_interval_bytes=1)  # an index entry for every batch


def state(log):
    segment = log.active_segment
    return (log.log_end_offset, segment.size, segment.next_offset, segment.max_timestamp,
            segment.offset_of_max_timestamp, segment.bytes_since_index_entry, len(segment.offset_index),
            len(segment.time_index), log.leader_epochs.entries, segment.log_path.stat().st_size,
            segment.offset_index.path.stat().st_size, segment.time_index.path.stat().st_size)


def test_batches_without_timestamps_append_and_recover(open_log):
    log = open_log(SMALL_INDEX_INTERVAL)
    for i in range(3):
        log.append(patched(make_batch([b"v%d" % i], timestamp=-1), max_timestamp=-1), 0, NOW)
    assert log.log_end_offset == 3
    crash(log)
    log = open_log(SMALL_INDEX_INTERVAL)  # recovery of every segment
    assert log.log_end_offset == 3
    assert log.append(make_batch([b"after"], timestamp=NOW), 0, NOW).first_offset == 3


def test_recovery_takes_the_max_timestamp_from_the_records_of_a_batch_that_lacks_it(open_log):
    """Batches written before the validator may carry -1: retention must still see their time."""
    log = open_log()
    log.append(patched(make_batch([b"a", b"b"], timestamps=[500, 900]), max_timestamp=-1), 0, NOW)
    crash(log)
    log = open_log()
    assert log.active_segment.max_timestamp == 900


class DiskFull(OSError):
    def __init__(self):
        super().__init__(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("failing", [(OffsetIndex, "commit"), (TimeIndex, "commit")])
def test_a_failed_index_write_cuts_the_segment_back(open_log, monkeypatch, failing):
    log = open_log(SMALL_INDEX_INTERVAL)
    for i in range(3):
        log.append(make_batch([b"before %d" % i], timestamp=NOW + i), 0, NOW)
    before = state(log)
    cls, method = failing

    def fail(self, entries):
        if entries:
            raise DiskFull()
    monkeypatch.setattr(cls, method, fail)
    with pytest.raises(DiskFull):
        log.append(make_batch([b"lost"], timestamp=NOW + 10), 5, NOW)
    assert state(log) == before
    monkeypatch.undo()
    assert log.append(make_batch([b"after"], timestamp=NOW + 11), 5, NOW).first_offset == 3
    data = log.read(0, 1 << 20, log.log_end_offset).read_bytes()
    assert [h[0] for h in batch_headers(data)] == [0, 1, 2, 3]
    assert log.end_offset_for_epoch(0) == (0, 3)
    crash(log)
    assert open_log(SMALL_INDEX_INTERVAL).log_end_offset == 4


def test_a_failed_epoch_write_leaves_the_log_and_the_epochs_as_they_were(open_log, monkeypatch):
    log = open_log()
    log.append(make_batch([b"a"], timestamp=NOW), 0, NOW)
    before = state(log)

    def fail(self, durable=True):
        raise DiskFull()
    monkeypatch.setattr(type(log.leader_epochs), "_persist", fail)
    with pytest.raises(DiskFull):
        log.append(make_batch([b"new epoch"], timestamp=NOW), 3, NOW)
    monkeypatch.undo()
    assert state(log) == before
    assert log.append(make_batch([b"again"], timestamp=NOW), 3, NOW).first_offset == 1
    assert log.leader_epochs.entries == [(0, 0), (3, 1)]


def test_a_failed_segment_write_leaves_nothing_behind(open_log, monkeypatch):
    log = open_log()
    log.append(make_batch([b"a"], timestamp=NOW), 0, NOW)
    before = state(log)
    import weir.log.segment as segment_module

    def half_write(fd, data):
        import os
        os.write(fd, bytes(data[:10]))
        raise DiskFull()
    monkeypatch.setattr(segment_module, "write_all", half_write)
    with pytest.raises(DiskFull):
        log.append(make_batch([b"b"], timestamp=NOW), 0, NOW)
    monkeypatch.undo()
    assert state(log) == before


def test_follower_appends_are_all_or_nothing_too(open_log, monkeypatch):
    log = open_log(SMALL_INDEX_INTERVAL)
    log.append(make_batch([b"a"], timestamp=NOW), 0, NOW)
    before = state(log)
    copied = bytearray(make_batch([b"b", b"c"], timestamp=NOW, base_offset=1, leader_epoch=4))
    monkeypatch.setattr(TimeIndex, "commit", lambda self, entries: (_ for _ in ()).throw(DiskFull()))
    with pytest.raises(DiskFull):
        log.append_as_follower(copied, NOW)
    monkeypatch.undo()
    assert state(log) == before
    assert log.append_as_follower(copied, NOW).last_offset == 2
    assert log.leader_epochs.entries == [(0, 0), (4, 1)]


def test_recovery_cuts_at_a_crc_valid_batch_whose_records_are_wrong_and_says_so(open_log, caplog):
    log = open_log()
    log.append(make_batch([b"good"], timestamp=NOW), 0, NOW)
    bad = raw_batch(encode_record(0, 0, b"k", b"v") + b"\x07", 1, base_timestamp=NOW, max_timestamp=NOW)
    log.append(bad, 0, NOW)  # the log itself does not validate: the broker does before appending
    log.append(make_batch([b"after the bad one"], timestamp=NOW), 0, NOW)
    crash(log)
    with caplog.at_level(logging.WARNING):
        log = open_log()
    assert log.log_end_offset == 1
    assert "recovery dropped" in caplog.text
    assert log.append(make_batch([b"next"], timestamp=NOW), 0, NOW).first_offset == 1


def test_a_follower_append_larger_than_a_segment_rolls_and_stays_all_or_nothing(open_log, monkeypatch):
    log = open_log(LogConfig(segment_bytes=300))
    copied = bytearray(b"".join(make_batch([b"x" * 40], timestamp=NOW, base_offset=i, leader_epoch=1)
                                for i in range(10)))  # ~1 KiB: four segments' worth
    assert len(copied) > 3 * 300
    before = state(log)
    calls = []

    def fail_the_third_write(fd, data, original=segment_module.write_all):
        calls.append(len(data))
        if len(calls) == 3:
            raise DiskFull()
        original(fd, data)
    monkeypatch.setattr(segment_module, "write_all", fail_the_third_write)
    with pytest.raises(DiskFull):
        log.append_as_follower(copied, NOW)
    monkeypatch.undo()
    assert state(log) == before, "the pieces already written are cut off again"
    info = log.append_as_follower(copied, NOW)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (0, 9, 10)
    assert len(log.segments) >= 4 and all(s.size <= 300 for s in log.segments)
    assert [r for r in log.read(0, 1 << 20, 10).file_slices], "and it reads back"
