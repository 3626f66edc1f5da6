import uuid

import pytest

from weir.log import LogConfig, LogDirectory, TopicPartition, parse_partition_directory_name

from .batches import batch_headers, make_batch
from .conftest import NOW

TOPIC_ID = uuid.UUID("5a5a5a5a-1234-4321-abcd-0123456789ab")
BATCH = len(make_batch([b"v" * 100]))


@pytest.fixture
def root(tmp_path):
    return tmp_path / "kafka-logs"


def test_partition_directory_names_split_at_the_last_dash():
    assert parse_partition_directory_name("my.topic-with-dashes-12") == TopicPartition("my.topic-with-dashes", 12)
    assert parse_partition_directory_name("orders-0") == TopicPartition("orders", 0)
    for name in ("orders", "orders-", "-3", "orders-x", "orders-0.abc-delete"):
        assert parse_partition_directory_name(name) is None


def test_create_writes_kafka_layout(root):
    logs = LogDirectory.open(root, LogConfig(), NOW)
    log = logs.open_partition("my.topic-a", 3, TOPIC_ID, None, NOW)
    log.append(make_batch([b"a"]), 0, NOW)
    assert log.directory == root / "my.topic-a-3"
    text = (log.directory / "partition.metadata").read_text()
    assert text == "version: 0\ntopic_id: WlpaWhI0QyGrzQEjRWeJqw\n"
    assert logs.open_partition("my.topic-a", 3, TOPIC_ID, None, NOW) is log
    with pytest.raises(ValueError):
        logs.open_partition("my.topic-a", 3, uuid.uuid4(), None, NOW)
    logs.close()
    assert (root / ".kafka_cleanshutdown").exists()
    assert (root / "recovery-point-offset-checkpoint").read_text() == "0\n1\nmy.topic-a 3 1\n"
    assert (root / "log-start-offset-checkpoint").read_text() == "0\n1\nmy.topic-a 3 0\n"


def test_reopen_after_clean_shutdown_skips_recovery(root, monkeypatch):
    logs = LogDirectory.open(root, LogConfig(), NOW)
    for partition in range(3):
        log = logs.open_partition("orders", partition, TOPIC_ID, None, NOW)
        for _ in range(partition + 1):
            log.append(make_batch([b"v" * 100]), 0, NOW)
    logs.get("orders", 2).delete_records_before(1)
    logs.close()

    from weir.log.segment import LogSegment
    recovered = []
    original = LogSegment.recover
    monkeypatch.setattr(LogSegment, "recover", lambda self, *args: recovered.append(self) or original(self, *args))
    logs = LogDirectory.open(root, LogConfig(), NOW)
    assert logs.had_clean_shutdown and not recovered
    assert not (root / ".kafka_cleanshutdown").exists()  # a crash from now on means recovery
    assert {tp: log.log_end_offset for tp, log in logs.logs.items()} == {
        ("orders", 0): 1, ("orders", 1): 2, ("orders", 2): 3}
    assert logs.get("orders", 2).log_start_offset == 1
    assert logs.topic_id("orders", 1) == TOPIC_ID
    logs.close()


def test_after_a_crash_only_the_tail_after_the_recovery_point_is_recovered(root, monkeypatch):
    config = LogConfig(segment_bytes=BATCH * 2)
    logs = LogDirectory.open(root, config, NOW)
    log = logs.open_partition("orders", 0, TOPIC_ID, None, NOW)
    for _ in range(5):
        log.append(make_batch([b"v" * 100]), 0, NOW)  # segments at 0, 2, 4
    log.flush()
    logs.write_checkpoints()  # recovery point 5
    log.append(make_batch([b"v" * 100]), 0, NOW)
    with open(log.directory / "00000000000000000004.log", "ab") as f:
        f.write(b"\x00\x00torn")  # the crash tore the end of the active segment
    # crash: no close, no marker

    from weir.log.segment import LogSegment
    recovered = []
    original = LogSegment.recover
    monkeypatch.setattr(LogSegment, "recover", lambda self, *args: recovered.append(self.base_offset) or original(self, *args))
    logs2 = LogDirectory.open(root, config, NOW)
    assert not logs2.had_clean_shutdown
    assert recovered == [4]
    log2 = logs2.get("orders", 0)
    assert log2.log_end_offset == 6
    assert [h[0] for h in batch_headers(log2.read(0, 1 << 20, 6).read_bytes())] == list(range(6))
    logs2.close()


def test_the_cleaner_checkpoint_survives_a_crash_lowered_by_truncation(root):
    """Where a log's cleaning ended is kept in cleaner-offset-checkpoint; a truncation lowers it to
    the active segment's base offset at once (Kafka's LogCleanerManager.maybeTruncateCheckpoint),
    so a crash cannot bring back the old one; one past the recovered log end is dropped, all of
    the log to clean again (Kafka's cleanableOffsets)."""
    config = LogConfig(segment_bytes=BATCH * 2)
    logs = LogDirectory.open(root, config, NOW)
    log = logs.open_partition("orders", 0, TOPIC_ID, None, NOW)
    for _ in range(5):
        log.append(make_batch([b"v" * 100]), 0, NOW)  # segments at 0, 2, 4
    log.cleaned_to(4)
    assert (root / "cleaner-offset-checkpoint").read_text() == "0\n1\norders 0 4\n"
    log.truncate_to(3)  # the segment at 2 is the active one: cleaned no further than 2
    assert log.cleaner_checkpoint == 2
    # crash: no close
    logs = LogDirectory.open(root, config, NOW)
    assert logs.get("orders", 0).cleaner_checkpoint == 2

    (root / "cleaner-offset-checkpoint").write_text("0\n1\norders 0 9\n")  # beyond the log end (3)
    logs = LogDirectory.open(root, config, NOW)
    assert logs.get("orders", 0).cleaner_checkpoint is None
    logs.close()
    assert (root / "cleaner-offset-checkpoint").read_text() == "0\n0\n"


def test_delete_partition_removes_its_directory_and_checkpoint_entries(root):
    logs = LogDirectory.open(root, LogConfig(), NOW)
    logs.open_partition("orders", 0, TOPIC_ID, None, NOW).append(make_batch([b"a"]), 0, NOW)
    logs.open_partition("orders", 1, TOPIC_ID, None, NOW)
    logs.delete_partition("orders", 0)
    assert logs.get("orders", 0) is None
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == ["orders-1"]
    assert "orders 0" not in (root / "recovery-point-offset-checkpoint").read_text()
    logs.close()


def test_a_partition_of_a_topic_with_the_longest_legal_name_is_deleted_and_made_anew(root):
    """The name it is renamed to before deletion is cut to 255 bytes, as Kafka's; it was the
    topic's 249 characters and a 42-character suffix, the rename failed (ENAMETOOLONG), and the
    topic could not be made again: its old directory kept the old topic id."""
    topic = "x" * 249
    logs = LogDirectory.open(root, LogConfig(), NOW)
    logs.open_partition(topic, 0, TOPIC_ID, None, NOW).append(make_batch([b"a"]), 0, NOW)
    logs.delete_partition(topic, 0)
    assert [p.name for p in root.iterdir() if p.is_dir()] == []
    assert logs.open_partition(topic, 0, uuid.uuid4(), None, NOW).log_end_offset == 0
    logs.close()


def test_leftovers_of_an_interrupted_deletion_are_removed_at_start(root):
    (root / "orders-0.0123abcd-delete").mkdir(parents=True)
    (root / "orders-0.0123abcd-delete" / "00000000000000000000.log").write_bytes(b"old")
    (root / "not-a-partition").mkdir()
    logs = LogDirectory.open(root, LogConfig(), NOW)
    assert not (root / "orders-0.0123abcd-delete").exists()
    assert logs.logs == {}
    logs.close()


def test_per_topic_configs(root):
    small = LogConfig(segment_bytes=BATCH)
    logs = LogDirectory.open(root, LogConfig(), NOW, topic_configs={"small": small})
    log = logs.open_partition("small", 0, TOPIC_ID, None, NOW)
    for _ in range(3):
        log.append(make_batch([b"v" * 100]), 0, NOW)
    assert len(log.segments) == 3
    logs.close()


def test_broker_style_start_up_opens_partitions_one_by_one(root):
    logs = LogDirectory(root)
    log = logs.open_partition("orders", 0, TOPIC_ID, LogConfig(segment_bytes=BATCH * 2), NOW)
    for _ in range(3):
        log.append(make_batch([b"v" * 100]), 0, NOW)
    logs.close()

    logs = LogDirectory(root)  # reads the marker and checkpoints; opens nothing yet
    assert logs.had_clean_shutdown and logs.logs == {}
    log = logs.open_partition("orders", 0, TOPIC_ID, LogConfig(segment_bytes=BATCH * 2), NOW)
    assert log.log_end_offset == 3 and len(log.segments) == 2
    log.delete()  # deleting through the log itself also drops it from the checkpoints
    logs.write_checkpoints()
    assert (root / "recovery-point-offset-checkpoint").read_text() == "0\n0\n"
    logs.close()
