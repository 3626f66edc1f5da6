from kio.schema.errors import ErrorCode

from weir.replication import (AppendRecords, Backoff, EpochEndOffset, FollowerPartition, FollowerState, Ignore,
                              SendFetch, SendOffsetForLeaderEpoch, Truncation)
from weir.replication.follower import StartAt, backoff_ms

from .epoch_caches import MemoryEpochCache


def fetching_follower(leo=10, hw=5, leader_epoch=3):
    epochs = MemoryEpochCache([(0, 0), (3, 4)])
    follower = FollowerPartition(2, 1, leader_epoch, leo, hw, epochs)
    assert follower.next_request() == SendOffsetForLeaderEpoch(1, leader_epoch, 3)
    decision = follower.on_offset_for_leader_epoch_response(leader_epoch, 3, EpochEndOffset(ErrorCode.none, 3, 100))
    assert decision == Truncation(leo, completed=True)
    follower.on_truncated(leo)
    return follower


def test_follower_truncates_before_it_fetches():
    follower = FollowerPartition(2, 1, 3, 10, 5, MemoryEpochCache([(0, 0)]))
    assert follower.state is FollowerState.TRUNCATING
    assert isinstance(follower.next_request(), SendOffsetForLeaderEpoch)
    assert follower.on_fetch_response(10, ErrorCode.none, 10, 10, current_leader_epoch=follower.leader_epoch) == Ignore()


def test_follower_fetches_from_its_leo():
    follower = fetching_follower(leo=10)
    assert follower.next_request() == SendFetch(1, 3, 10)


def test_follower_appends_records_starting_at_its_leo_and_advances():
    follower = fetching_follower(leo=10, hw=5)
    decision = follower.on_fetch_response(10, ErrorCode.none, 12, 10, current_leader_epoch=follower.leader_epoch)
    assert decision == AppendRecords(10, 12)
    follower.on_appended(15, decision.leader_high_watermark)
    assert follower.log_end_offset == 15 and follower.next_request() == SendFetch(1, 3, 15)


def test_follower_hw_is_min_of_leader_hw_and_own_leo():
    follower = fetching_follower(leo=10, hw=5)
    follower.on_appended(15, 12)
    assert follower.high_watermark == 12
    follower.on_appended(20, 30)
    assert follower.high_watermark == 20
    assert follower.on_fetch_response(20, ErrorCode.none, 25, None, current_leader_epoch=follower.leader_epoch) == Ignore()   # no records, new HW
    assert follower.high_watermark == 20


def test_records_must_start_at_the_follower_leo():
    follower = fetching_follower(leo=10)
    assert follower.on_fetch_response(10, ErrorCode.none, 10, 8, current_leader_epoch=follower.leader_epoch) == Backoff(ErrorCode.corrupt_message)
    assert follower.log_end_offset == 10


def test_response_to_an_older_fetch_is_ignored():
    follower = fetching_follower(leo=10)
    assert follower.on_fetch_response(7, ErrorCode.none, 10, 7, current_leader_epoch=follower.leader_epoch) == Ignore()


def test_fenced_or_misdirected_fetch_backs_off():
    follower = fetching_follower()
    for error in (ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch, ErrorCode.not_leader_or_follower):
        assert follower.on_fetch_response(10, error, 0, None, current_leader_epoch=follower.leader_epoch) == Backoff(error)
        assert follower.state is FollowerState.FETCHING


def test_offset_out_of_range_goes_back_to_truncation_by_epoch():
    follower = fetching_follower(leo=10)
    assert follower.on_fetch_response(10, ErrorCode.offset_out_of_range, 0, None, current_leader_epoch=follower.leader_epoch) == Backoff(
        ErrorCode.offset_out_of_range)
    assert follower.next_request() == SendOffsetForLeaderEpoch(1, 3, 3)


def test_a_log_ending_below_the_leaders_log_start_starts_again_there():
    follower = fetching_follower(leo=10)
    decision = follower.on_fetch_response(10, ErrorCode.offset_out_of_range, 50, None,
                                          current_leader_epoch=follower.leader_epoch, leader_log_start_offset=40)
    assert decision == StartAt(40)
    follower.on_started_at(40)
    assert follower.next_request() == SendFetch(1, 3, 40) and follower.high_watermark == 40


def test_stale_offset_for_leader_epoch_answer_is_ignored():
    follower = FollowerPartition(2, 1, 3, 10, 5, MemoryEpochCache([(0, 0), (3, 4)]))
    assert follower.on_offset_for_leader_epoch_response(3, 0, EpochEndOffset(ErrorCode.none, 0, 2)) == Ignore()
    assert follower.on_offset_for_leader_epoch_response(3, 3, EpochEndOffset(ErrorCode.fenced_leader_epoch)) == \
        Backoff(ErrorCode.fenced_leader_epoch)
    assert follower.state is FollowerState.TRUNCATING


def test_an_answer_from_an_earlier_leadership_is_ignored():
    """Asked of leader epoch 3's leader; the partition has since moved to leader epoch 5, whose
    follower would ask the same epoch: the old answer must not truncate it."""
    follower = FollowerPartition(2, 1, 5, 10, 5, MemoryEpochCache([(0, 0), (3, 4)]))
    assert follower.next_request() == SendOffsetForLeaderEpoch(1, 5, 3)
    assert follower.on_offset_for_leader_epoch_response(3, 3, EpochEndOffset(ErrorCode.none, 0, 2)) == Ignore()
    assert follower.state is FollowerState.TRUNCATING and follower.next_request() == SendOffsetForLeaderEpoch(1, 5, 3)
    assert follower.on_offset_for_leader_epoch_response(5, 3, EpochEndOffset(ErrorCode.none, 3, 8)) == \
        Truncation(8, completed=True)


def test_truncation_lowers_the_follower_hw():
    follower = FollowerPartition(2, 1, 3, 10, 9, MemoryEpochCache([(0, 0), (3, 4)]))
    follower.on_offset_for_leader_epoch_response(3, 3, EpochEndOffset(ErrorCode.none, 0, 6))
    follower.on_truncated(4)
    assert follower.log_end_offset == 4 and follower.high_watermark == 4


def test_a_partition_backs_off_briefly_while_its_leader_catches_up_with_the_state():
    """Both learn of the new leadership from ZooKeeper at about the same moment: a leader that has
    not read it yet answers NOT_LEADER_OR_FOLLOWER or UNKNOWN_LEADER_EPOCH, and the follower
    retries within 50 ms, not after replica.fetch.backoff.ms (both shells ask `backoff_ms`)."""
    assert backoff_ms(ErrorCode.not_leader_or_follower, 1000) == 50
    assert backoff_ms(ErrorCode.unknown_leader_epoch, 1000) == 50
    assert backoff_ms(ErrorCode.unknown_leader_epoch, 20) == 20
    assert backoff_ms(ErrorCode.fenced_leader_epoch, 1000) == 1000
