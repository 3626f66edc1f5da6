"""Truncation by leader epoch (KIP-101, KIP-279): both sides, and the whole exchange driven through
FollowerPartition with the log's own LeaderEpochCache standing in for each broker's log."""

from kio.schema.errors import ErrorCode

from weir.log import LeaderEpochCache
from weir.replication import (EpochEndOffset, FollowerPartition, FollowerState, SendFetch, SendOffsetForLeaderEpoch,
                              Truncation, answer_offset_for_leader_epoch, truncation_for_epoch_answer)

from .epoch_caches import MemoryEpochCache


def answer(epochs, requested, leo, *, our_epoch=None, current=-1, is_leader=True):
    our_epoch = epochs.latest_epoch if our_epoch is None else our_epoch
    return answer_offset_for_leader_epoch(requested, current, is_leader=is_leader, our_leader_epoch=our_epoch,
                                          epochs=epochs, log_end_offset=leo)


def run_truncation(follower_epochs, follower_leo, follower_hw, leader_epochs, leader_leo, leader_epoch):
    """Drive the follower through OffsetForLeaderEpoch rounds; returns (final LEO, epochs asked)."""
    follower = FollowerPartition(2, 1, leader_epoch, follower_leo, follower_hw, follower_epochs)
    asked = []
    for _ in range(10):
        request = follower.next_request()
        if isinstance(request, SendFetch):
            return follower.log_end_offset, asked
        assert isinstance(request, SendOffsetForLeaderEpoch)
        asked.append(request.leader_epoch)
        reply = answer(leader_epochs, request.leader_epoch, leader_leo, current=request.current_leader_epoch)
        decision = follower.on_offset_for_leader_epoch_response(request.current_leader_epoch, request.leader_epoch,
                                                                reply)
        assert isinstance(decision, Truncation)
        new_leo = min(decision.offset, follower.log_end_offset)  # what PartitionLog.truncate_to does
        follower_epochs.truncate_from_end(new_leo)
        follower.on_truncated(new_leo)
    raise AssertionError("truncation did not finish")


def test_leader_answers_end_of_epoch_as_start_of_next_epoch():
    epochs = MemoryEpochCache([(0, 0), (2, 10), (4, 25)])
    assert answer(epochs, 2, 40) == EpochEndOffset(ErrorCode.none, 2, 25)


def test_leader_answers_its_leo_for_its_latest_epoch():
    epochs = MemoryEpochCache([(0, 0), (2, 10)])
    assert answer(epochs, 2, 40) == EpochEndOffset(ErrorCode.none, 2, 40)


def test_leader_answers_largest_epoch_not_above_requested():
    epochs = MemoryEpochCache([(0, 0), (2, 10), (4, 25)])
    assert answer(epochs, 3, 40) == EpochEndOffset(ErrorCode.none, 2, 25)


def test_offset_for_leader_epoch_is_fenced_by_current_leader_epoch():
    epochs = MemoryEpochCache([(0, 0), (4, 25)])
    assert answer(epochs, 0, 40, our_epoch=4, current=3).error is ErrorCode.fenced_leader_epoch
    assert answer(epochs, 0, 40, our_epoch=4, current=5).error is ErrorCode.unknown_leader_epoch
    assert answer(epochs, 0, 40, our_epoch=4, current=4, is_leader=False).error is ErrorCode.not_leader_or_follower


def test_follower_truncates_by_leader_epoch_not_hw(tmp_path):
    """KIP-101 scenario 1 (loss): the follower has the committed offset 1 but its HW is still 1;
    truncating to the HW would drop a committed record. By epoch it keeps it."""
    leader_epochs = LeaderEpochCache(tmp_path / "leader", [(0, 0)])
    follower_epochs = LeaderEpochCache(tmp_path / "follower", [(0, 0)])
    leo, _ = run_truncation(follower_epochs, 2, 1, leader_epochs, 2, leader_epoch=0)
    assert leo == 2

    # KIP-101 scenario 2 (divergence): A had m0, m1 (epoch 0, HW 2); B had only m0, became leader
    # in epoch 1 and wrote m2' at offset 1. A comes back as a follower: truncating to its HW (2)
    # would keep m1, which B never had. By epoch A truncates to 1, where B's epoch 1 starts.
    b_epochs = MemoryEpochCache([(0, 0), (1, 1)])
    a_epochs = MemoryEpochCache([(0, 0)])
    leo, asked = run_truncation(a_epochs, 2, 2, b_epochs, 2, leader_epoch=1)
    assert leo == 1 and asked == [0]


def test_kip279_truncation_loop_when_leader_lacks_epoch():
    """The follower led epoch 2 (offsets 5-7) that the leader never saw; the leader has epochs
    0 (0-3), 1 (4-5) and 3 (6-). Asked for 2, the leader answers (1, 6); the follower does not
    have epoch 1, so it cannot trust min(6, LEO): its offset 5 is epoch 2, the leader's is
    epoch 1. It cuts where its own epoch 0 ends (5), asks for 0, gets (0, 4) and cuts to 4."""
    leader_epochs = MemoryEpochCache([(0, 0), (1, 4), (3, 6)])
    follower_epochs = MemoryEpochCache([(0, 0), (2, 5)])
    first = truncation_for_epoch_answer(answer(leader_epochs, 2, 10), epochs=follower_epochs, log_end_offset=8,
                                        high_watermark=3)
    assert first == Truncation(5, completed=False, next_epoch=0)
    leo, asked = run_truncation(follower_epochs, 8, 3, leader_epochs, 10, leader_epoch=3)
    assert leo == 4 and asked == [2, 0]
    assert follower_epochs.entries == [(0, 0)]


def test_follower_without_epoch_at_or_below_answer_truncates_to_leader_end():
    follower_epochs = MemoryEpochCache([(3, 10)])
    decision = truncation_for_epoch_answer(EpochEndOffset(ErrorCode.none, 1, 12), epochs=follower_epochs,
                                           log_end_offset=20, high_watermark=15)
    assert decision == Truncation(10, completed=True)  # its first epoch starts at 10: nothing to keep past it


def test_leader_without_epochs_falls_back_to_hw():
    decision = truncation_for_epoch_answer(EpochEndOffset(ErrorCode.none), epochs=MemoryEpochCache([(0, 0)]),
                                           log_end_offset=20, high_watermark=15)
    assert decision == Truncation(15, completed=True)


def test_truncation_never_goes_beyond_own_leo():
    leader_epochs = MemoryEpochCache([(0, 0)])
    follower_epochs = MemoryEpochCache([(0, 0)])
    leo, _ = run_truncation(follower_epochs, 5, 5, leader_epochs, 50, leader_epoch=0)
    assert leo == 5


def test_follower_with_empty_epoch_cache_fetches_at_once():
    follower = FollowerPartition(2, 1, 7, 0, 0, MemoryEpochCache())
    assert follower.state is FollowerState.FETCHING
    assert follower.next_request() == SendFetch(1, 7, 0)
