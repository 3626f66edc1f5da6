"""Producer state is rebuilt from the log at start-up, from a snapshot plus the log after it."""

import json
import uuid

import pytest
from log.batches import make_batch

from weir.broker.producer_snapshots import PRODUCER_SNAPSHOT, read_producer_snapshot, write_producer_snapshot
from weir.broker.replica_manager import ReplicaManager
from weir.config.broker_config import BrokerConfig
from weir.log import LogConfig, PartitionLog
from weir.protocol.record_batch import read_batch_header
from weir.replication.partition import Partition
from weir.replication.producer_state import Duplicate
from weir.zk.model import BrokerInfo, ClusterView, PartitionState, TopicAssignment

TOPIC_ID = uuid.uuid4()
STAMP = 1_000  # every batch's timestamp: a duplicate is answered with it


def append(partition: Partition, first_sequence: int, count: int, epoch: int = 0) -> None:
    batch = make_batch([b"v"] * count, producer_id=42, producer_epoch=epoch, base_sequence=first_sequence,
                       timestamp=STAMP)
    info = partition.log.append(bytearray(batch), 0, 1_000)
    header = read_batch_header(batch)
    partition.producers.record(42, epoch, first_sequence, count, info.first_offset, info.last_offset,
                               header.max_timestamp)
    assert header.record_count == count


def reopen(path) -> Partition:
    partition = Partition(0, "t", 0, PartitionLog.open(path, LogConfig(), 1_000), 0)
    partition.load_producers(read_producer_snapshot(path))
    return partition


def test_producer_state_rebuilt_from_the_log(tmp_path):
    partition = reopen(tmp_path)
    append(partition, 0, 3)
    append(partition, 3, 2)
    partition.log.close()
    again = reopen(tmp_path)
    assert again.producers.check(42, 0, 3, 2) == Duplicate(3, 4, STAMP)
    assert again.producers.check(42, 0, 5, 1) is None


def test_a_log_where_a_forgotten_producers_epoch_went_down_is_loaded(tmp_path):
    """A leader that forgot producer 42 (producer.id.expiration.ms) takes a batch of an older
    epoch of it as a new producer's, as Kafka's: replaying that log (a restart without a snapshot,
    a follower) takes each batch's epoch as it comes, as Kafka's ProducerStateEntry
    maybeUpdateProducerEpoch does, and ends where the leader stood."""
    partition = reopen(tmp_path)
    append(partition, 0, 3, epoch=1)
    partition.producers.remove_expired(now_ms=10**12, expiration_ms=1, keep=lambda _: False)
    assert partition.producers.check(42, 0, 7, 1) is None
    append(partition, 7, 1, epoch=0)
    partition.log.close()
    again = reopen(tmp_path)
    assert again.producers.check(42, 0, 7, 1) == Duplicate(3, 3, STAMP)
    assert again.producers.check(42, 0, 8, 1) is None


def test_snapshot_then_log_tail(tmp_path):
    partition = reopen(tmp_path)
    append(partition, 0, 3)
    write_producer_snapshot(partition.log.directory, partition.producer_snapshot())
    append(partition, 3, 2)  # after the snapshot: must come from the log
    partition.log.close()
    assert (tmp_path / PRODUCER_SNAPSHOT).exists()
    again = reopen(tmp_path)
    assert again.producers.check(42, 0, 0, 3) == Duplicate(0, 2, STAMP)
    assert again.producers.check(42, 0, 3, 2) == Duplicate(3, 4, STAMP)


def test_snapshot_beyond_the_log_end_is_ignored(tmp_path):
    partition = reopen(tmp_path)
    append(partition, 0, 3)
    append(partition, 3, 2)
    write_producer_snapshot(partition.log.directory, partition.producer_snapshot())
    partition.log.truncate_to(3)  # as a follower truncating by leader epoch
    partition.log.close()
    again = reopen(tmp_path)
    assert again.producers.check(42, 0, 3, 2) is None, "the truncated batch is no longer a duplicate"


def test_a_checkpoint_writes_only_the_producer_snapshots_that_changed(tmp_path):
    """Every partition's snapshot used to be rewritten each checkpoint (every minute), idle or
    not: about 0.1 s of the event loop per 1,000 partitions. Unchanged ones stay as they are, also
    after a restart; a changed one is written, and reads back. A new, empty partition has none to
    write (no file reads back as the empty snapshot it has)."""
    def manager() -> ReplicaManager:
        replicas = ReplicaManager(BrokerConfig({"broker.id": "1", "log.dirs": str(tmp_path)}), 0)
        replicas.can_lead = True
        replicas.apply_view(ClusterView(
            brokers={1: BrokerInfo(1, "h", 9000)}, topics={"t": TopicAssignment("t", TOPIC_ID, {0: (1,), 1: (1,)})},
            states={("t", i): PartitionState(1, 0, (1,), 1, 0) for i in (0, 1)},
            state_zxids={("t", i): 10 for i in (0, 1)},
            broker_epochs={1: 5}, broker_sessions={1: 77}, controller_id=1, controller_epoch=1, session_id=77), 0)
        return replicas

    def written(index: int) -> tuple[int, int]:  # a rewrite replaces the file (a new inode)
        stat = (tmp_path / f"t-{index}" / PRODUCER_SNAPSHOT).stat()
        return stat.st_ino, stat.st_mtime_ns

    def produce(replicas: ReplicaManager, index: int, first_sequence: int) -> None:
        batch = make_batch([b"v"], producer_id=42, producer_epoch=0, base_sequence=first_sequence, timestamp=STAMP)
        replicas.append("t", index, bytearray(batch), 1, 1_000)

    replicas = manager()
    produce(replicas, 0, 0)
    replicas.checkpoint()
    first = written(0)
    assert not (tmp_path / "t-1" / PRODUCER_SNAPSHOT).exists()
    replicas.checkpoint()
    assert written(0) == first and not (tmp_path / "t-1" / PRODUCER_SNAPSHOT).exists()
    produce(replicas, 1, 0)
    replicas.checkpoint()
    assert written(0) == first and (tmp_path / "t-1" / PRODUCER_SNAPSHOT).exists()
    replicas.close()
    again = manager()
    kept = written(0), written(1)
    again.checkpoint()
    assert (written(0), written(1)) == kept
    assert again.partitions[("t", 1)].producers.check(42, 0, 0, 1) == Duplicate(0, 0, STAMP)
    again.close()


@pytest.mark.parametrize("damage", [
    lambda saved: saved.update(state="nonsense"),
    lambda saved: saved.update(state=json.dumps({"42": {"epoch": 0}})),
    lambda saved: saved.update(state=json.dumps({"42": {"epoch": "0", "batches": []}})),
    lambda saved: saved.update(state=json.dumps({"42": {"epoch": 0, "batches": [[0, 2]]}})),
    lambda saved: saved.update(state=json.dumps([42])),
    lambda saved: saved.update(state={"42": {}}),
    lambda saved: saved.clear() or saved.update(offset=0),
])
def test_a_damaged_producer_table_in_the_snapshot_is_rebuilt_from_the_log(tmp_path, damage):
    """Kafka's ProducerStateManager drops a snapshot that fails its schema (CorruptSnapshotException)
    and rebuilds from the log. A snapshot file whose JSON parsed but whose producer table did not
    used to raise out of the partition's opening: the broker failed at every start."""
    partition = reopen(tmp_path)
    append(partition, 0, 3)
    write_producer_snapshot(partition.log.directory, partition.producer_snapshot())
    append(partition, 3, 2)
    partition.log.close()
    saved = json.loads((tmp_path / PRODUCER_SNAPSHOT).read_text())
    damage(saved)
    (tmp_path / PRODUCER_SNAPSHOT).write_text(json.dumps(saved))
    again = reopen(tmp_path)
    assert again.producers.check(42, 0, 0, 3) == Duplicate(0, 2, STAMP)
    assert again.producers.check(42, 0, 3, 2) == Duplicate(3, 4, STAMP)
    assert again.producers.check(42, 0, 5, 1) is None


def test_a_producer_snapshot_that_is_not_an_object_is_ignored(tmp_path):
    (tmp_path / PRODUCER_SNAPSHOT).write_text("[1, 2, 3]")
    assert read_producer_snapshot(tmp_path) is None
