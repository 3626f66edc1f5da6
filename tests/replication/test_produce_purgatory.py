import pytest
from kio.schema.errors import ErrorCode

from weir.replication import (IsrChangeAccepted, LeaderPartition, ProduceCompletion, ProducePurgatory, PurgatoryFull,
                              ReplicationConfig, ReplicationStatus)

from .epoch_caches import MemoryEpochCache

LAG = 30_000
T0 = 1_000_000
TIMEOUT = 30_000


def make_leader(isr=(1, 2, 3), replicas=(1, 2, 3), min_isr=2):
    return LeaderPartition.become_leader(1, replicas, frozenset(isr), 5, 10, 0, 0, T0, MemoryEpochCache(),
                                         ReplicationConfig(min_isr, LAG))


def produce_acks_all(leader, purgatory, key, records, now_ms=T0, timeout_ms=TIMEOUT):
    """What the shell does for an acks=all produce: check, append, park."""
    error = leader.check_acks_all()
    if error is not ErrorCode.none:
        return ProduceCompletion(key, error)
    leader.on_leader_append(leader.log_end_offset + records, T0)
    return purgatory.park(key, leader.log_end_offset, leader.leader_epoch, now_ms + timeout_ms, leader.status(),
                          now_ms)


def test_acks_all_completes_when_hw_reaches_last_offset_plus_one():
    leader, purgatory = make_leader(), ProducePurgatory()
    assert produce_acks_all(leader, purgatory, "a", 5) is None        # offsets 0..4: needs HW >= 5
    assert produce_acks_all(leader, purgatory, "b", 5) is None        # offsets 5..9: needs HW >= 10
    leader.on_follower_fetch(2, 10, T0)
    leader.on_follower_fetch(3, 4, T0)
    assert purgatory.complete_ready(leader.status(), T0) == []
    leader.on_follower_fetch(3, 5, T0)
    assert purgatory.complete_ready(leader.status(), T0) == [ProduceCompletion("a", ErrorCode.none)]
    leader.on_follower_fetch(3, 10, T0)
    assert purgatory.complete_ready(leader.status(), T0) == [ProduceCompletion("b", ErrorCode.none)]
    assert len(purgatory) == 0


def test_acks_all_completes_at_once_when_leader_is_whole_isr():
    leader, purgatory = make_leader(isr=(1,), replicas=(1,), min_isr=1), ProducePurgatory()
    assert produce_acks_all(leader, purgatory, "a", 3) == ProduceCompletion("a", ErrorCode.none)


def test_acks_all_rejected_before_append_when_isr_below_min_insync():
    leader, purgatory = make_leader(isr=(1,)), ProducePurgatory()
    assert produce_acks_all(leader, purgatory, "a", 3) == ProduceCompletion("a", ErrorCode.not_enough_replicas)
    assert leader.log_end_offset == 0 and len(purgatory) == 0


def test_acks_all_after_append_error_when_isr_shrank():
    leader, purgatory = make_leader(isr=(1, 2), min_isr=2), ProducePurgatory()
    assert produce_acks_all(leader, purgatory, "a", 3, timeout_ms=10 * LAG) is None
    proposal = leader.maybe_shrink_isr(T0 + LAG + 1)   # 2 never fetched
    assert purgatory.complete_ready(leader.status(), T0 + LAG + 1) == []   # pending: 2 still counts
    leader.on_isr_change_result(IsrChangeAccepted(5, 11, proposal.new_isr), T0)
    assert purgatory.complete_ready(leader.status(), T0 + LAG + 2) == [
        ProduceCompletion("a", ErrorCode.not_enough_replicas_after_append)]


def test_acks_all_after_append_error_when_hw_reached_but_isr_below_min():
    purgatory = ProducePurgatory()
    purgatory.park("a", 5, 5, T0 + TIMEOUT, ReplicationStatus(5, 0, False), T0)
    assert purgatory.complete_ready(ReplicationStatus(5, 5, True), T0) == [
        ProduceCompletion("a", ErrorCode.not_enough_replicas_after_append)]


def test_acks_all_shrink_keeping_min_isr_completes_without_error():
    leader, purgatory = make_leader(isr=(1, 2, 3), min_isr=2), ProducePurgatory()
    produce_acks_all(leader, purgatory, "a", 3, timeout_ms=10 * LAG)
    leader.on_follower_fetch(2, 3, T0 + LAG)
    proposal = leader.maybe_shrink_isr(T0 + LAG + 1)
    leader.on_isr_change_result(IsrChangeAccepted(5, 11, proposal.new_isr), T0)
    assert purgatory.complete_ready(leader.status(), T0 + LAG + 1) == [ProduceCompletion("a", ErrorCode.none)]


def test_acks_all_times_out():
    leader, purgatory = make_leader(), ProducePurgatory()
    produce_acks_all(leader, purgatory, "a", 3, now_ms=T0)
    produce_acks_all(leader, purgatory, "b", 3, now_ms=T0 + 100)
    assert purgatory.next_deadline_ms() == T0 + TIMEOUT
    assert purgatory.complete_ready(leader.status(), T0 + TIMEOUT - 1) == []
    assert purgatory.complete_ready(leader.status(), T0 + TIMEOUT) == [
        ProduceCompletion("a", ErrorCode.request_timed_out)]
    assert purgatory.next_deadline_ms() == T0 + TIMEOUT + 100


def test_acks_all_success_beats_timeout_in_the_same_poll():
    purgatory = ProducePurgatory()
    purgatory.park("a", 5, 5, T0 + 10, ReplicationStatus(5, 0, False), T0)
    assert purgatory.complete_ready(ReplicationStatus(5, 5, False), T0 + 10) == [ProduceCompletion("a", ErrorCode.none)]


def test_acks_all_answers_possibly_persisted_when_leadership_moves():
    """The batch was appended: REQUEST_TIMED_OUT, never NOT_LEADER_OR_FOLLOWER (which librdkafka
    resends even with retries=0, writing the record twice)."""
    leader, purgatory = make_leader(), ProducePurgatory()
    produce_acks_all(leader, purgatory, "a", 3)
    # became a follower: the shell reports "no leader epoch"
    status = ReplicationStatus(None, leader.high_watermark, False)
    assert purgatory.complete_ready(status, T0) == [ProduceCompletion("a", ErrorCode.request_timed_out)]


def test_acks_all_answers_possibly_persisted_when_leader_epoch_changes():
    leader, purgatory = make_leader(), ProducePurgatory()
    produce_acks_all(leader, purgatory, "a", 3)
    leader.on_partition_state(6, 11, frozenset({1, 2, 3}), (1, 2, 3), T0, MemoryEpochCache())
    produce_acks_all(leader, purgatory, "b", 3)       # parked under epoch 6: unaffected
    assert purgatory.complete_ready(leader.status(), T0) == [ProduceCompletion("a", ErrorCode.request_timed_out)]
    assert "b" in purgatory


def test_fail_all_answers_everything():
    leader, purgatory = make_leader(), ProducePurgatory()
    produce_acks_all(leader, purgatory, "a", 3)
    produce_acks_all(leader, purgatory, "b", 3)
    assert {c.key for c in purgatory.fail_all()} == {"a", "b"}
    assert len(purgatory) == 0 and purgatory.next_deadline_ms() is None


def test_purgatory_is_bounded():
    purgatory = ProducePurgatory(max_parked=2)
    status = ReplicationStatus(5, 0, False)
    purgatory.park("a", 1, 5, T0 + 1, status, T0)
    purgatory.park("b", 2, 5, T0 + 1, status, T0)
    with pytest.raises(PurgatoryFull):
        purgatory.park("c", 3, 5, T0 + 1, status, T0)


def test_purgatory_heaps_stay_bounded_under_churn():
    purgatory = ProducePurgatory(max_parked=10)
    for i in range(1_000):
        purgatory.park(i, 10**9, 5, T0 + 10**9, ReplicationStatus(5, 0, False), T0)
        purgatory.complete_ready(ReplicationStatus(6 if i % 2 else 5, 0, False), T0)
        purgatory.complete_ready(ReplicationStatus(5, 0, False), T0)
    assert len(purgatory._by_offset) < 200
