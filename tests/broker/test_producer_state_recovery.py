"""Producer state is rebuilt from the log at start-up, from a snapshot plus the log after it."""

from log.batches import make_batch
from weir.broker.producer_snapshots import PRODUCER_SNAPSHOT, read_producer_snapshot, write_producer_snapshot
from weir.replication.partition import Partition
from weir.log import LogConfig, PartitionLog
from weir.protocol.record_batch import read_batch_header
from weir.replication.producer_state import Duplicate


def append(partition: Partition, first_sequence: int, count: int) -> None:
    batch = make_batch([b"v"] * count, producer_id=42, producer_epoch=0, base_sequence=first_sequence)
    info = partition.log.append(bytearray(batch), 0, 1_000)
    header = read_batch_header(batch)
    partition.producers.record(42, 0, first_sequence, count, info.first_offset, info.last_offset)
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
    assert again.producers.check(42, 0, 3, 2) == Duplicate(3, 4)
    assert again.producers.check(42, 0, 5, 1) is None


def test_snapshot_then_log_tail(tmp_path):
    partition = reopen(tmp_path)
    append(partition, 0, 3)
    write_producer_snapshot(partition.log.directory, partition.producer_snapshot())
    append(partition, 3, 2)  # after the snapshot: must come from the log
    partition.log.close()
    assert (tmp_path / PRODUCER_SNAPSHOT).exists()
    again = reopen(tmp_path)
    assert again.producers.check(42, 0, 0, 3) == Duplicate(0, 2)
    assert again.producers.check(42, 0, 3, 2) == Duplicate(3, 4)


def test_snapshot_beyond_the_log_end_is_ignored(tmp_path):
    partition = reopen(tmp_path)
    append(partition, 0, 3)
    append(partition, 3, 2)
    write_producer_snapshot(partition.log.directory, partition.producer_snapshot())
    partition.log.truncate_to(3)  # as a follower truncating by leader epoch
    partition.log.close()
    again = reopen(tmp_path)
    assert again.producers.check(42, 0, 3, 2) is None, "the truncated batch is no longer a duplicate"
