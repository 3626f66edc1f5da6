"""The shared partition object on a real PartitionLog: the rules the broker and the simulator share."""

import pytest
from kio.schema.errors import ErrorCode
from log.batches import make_batch

from weir.log import LogConfig, PartitionLog
from weir.protocol.errors import KafkaError
from weir.protocol.record_batch import batch_headers
from weir.replication import ReplicationConfig
from weir.replication.follower import SendFetch
from weir.replication.partition import FOLLOWER, LEADER, OFFLINE, Partition
from weir.replication.truncation import EpochEndOffset
from weir.zk.model import PartitionState

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


def test_a_follower_appending_records_older_than_its_epoch_cache_repairs_the_cache(tmp_path):
    """Should (3, 10) survive a truncation (the hole above), the leader's epoch-2 records at 10
    drop it, as Kafka's LeaderEpochFileCache.assign does: the batches are the truth, and a stuck
    fetcher would leave the replica out of the ISR for good."""
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
    partition.on_fetched(fetch, ErrorCode.none, 12, records, batch_headers(records), NOW)
    assert log.log_end_offset == 12
    assert log.leader_epochs.entries == [(2, 0)]
    assert log.end_offset_for_epoch(2) == (2, 12)


@pytest.mark.parametrize("checkpoint, log_start", [("0\n2\n2 0\n7 5\n", 0), ("0\n1\n7 50\n", 100)])
def test_a_checkpoint_naming_a_higher_epoch_does_not_stop_leadership(tmp_path, checkpoint, log_start):
    """A leader-epoch checkpoint ahead of the log (another log's, or left by a crash) names epoch 7;
    the controller then makes this broker leader at epoch 3. Kafka's assign drops the contradicted
    entry; Weir failed its "leader epochs only grow" assertion, and the partition never led."""
    log = PartitionLog.open(tmp_path, LogConfig(), NOW, log_start_offset=log_start)
    if log_start == 0:
        log.append(make_batch([b"%d" % i for i in range(10)]), 2, NOW)  # one batch, offsets 0-9
    log.close()
    (tmp_path / "leader-epoch-checkpoint").write_text(checkpoint)
    partition = Partition(2, "t", 0, PartitionLog.open(tmp_path, LogConfig(), NOW, log_start_offset=log_start,
                                                       clean_shutdown=True), 0)
    partition.apply_state(state(2, 3), (1, 2, 3), ReplicationConfig(), NOW, state_zxid=300, own_broker_epoch=200)
    assert partition.role == LEADER
    records = bytearray(make_batch([b"new"]))
    partition.produce(records, batch_headers(records)[0], 1, NOW, proven=True)
    leo = partition.log.log_end_offset
    assert partition.log.leader_epochs.entries[-1] == (3, leo - 1)
    assert partition.log.end_offset_for_epoch(3) == (3, leo)


def test_delete_records_moves_the_leaders_log_start_and_waits_for_the_followers(tmp_path):
    partition = partition_on_disk(tmp_path, broker_id=1)
    partition.apply_state(state(1, 1), (1, 2, 3), ReplicationConfig(), NOW, state_zxid=300, own_broker_epoch=200)
    records = bytearray(make_batch([b"%d" % i for i in range(10)]))
    partition.produce(records, batch_headers(records)[0], 1, NOW, proven=True)
    for follower in (2, 3):
        assert partition.on_follower_fetch(follower, 5, 10, 1, NOW, log_start_offset=0)[0] == ErrorCode.none
    assert partition.high_watermark == 10
    with pytest.raises(KafkaError) as refused:
        partition.delete_records(11)
    assert refused.value.code == ErrorCode.offset_out_of_range
    assert partition.delete_records(-1) == 10 and partition.log.log_start_offset == 10
    assert partition.low_watermark([2, 3]) == 0
    assert partition.on_follower_fetch(2, 5, 10, 1, NOW, log_start_offset=10)[1].data_changed
    assert partition.low_watermark([2, 3]) == 0 and partition.low_watermark([2]) == 10


def test_a_follower_follows_its_leaders_log_start_as_far_as_its_high_watermark(tmp_path):
    partition = partition_on_disk(tmp_path)
    partition.apply_state(state(1, 1), (1, 2, 3), ReplicationConfig(), NOW, state_zxid=300, own_broker_epoch=200)
    fetch = partition.next_fetch_request()
    records = make_batch([b"%d" % i for i in range(10)], leader_epoch=1)
    partition.on_fetched(fetch, ErrorCode.none, 4, records, batch_headers(records), NOW, leader_log_start_offset=0)
    fetch = partition.next_fetch_request()
    partition.on_fetched(fetch, ErrorCode.none, 4, None, (), NOW, leader_log_start_offset=6)
    assert partition.log.log_start_offset == 4, "not beyond what we know is committed"
    partition.on_fetched(fetch, ErrorCode.none, 10, None, (), NOW, leader_log_start_offset=6)
    assert partition.log.log_start_offset == 6

    partition.on_fetched(fetch, ErrorCode.offset_out_of_range, 30, None, (), NOW, leader_log_start_offset=25)
    assert (partition.log.log_start_offset, partition.log.log_end_offset) == (25, 25)
    fetch = partition.next_fetch_request()
    assert fetch == SendFetch(1, 1, 25)

    # The leader's log starts inside its batch 20..29: our empty log starts again at the batch.
    records = make_batch([b"%d" % i for i in range(20, 30)], base_offset=20, leader_epoch=1)
    partition.on_fetched(fetch, ErrorCode.none, 30, records, batch_headers(records), NOW, leader_log_start_offset=25)
    assert (partition.log.log_start_offset, partition.log.log_end_offset) == (25, 30)


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


def test_a_fetch_from_a_replica_outside_the_assignment_is_answered_as_kafkas(tmp_path):
    """Kafka's followerReplicaOrThrow: with our leader epoch, UNKNOWN_LEADER_EPOCH (the replica
    knows of a reassignment we have not read yet: retry); without one, NOT_LEADER_OR_FOLLOWER."""
    partition = partition_on_disk(tmp_path, broker_id=1)
    partition.apply_state(state(1, 1), (1, 2, 3), ReplicationConfig(), NOW, state_zxid=300, own_broker_epoch=200)
    result, _, effects = partition.answer_fetch(0, 1, 4, NOW, replica_epoch=5)
    assert result.error_code == ErrorCode.unknown_leader_epoch and not effects.isr_proposal
    result, _, _ = partition.answer_fetch(0, -1, 4, NOW, replica_epoch=5)
    assert result.error_code == ErrorCode.not_leader_or_follower
    assert 4 not in partition.leader.followers


def test_a_state_read_before_the_assignment_written_ahead_of_it_keeps_its_isr_members_as_replicas(tmp_path):
    """A reassignment's assignment is written before the state that follows it (KIP-455), but a
    broker may read the state first: the ISR is the truth until the assignment arrives."""
    partition = partition_on_disk(tmp_path, broker_id=1)
    partition.apply_state(state(1, 1, isr=(1, 2, 4)), (1, 2, 3), ReplicationConfig(), NOW, state_zxid=300,
                          own_broker_epoch=200)
    assert partition.replicas == (1, 2, 3, 4) and set(partition.leader.followers) == {2, 3, 4}
    assert partition.on_follower_fetch(4, 5, 0, 1, NOW, log_start_offset=0)[0] == ErrorCode.none

    partition.apply_state(state(1, 2, isr=(1, 2, 4), partition_epoch=1), (1, 2, 4), ReplicationConfig(), NOW,
                          state_zxid=310, own_broker_epoch=200)
    assert partition.replicas == (1, 2, 4) and set(partition.leader.followers) == {2, 4}


def test_a_reassignment_read_after_the_state_that_went_with_it_reaches_the_leader(tmp_path):
    """Found by a weir sim soak (reassign seed 791586, faults 5-8): a broker paused through a
    reassignment read, on resuming, the new state first (its state watch had fired first) and the
    new assignment after it, and no state followed: the reassignment waited for the replica it adds,
    whose fetches the leader refused for good (not a replica of its). The same state again, with the
    assignment read since, gives the leader and the partition the new replicas; one that would drop
    an ISR member waits for the state that removes it."""
    partition = partition_on_disk(tmp_path, broker_id=1)
    config = ReplicationConfig()
    partition.apply_state(state(1, 4, isr=(1, 2, 4)), (1, 2, 4, 5), config, NOW, state_zxid=300, own_broker_epoch=200)
    assert partition.answer_fetch(60, 4, 3, NOW, replica_epoch=5)[0].error_code == ErrorCode.unknown_leader_epoch

    effects = partition.apply_state(state(1, 4, isr=(1, 2, 4)), (1, 2, 3, 4), config, NOW, state_zxid=300,
                                    own_broker_epoch=200)
    assert not effects.role_changed and partition.role == LEADER
    assert partition.replicas == (1, 2, 3, 4) and set(partition.leader.followers) == {2, 3, 4}
    assert partition.answer_fetch(0, 4, 3, NOW, replica_epoch=5)[0].error_code == ErrorCode.none

    partition.apply_state(state(1, 4, isr=(1, 2, 4)), (1, 2, 3), config, NOW, state_zxid=300, own_broker_epoch=200)
    assert partition.replicas == (1, 2, 3, 4), "4 is in the ISR: not dropped before a state removes it"
    partition.leader.check_invariants()


def test_a_fetch_reads_to_the_hw_for_a_consumer_and_to_the_leo_for_a_follower(tmp_path):
    """`answer_fetch` is the read rule both shells ask (the broker's Fetch, the simulator's): a
    consumer stops at the HW and only while leadership is proven, a follower reads to the LEO and
    is timed once per request; a fetch outside the log is out of range, with the HW to reset to."""
    partition = partition_on_disk(tmp_path, broker_id=1)
    partition.apply_state(state(1, 1), (1, 2, 3), ReplicationConfig(), NOW, state_zxid=300, own_broker_epoch=200)
    records = bytearray(make_batch([b"%d" % i for i in range(10)]))
    partition.produce(records, batch_headers(records)[0], 1, NOW, proven=True)
    partition.on_follower_fetch(2, 5, 4, 1, NOW)
    partition.on_follower_fetch(3, 5, 4, 1, NOW)
    assert partition.high_watermark == 4

    result, limit, effects = partition.answer_fetch(0, 1, -1, NOW)
    assert (result.error_code, result.high_watermark, limit, effects) == (ErrorCode.none, 4, 4, None)
    result, _, _ = partition.answer_fetch(0, 1, -1, NOW, proven=False)
    assert result.error_code == ErrorCode.not_leader_or_follower

    result, limit, effects = partition.answer_fetch(4, 1, 2, NOW + 1, replica_epoch=5)
    assert (result.error_code, limit) == (ErrorCode.none, 10) and effects is not None
    assert partition.leader.followers[2].log_end_offset == 4
    _, _, again = partition.answer_fetch(10, 1, 2, NOW + 2, replica_epoch=5, first=False)
    assert again is None and partition.leader.followers[2].log_end_offset == 4  # a long poll's re-read

    result, _, _ = partition.answer_fetch(11, 1, -1, NOW)
    assert (result.error_code, result.high_watermark) == (ErrorCode.offset_out_of_range, 4)
    result, _, _ = partition.answer_fetch(0, 2, -1, NOW)
    assert result.error_code == ErrorCode.unknown_leader_epoch


def test_a_stopping_leader_waits_for_a_handover_while_another_replica_is_alive(tmp_path):
    """Controlled shutdown's rule, in both the broker and weir sim: the controller moves the
    leadership to a live ISR member, or to a live replica the leader adds to the ISR once it has
    caught up, so the broker waits while any other replica is alive; with every other replica
    down the partition stays (it is not waited for), and a follower never holds the stop up."""
    partition = partition_on_disk(tmp_path, broker_id=1)
    partition.apply_state(state(1, 1, isr=(1, 2)), (1, 2, 3), ReplicationConfig(), NOW, state_zxid=300,
                          own_broker_epoch=200)
    partition.on_live_brokers(frozenset({1, 2, 3}), NOW)
    assert partition.awaits_leadership_handover()
    partition.on_live_brokers(frozenset({1, 3}), NOW)  # 3 is alive, not in the ISR: it may catch up and take over
    assert partition.awaits_leadership_handover()
    partition.on_live_brokers(frozenset({1}), NOW)
    assert not partition.awaits_leadership_handover()
    partition.on_live_brokers(frozenset({1, 2, 3}), NOW)
    partition.apply_state(state(2, 2, isr=(1, 2)), (1, 2, 3), ReplicationConfig(), NOW, state_zxid=400,
                          own_broker_epoch=200)
    assert partition.role == FOLLOWER and not partition.awaits_leadership_handover()


def test_a_stopping_broker_waits_for_a_leadership_the_controller_leaves_to_it(tmp_path):
    """Registered again in a new session, a broker in controlled shutdown may find a state that
    names it leader but predates its registration (it may not lead from it), or one that names no
    leader with it in the ISR: the controller writes it leader next, so the leadership is still
    its to hand over. It was once taken for moved, and the broker stopped with the partition
    about to be offline."""
    partition = partition_on_disk(tmp_path, broker_id=1)
    partition.on_live_brokers(frozenset({1, 2, 3}), NOW)
    partition.apply_state(state(1, 1, isr=(1, 2, 3)), (1, 2, 3), ReplicationConfig(), NOW, state_zxid=100,
                          own_broker_epoch=200)
    assert partition.role == OFFLINE and partition.awaits_leadership_handover()
    partition.apply_state(state(-1, 2, isr=(1,)), (1, 2, 3), ReplicationConfig(), NOW, state_zxid=300,
                          own_broker_epoch=200)
    assert partition.role == OFFLINE and partition.awaits_leadership_handover()
    partition.on_live_brokers(frozenset({1}), NOW)
    assert not partition.awaits_leadership_handover()
    partition.on_live_brokers(frozenset({1, 2, 3}), NOW)
    partition.apply_state(state(-1, 3, isr=(2,)), (1, 2, 3), ReplicationConfig(), NOW, state_zxid=400,
                          own_broker_epoch=200)
    assert not partition.awaits_leadership_handover()


def test_fetches_a_session_took_of_a_quiet_partition_count_for_its_follower_in_that_leadership_only(tmp_path):
    """A fetch session stops reading a quiet partition (fetch_sessions.py); once it has news, the
    fetches it took meanwhile are credited to the follower, as if it had been timed at each, but
    never into a new leadership, which has reset what it knows of its followers."""
    partition = partition_on_disk(tmp_path, broker_id=1)
    partition.apply_state(state(1, 1), (1, 2, 3), ReplicationConfig(), NOW, state_zxid=300, own_broker_epoch=200)
    follower = partition.leader.followers[2]
    credit = partition.quiet_fetch_credit(2)
    credit(NOW + 30_000)
    assert (follower.last_fetch_time_ms, follower.last_caught_up_time_ms) == (NOW + 30_000, NOW + 30_000)
    credit(NOW + 10_000)  # never back in time
    assert follower.last_caught_up_time_ms == NOW + 30_000
    partition.apply_state(state(1, 2), (1, 2, 3), ReplicationConfig(), NOW + 40_000, state_zxid=301,
                          own_broker_epoch=200)
    reset = partition.leader.followers[2].last_caught_up_time_ms
    credit(NOW + 50_000)
    assert partition.leader.followers[2].last_caught_up_time_ms == reset
