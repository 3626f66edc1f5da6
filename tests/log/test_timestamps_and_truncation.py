from weir.log import LogConfig

from .batches import batch_headers, make_batch
from .conftest import NOW

BATCH = len(make_batch([b"v" * 100]))


def build(open_log, timestamps, **config):
    log = open_log(LogConfig(**config))
    for ts in timestamps:
        log.append(make_batch([b"v" * 100], timestamp=ts), 0, NOW)
    return log


def test_offset_for_timestamp_finds_the_first_batch_reaching_it(open_log):
    timestamps = [NOW + 10 * i for i in range(100)]
    for config in ({}, {"index_interval_bytes": BATCH, "segment_bytes": BATCH * 7}):
        log = build(open_log, timestamps, **config)
        assert log.offset_for_timestamp(0) == (0, NOW)
        assert log.offset_for_timestamp(NOW + 10) == (1, NOW + 10)
        assert log.offset_for_timestamp(NOW + 11) == (2, NOW + 20)
        assert log.offset_for_timestamp(NOW + 990) == (99, NOW + 990)
        assert log.offset_for_timestamp(NOW + 991) is None
        log.close()


def test_offset_for_timestamp_with_unordered_client_timestamps(open_log):
    log = build(open_log, [NOW, NOW + 50, NOW + 20, NOW + 80, NOW + 30], index_interval_bytes=BATCH)
    assert log.offset_for_timestamp(NOW + 25) == (1, NOW + 50)
    assert log.offset_for_timestamp(NOW + 60) == (3, NOW + 80)


def test_offset_for_timestamp_ignores_deleted_records(open_log):
    log = build(open_log, [NOW + i for i in range(5)])
    log.delete_records_before(3)
    assert log.offset_for_timestamp(0) == (3, NOW + 3)


def test_truncate_to_drops_everything_at_and_above(open_log, log_dir):
    log = build(open_log, [NOW] * 10, segment_bytes=BATCH * 3, index_interval_bytes=BATCH)
    log.truncate_to(4)
    assert log.log_end_offset == 4
    assert [s.base_offset for s in log.segments] == [0, 3]
    assert not (log_dir / "00000000000000000006.log").exists()
    assert [h[0] for h in batch_headers(log.read(0, 1 << 20, 10).read_bytes())] == [0, 1, 2, 3]
    assert log.append(make_batch([b"new"]), 2, NOW).first_offset == 4
    log.truncate_to(100)  # beyond the end: nothing to do
    assert log.log_end_offset == 5


def test_truncate_inside_a_batch_removes_that_whole_batch(open_log):
    log = open_log()
    log.append(make_batch([b"a", b"b"]), 0, NOW)
    log.append(make_batch([b"c", b"d", b"e"]), 0, NOW)
    log.truncate_to(3)
    assert log.log_end_offset == 2
    assert log.append(make_batch([b"x"]), 1, NOW).first_offset == 2


def test_truncate_to_a_segment_base_and_to_zero(open_log):
    log = build(open_log, [NOW] * 6, segment_bytes=BATCH * 3)
    log.truncate_to(3)
    assert log.log_end_offset == 3 and [s.base_offset for s in log.segments] == [0, 3]
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert [s.base_offset for s in log.segments] == [0]
    assert log.append(make_batch([b"x"]), 1, NOW).first_offset == 0


def test_truncation_survives_a_reopen(open_log):
    log = build(open_log, [NOW] * 10, segment_bytes=BATCH * 3)
    log.truncate_to(5)
    log.close()
    log = open_log(LogConfig(segment_bytes=BATCH * 3))
    assert log.log_end_offset == 5


def test_offset_for_timestamp_finds_the_exact_record_inside_a_batch(open_log):
    """Kafka answers the first record at or after the time, not the batch that holds it."""
    log = open_log()
    log.append(make_batch([b"a", b"b", b"c", b"d"], timestamps=[NOW, NOW + 30, NOW + 10, NOW + 40]), 0, NOW)
    log.append(make_batch([b"e", b"f"], timestamps=[NOW + 50, NOW + 60]), 0, NOW)
    assert log.offset_for_timestamp(NOW + 5) == (1, NOW + 30)
    assert log.offset_for_timestamp(NOW + 31) == (3, NOW + 40)
    assert log.offset_for_timestamp(NOW + 55) == (5, NOW + 60)
