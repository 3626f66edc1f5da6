"""The shared partition object on a real PartitionLog: the rules the broker and the simulator share."""

import pytest
from kio.schema.errors import ErrorCode

from weir.coordination.model import PartitionState
from weir.log import LogConfig, PartitionLog
from weir.replication import ReplicationConfig
from weir.protocol.record_batch import batch_headers
from weir.replication.follower import SendFetch
from weir.replication.partition import FOLLOWER, LEADER, OFFLINE, Partition
from weir.replication.truncation import EpochEndOffset

from log.batches import make_batch

NOW = 1_000


def state(leader, epoch, isr=(1, 2, 3), partition_epoch=0):
    return PartitionState(leader=leader, leader_epoch=epoch, isr=tuple(isr), controller_epoch=1,
                          partition_epoch=partition_epoch)


def partition_on_disk(tmp_path, broker_id=2):
    return Partition(broker_id, "t", 0, PartitionLog.open(tmp_path, LogConfig(), NOW), 0)


def test_truncation_at_the_log_end_trims_an_epoch_that_wrote_nothing(tmp_path):
    """A follower that led epoch 3 without writing keeps (3, LEO) in its cache; its leader of epoch
    4 answers "epoch 2 ends past your LEO", so it truncates to its LEO and fetches epoch-2 records.
    Untrimmed, (3, 10) would claim them, and OffsetForLeaderEpoch(2) on this replica would answer
    10, making its own followers cut committed epoch-2 records."""
    partition = partition_on_disk(tmp_path)
    log = partition.log
    for i in range(10):
        log.append(make_batch([b"%d" % i]), 2, NOW)
    log.leader_epochs.assign(3, log.log_end_offset)  # became leader of epoch 3, wrote nothing
    assert not partition.truncate_to(log.log_end_offset)
    assert log.leader_epochs.entries == [(2, 0)]
    for i in range(10, 15):
        log.append_as_follower(make_batch([b"%d" % i], base_offset=i, leader_epoch=2), NOW)
    assert log.end_offset_for_epoch(2) == (2, 15)


def test_a_follower_refuses_records_older_than_its_epoch_cache_before_writing_them(tmp_path):
    """Should (3, 10) survive a truncation (the hole above), the leader's epoch-2 records at 10 are
    refused before they are written: appended, the cache would say epoch 2 ends at 10."""
    partition = partition_on_disk(tmp_path)
    log = partition.log
    for i in range(10):
        log.append(make_batch([b"%d" % i]), 2, NOW)
    partition.apply_state(state(1, 4), (1, 2, 3), ReplicationConfig(), NOW, state_zxid=300, own_broker_epoch=200)
    assert partition.on_epoch_answer(partition.next_fetch_request(), EpochEndOffset(ErrorCode.none, 2, 12)) is None
    fetch = partition.next_fetch_request()
    assert isinstance(fetch, SendFetch) and fetch.fetch_offset == 10
    log.leader_epochs.assign(3, log.log_end_offset)  # an epoch that wrote nothing, left untrimmed
    records = make_batch([b"10", b"11"], base_offset=10, leader_epoch=2)
    with pytest.raises(AssertionError, match="below our epoch cache's latest"):
        partition.on_fetched(fetch, ErrorCode.none, 12, records, batch_headers(records), NOW)
    assert log.log_end_offset == 10


def test_a_state_written_before_our_registration_does_not_make_us_leader(tmp_path):
    partition = partition_on_disk(tmp_path)
    config = ReplicationConfig(2, 30_000)
    effects = partition.apply_state(state(2, 5), (1, 2, 3), config, NOW, state_zxid=100, own_broker_epoch=200)
    assert partition.role == OFFLINE and not effects.role_changed
    partition.apply_state(state(2, 6), (1, 2, 3), config, NOW, state_zxid=300, own_broker_epoch=200)
    assert partition.role == LEADER
    effects = partition.apply_state(state(1, 7), (1, 2, 3), config, NOW, state_zxid=100, own_broker_epoch=200)
    assert partition.role == FOLLOWER and effects.role_changed, "following needs no proof: it truncates first"


def test_requests_are_checked_for_their_leader_epoch_before_leadership(tmp_path):
    partition = partition_on_disk(tmp_path)
    partition.apply_state(state(1, 7), (1, 2, 3), ReplicationConfig(), NOW, state_zxid=300, own_broker_epoch=200)
    assert partition.check_request(6) == ErrorCode.fenced_leader_epoch
    assert partition.check_request(8) == ErrorCode.unknown_leader_epoch
    assert partition.check_request(7) == ErrorCode.not_leader_or_follower
