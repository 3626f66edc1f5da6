"""Transactions on a Partition over a real PartitionLog (KIP-98), without a broker: a refused
append writes nothing, markers end transactions and index aborts in the segment's .txnindex, a
follower replicating the leader has the same LSO and aborted index, truncation reopens a
transaction its marker was cut from, and a snapshot or a replay of the log keeps a transaction
open across a restart."""

import os
import struct

import pytest
from crc32c import crc32c
from kio.schema.errors import ErrorCode

from weir.broker.producer_snapshots import read_producer_snapshot, write_producer_snapshot
from weir.log import LogConfig, PartitionLog
from weir.protocol.errors import KafkaError
from weir.protocol.record_batch import batch_headers, read_batch_header
from weir.protocol.records import encode_batch
from weir.replication import ReplicationConfig
from weir.replication.follower import SendOffsetForLeaderEpoch
from weir.replication.partition import Partition
from weir.zk.model import PartitionState

NOW = 1_000
P, Q = 70, 80


def txn_batch(value: bytes, pid: int, seq: int, transactional: bool = True) -> bytearray:
    records = bytearray(encode_batch([value], keys=[b"k"], timestamp=NOW, producer_id=pid, producer_epoch=0,
                                     base_sequence=seq))
    if transactional:
        struct.pack_into(">h", records, 21, 0x10)
        struct.pack_into(">I", records, 17, crc32c(bytes(records[21:])))
    return records


def partition_at(path, broker_id: int, leader: int, isr=(1, 2), leader_epoch: int = 0) -> Partition:
    partition = Partition(broker_id, "t", 0, PartitionLog.open(path, LogConfig(segment_bytes=300), NOW), 0,
                          transaction_verification=False)
    partition.load_producers(read_producer_snapshot(path))
    apply(partition, leader, isr, leader_epoch)
    return partition


def apply(partition: Partition, leader: int, isr, leader_epoch: int) -> None:
    partition.apply_state(PartitionState(leader=leader, leader_epoch=leader_epoch, isr=isr, controller_epoch=1,
                                         partition_epoch=leader_epoch), (1, 2), ReplicationConfig(), NOW,
                          state_zxid=10, own_broker_epoch=1)


def produce(partition: Partition, records: bytearray) -> int:
    return partition.produce(records, read_batch_header(records), 1, NOW, proven=True).first_offset


def replicate(leader: Partition, follower: Partition) -> None:
    """One round of the follower's fetch loop against `leader`, then the leader learns the
    follower's position (its HW moves) and a second fetch brings the HW to the follower."""
    for _ in range(2):
        request = follower.next_fetch_request()
        if isinstance(request, SendOffsetForLeaderEpoch):
            follower.on_epoch_answer(request, leader.answer_epoch_request(request.leader_epoch,
                                                                          request.current_leader_epoch))
            request = follower.next_fetch_request()
        leader.on_follower_fetch(follower.broker_id, -1, request.fetch_offset, request.current_leader_epoch, NOW)
        fetched = leader.log.read(request.fetch_offset, 1 << 20, leader.log.log_end_offset)
        data = b"".join(os.pread(fd, size, position) for fd, position, size in fetched.file_slices)
        follower.on_fetched(request, ErrorCode.none, leader.high_watermark, data,
                            batch_headers(data) if data else (), NOW)


def aborted(partition: Partition) -> list[tuple[int, int]]:
    return [(t.producer_id, t.first_offset) for t in partition.aborted_transactions(0, partition.log.log_end_offset)]


@pytest.fixture
def pair(tmp_path):
    leader = partition_at(tmp_path / "leader", 1, 1)
    follower = partition_at(tmp_path / "follower", 2, 1)
    yield leader, follower
    leader.log.close()
    follower.log.close()


def test_a_refused_append_writes_nothing(pair):
    leader, _ = pair
    produce(leader, txn_batch(b"a", P, 0))
    with pytest.raises(KafkaError) as refused:
        produce(leader, txn_batch(b"b", P, 1, transactional=False))
    assert refused.value.code == ErrorCode.invalid_txn_state and leader.log.log_end_offset == 1
    leader.append_marker(P, 0, True, 5, NOW, proven=True)
    with pytest.raises(KafkaError) as fenced:
        leader.append_marker(P, 0, True, 4, NOW, proven=True)
    assert fenced.value.code == ErrorCode.transaction_coordinator_fenced and leader.log.log_end_offset == 2
    # the idempotent sequence goes on after the marker (a marker has none)
    assert produce(leader, txn_batch(b"b", P, 1)) == 2


def test_a_follower_has_the_leaders_lso_and_aborted_index_and_truncation_reopens_a_transaction(pair):
    leader, follower = pair
    produce(leader, txn_batch(b"a", P, 0))  # 0
    produce(leader, txn_batch(b"x", Q, 0))  # 1
    leader.append_marker(Q, 0, False, 0, NOW, proven=True)  # 2
    replicate(leader, follower)
    assert leader.high_watermark == follower.high_watermark == 3
    assert leader.last_stable_offset == follower.last_stable_offset == 0
    assert aborted(leader) == aborted(follower) == [(Q, 1)]
    txnindex = [p.name for p in follower.log.directory.iterdir() if p.suffix == ".txnindex"]
    assert txnindex == ["00000000000000000000.txnindex"]
    leader.append_marker(P, 0, False, 0, NOW, proven=True)  # 3
    replicate(leader, follower)
    assert follower.last_stable_offset == 4 and aborted(follower) == [(Q, 1), (P, 0)]

    follower.truncate_to(3)  # as if the marker at 3 had been cut by a new leader
    assert follower.txns.table.ongoing_transactions() == [(0, P)]
    assert aborted(follower) == [(Q, 1)]
    follower.truncate_to(1)  # below the HW: rebuilt from the log
    assert follower.txns.table.ongoing_transactions() == [(0, P)] and aborted(follower) == []


def test_an_open_transaction_survives_a_restart_from_a_snapshot_or_from_the_log(tmp_path):
    leader = partition_at(tmp_path, 1, 1, isr=(1,))
    produce(leader, txn_batch(b"x", Q, 0))  # 0
    leader.append_marker(Q, 0, False, 3, NOW, proven=True)  # 1
    produce(leader, txn_batch(b"a", P, 0))  # 2
    write_producer_snapshot(tmp_path, leader.producer_snapshot())
    produce(leader, txn_batch(b"b", P, 1))  # 3: after the snapshot
    leader.log.close()
    for snapshot in (True, False):
        if not snapshot:
            (tmp_path / "producer-state.json").unlink()
            (tmp_path / "00000000000000000000.txnindex").unlink()  # lost: the replay indexes it again
        again = partition_at(tmp_path, 1, 1, isr=(1,), leader_epoch=1)
        assert again.txns.table.ongoing_transactions() == [(2, P)]
        assert again.txns.table.producers[Q].coordinator_epoch == 3
        assert again.last_stable_offset == 2 and aborted(again) == [(Q, 0)]
        again.log.close()


def test_idle_producers_without_a_transaction_expire(pair):
    leader, _ = pair
    produce(leader, txn_batch(b"a", P, 0))
    leader.append_marker(P, 0, True, 0, NOW, proven=True)
    produce(leader, txn_batch(b"x", Q, 0))  # Q's transaction stays open
    leader.expire_producers(NOW + 10_000, 5_000)
    assert set(leader.txns.table.producers) == {P, Q}, "batches above the HW keep their producers"
    leader.on_follower_fetch(2, -1, leader.log.log_end_offset, 0, NOW)  # the HW reaches the LEO
    leader.expire_producers(NOW + 10_000, 5_000)
    assert set(leader.txns.table.producers) == {Q}
