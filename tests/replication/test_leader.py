import pytest
from kio.schema.errors import ErrorCode

from weir.replication import IsrChangeAccepted, IsrChangeRejected, LeaderPartition, ReplicationConfig

from .epoch_caches import MemoryEpochCache

LAG = 30_000
T0 = 1_000_000


def make_leader(isr=(1, 2, 3), replicas=(1, 2, 3), min_isr=2, leo=0, hw=0, epoch=5, partition_epoch=10,
                epochs=None):
    return LeaderPartition.become_leader(
        1, replicas, frozenset(isr), epoch, partition_epoch, leo, hw, T0,
        epochs if epochs is not None else MemoryEpochCache(), ReplicationConfig(min_isr, LAG))


def accept(leader, proposal, now_ms=T0):
    return leader.on_isr_change_result(
        IsrChangeAccepted(proposal.leader_epoch, proposal.partition_epoch + 1, proposal.new_isr), now_ms)


def test_become_leader_records_epoch_start_at_its_leo():
    epochs = MemoryEpochCache([(3, 0)])
    leader = make_leader(leo=42, hw=40, epochs=epochs)
    assert epochs.entries == [(3, 0), (5, 42)]
    assert leader.leader_epoch_start_offset == 42


def test_hw_is_min_leo_over_leader_and_isr():
    leader = make_leader()
    leader.on_leader_append(10, T0)
    assert leader.high_watermark == 0
    leader.on_follower_fetch(2, 10, T0)
    assert leader.high_watermark == 0  # replica 3 has not fetched
    outcome = leader.on_follower_fetch(3, 7, T0)
    assert outcome.high_watermark_advanced and leader.high_watermark == 7
    leader.on_follower_fetch(3, 10, T0)
    assert leader.high_watermark == 10


def test_hw_follows_leo_when_leader_is_whole_isr():
    leader = make_leader(isr=(1,), replicas=(1,), min_isr=1)
    assert leader.on_leader_append(5, T0) and leader.high_watermark == 5


def test_hw_never_moves_backwards():
    leader = make_leader(isr=(1, 2), replicas=(1, 2), leo=0)
    leader.on_leader_append(10, T0)
    leader.on_follower_fetch(2, 10, T0)
    assert leader.high_watermark == 10
    # the follower restarts having lost unflushed data and fetches from below the HW
    leader.on_follower_fetch(2, 4, T0 + 1)
    assert leader.high_watermark == 10
    # a new leader epoch forgets follower positions: the HW stays
    leader.on_partition_state(6, 11, frozenset({1, 2}), (1, 2), T0 + 2, MemoryEpochCache())
    assert leader.followers[2].log_end_offset == -1
    assert leader.high_watermark == 10


def test_lagging_follower_leaves_isr_after_replica_lag_time_max_ms():
    leader = make_leader()
    leader.on_leader_append(10, T0)
    leader.on_follower_fetch(2, 10, T0 + 1_000)
    leader.on_follower_fetch(3, 5, T0 + 1_000)   # behind, and never reaches the LEO again
    leader.on_follower_fetch(3, 5, T0 + 2_000)
    assert leader.maybe_shrink_isr(T0 + LAG) is None  # caught up "at T0" by benefit of the doubt
    proposal = leader.maybe_shrink_isr(T0 + LAG + 1)
    assert proposal is not None and not proposal.is_expansion
    assert proposal.new_isr == {1, 2}
    assert (proposal.leader_epoch, proposal.partition_epoch) == (5, 10)


def test_follower_at_leader_leo_stays_in_isr_however_long_since_it_fetched():
    leader = make_leader()
    leader.on_follower_fetch(2, 0, T0)
    leader.on_follower_fetch(3, 0, T0)
    assert leader.maybe_shrink_isr(T0 + 10 * LAG) is None


def test_isr_change_waits_for_controller_and_one_change_in_flight():
    leader = make_leader()
    leader.on_leader_append(10, T0)
    leader.on_follower_fetch(2, 10, T0 + LAG)
    proposal = leader.maybe_shrink_isr(T0 + LAG + 1)
    assert proposal.new_isr == {1, 2}
    assert leader.committed_isr == {1, 2, 3}      # nothing changes until the controller says so
    assert leader.maybe_shrink_isr(T0 + 5 * LAG) is None   # one change in flight
    leader.on_follower_fetch(3, 10, T0 + 5 * LAG)
    assert leader.maybe_expand_isr(3) is None
    outcome = accept(leader, proposal)
    assert leader.committed_isr == {1, 2} and leader.partition_epoch == 11 and leader.pending is None
    assert not outcome.awaiting_metadata and outcome.retry is None
    # free again: replica 3 (LEO 10 >= HW, >= epoch start) may now rejoin
    leader.on_follower_fetch(3, 10, T0 + 5 * LAG + 1)
    assert leader.pending is not None and leader.pending.new_isr == {1, 2, 3}


def test_maximal_isr_used_for_hw_while_shrink_pending():
    leader = make_leader()
    leader.on_leader_append(10, T0)
    leader.on_follower_fetch(3, 4, T0)
    leader.on_follower_fetch(2, 10, T0 + LAG + 1)
    assert leader.high_watermark == 4
    proposal = leader.maybe_shrink_isr(T0 + LAG + 1)
    assert leader.maximal_isr == {1, 2, 3}
    assert not leader.maybe_increment_high_watermark(T0 + LAG + 1) and leader.high_watermark == 4  # 3 still counts
    assert accept(leader, proposal, T0 + LAG + 1).high_watermark_advanced
    assert leader.high_watermark == 10


def test_maximal_isr_used_for_hw_while_expand_pending():
    leader = make_leader(isr=(1, 2))
    leader.on_leader_append(10, T0)
    leader.on_follower_fetch(2, 10, T0)
    assert leader.high_watermark == 10
    outcome = leader.on_follower_fetch(3, 10, T0)          # joins: proposal in flight
    assert outcome.alter_partition.new_isr == {1, 2, 3}
    leader.on_leader_append(20, T0)
    leader.on_follower_fetch(2, 20, T0)
    assert leader.high_watermark == 10                      # 3 already counts, though not committed
    leader.on_follower_fetch(3, 20, T0)
    assert leader.high_watermark == 20


def test_hw_does_not_move_while_isr_below_min_insync():
    leader = make_leader(isr=(1, 2), min_isr=2)
    leader.on_leader_append(10, T0)
    leader.on_follower_fetch(2, 3, T0)
    assert leader.high_watermark == 3
    proposal = leader.maybe_shrink_isr(T0 + LAG + 1)
    accept(leader, proposal)
    assert leader.committed_isr == {1} and leader.is_under_min_isr
    assert not leader.on_leader_append(20, T0) and leader.high_watermark == 3
    # 2 catches up and rejoins; the HW moves only once the controller commits the expansion
    outcome = leader.on_follower_fetch(2, 20, T0 + LAG + 2)
    assert outcome.alter_partition.new_isr == {1, 2}
    assert leader.high_watermark == 3
    assert accept(leader, outcome.alter_partition).high_watermark_advanced
    assert leader.high_watermark == 20


def test_effective_min_isr_is_capped_by_replication_factor():
    leader = make_leader(isr=(1,), replicas=(1,), min_isr=2)
    assert leader.check_acks_all() is ErrorCode.none
    assert leader.on_leader_append(3, T0) and leader.high_watermark == 3


def test_follower_rejoins_when_leo_reaches_hw_and_epoch_start():
    leader = make_leader(isr=(1, 2), leo=100, hw=90)           # epoch 5 starts at 100; 2 not heard from
    assert leader.high_watermark == 90
    assert leader.on_follower_fetch(3, 95, T0).alter_partition is None   # >= HW, < epoch start
    assert leader.on_follower_fetch(3, 99, T0).alter_partition is None
    proposal = leader.on_follower_fetch(3, 100, T0).alter_partition
    assert proposal is not None and proposal.is_expansion and proposal.new_isr == {1, 2, 3}


def test_follower_below_hw_does_not_rejoin():
    leader = make_leader(isr=(1, 2))
    leader.on_leader_append(50, T0)
    leader.on_follower_fetch(2, 50, T0)
    assert leader.on_follower_fetch(3, 49, T0).alter_partition is None
    assert leader.on_follower_fetch(3, 50, T0).alter_partition is not None


@pytest.mark.parametrize("error", [ErrorCode.operation_not_attempted, ErrorCode.ineligible_replica])
def test_isr_change_not_attempted_reverts_to_committed_state(error):
    leader = make_leader()
    proposal = leader.maybe_shrink_isr(T0 + LAG + 1)
    outcome = leader.on_isr_change_result(IsrChangeRejected(error), T0)
    assert leader.pending is None and leader.committed_isr == {1, 2, 3}
    assert outcome.retry is None and not outcome.awaiting_metadata
    assert leader.maybe_shrink_isr(T0 + LAG + 2) == proposal


@pytest.mark.parametrize("error", [ErrorCode.fenced_leader_epoch, ErrorCode.invalid_update_version])
def test_fenced_isr_change_waits_for_new_partition_state(error):
    leader = make_leader()
    leader.maybe_shrink_isr(T0 + LAG + 1)
    outcome = leader.on_isr_change_result(IsrChangeRejected(error), T0)
    assert outcome.awaiting_metadata and outcome.retry is None
    assert leader.maximal_isr == {1, 2, 3} and leader.pending is not None
    assert leader.maybe_shrink_isr(T0 + LAG + 2) is None
    # the controller's newer state arrives (it shrank the ISR itself, say)
    leader.on_partition_state(5, 12, frozenset({1, 2}), (1, 2, 3), T0 + LAG + 3, MemoryEpochCache())
    assert leader.committed_isr == {1, 2} and leader.partition_epoch == 12
    assert leader.pending is None and not leader.awaiting_metadata


def test_accepted_isr_change_for_another_leader_epoch_is_not_committed():
    leader = make_leader()
    proposal = leader.maybe_shrink_isr(T0 + LAG + 1)
    outcome = leader.on_isr_change_result(IsrChangeAccepted(6, 11, proposal.new_isr), T0)
    assert outcome.awaiting_metadata and leader.committed_isr == {1, 2, 3}


def test_other_isr_change_errors_are_retried_with_the_same_proposal():
    leader = make_leader()
    proposal = leader.maybe_shrink_isr(T0 + LAG + 1)
    outcome = leader.on_isr_change_result(IsrChangeRejected(ErrorCode.request_timed_out), T0)
    assert outcome.retry == proposal and leader.pending == proposal


def test_stale_partition_state_is_ignored():
    leader = make_leader()
    leader.on_partition_state(4, 99, frozenset({1}), (1, 2, 3), T0, MemoryEpochCache())
    leader.on_partition_state(5, 10, frozenset({1}), (1, 2, 3), T0, MemoryEpochCache())
    assert leader.committed_isr == {1, 2, 3} and leader.leader_epoch == 5


def test_new_leader_epoch_records_epoch_start_and_resets_followers():
    epochs = MemoryEpochCache()
    leader = make_leader(epochs=epochs)
    leader.on_leader_append(30, T0)
    leader.on_follower_fetch(2, 30, T0)
    leader.maybe_shrink_isr(T0 + LAG + 1)
    leader.on_partition_state(6, 11, frozenset({1, 2}), (1, 2, 3), T0 + LAG + 2, epochs)
    assert epochs.entries == [(5, 0), (6, 30)]
    assert leader.leader_epoch == 6 and leader.leader_epoch_start_offset == 30
    assert leader.pending is None and leader.followers[2].log_end_offset == -1


def test_acks_all_rejected_before_append_when_isr_below_min_insync():
    leader = make_leader(isr=(1, 2), min_isr=2)
    assert leader.check_acks_all() is ErrorCode.none
    accept(leader, leader.maybe_shrink_isr(T0 + LAG + 1))
    assert leader.check_acks_all() is ErrorCode.not_enough_replicas


def test_acks_all_check_uses_committed_isr_not_pending():
    leader = make_leader(isr=(1, 2), min_isr=2)
    leader.maybe_shrink_isr(T0 + LAG + 1)                # shrink to {1} in flight
    assert leader.check_acks_all() is ErrorCode.none     # not committed yet
    accept(leader, leader.pending)
    leader.on_follower_fetch(2, 0, T0 + LAG + 2)         # expansion back to {1, 2} in flight
    assert leader.pending is not None
    assert leader.check_acks_all() is ErrorCode.not_enough_replicas


def test_fetch_from_unknown_replica_or_beyond_leo_is_refused():
    leader = make_leader()
    leader.on_leader_append(10, T0)
    assert leader.on_follower_fetch(9, 0, T0).error is ErrorCode.not_leader_or_follower
    assert leader.on_follower_fetch(2, 11, T0).error is ErrorCode.offset_out_of_range
    assert leader.followers[2].log_end_offset == -1


def test_a_fetch_of_an_older_incarnation_is_refused_and_epochs_go_into_proposals():
    """KIP-903: follower 3 restarted (broker epoch 700 -> 900) without its tail; a late fetch of
    the old process, with its old, higher offset, must neither move its LEO nor re-add it."""
    leader = make_leader(isr=(1, 2), leo=100, hw=100, epoch=5)
    assert leader.on_follower_fetch(3, 40, T0, broker_epoch=900).alter_partition is None  # the new one, behind
    late = leader.on_follower_fetch(3, 100, T0, broker_epoch=700)
    assert late.error is ErrorCode.not_leader_or_follower and late.alter_partition is None
    assert leader.followers[3].log_end_offset == 40 and leader.pending is None
    proposal = leader.on_follower_fetch(3, 100, T0, broker_epoch=900).alter_partition
    assert proposal.new_isr == {1, 2, 3} and dict(proposal.broker_epochs)[3] == 900


def test_a_member_that_comes_back_without_its_tail_is_refused_until_it_leaves_the_isr():
    """Found by `weir sim` once it ran the broker's glue: replica 3 restarted having lost records
    it had shown the leader; counted in the ISR at its lower LEO, it would sit below the HW (and
    could be elected without committed records). The leader refuses it until the ISR drops it."""
    leader = make_leader()
    leader.on_leader_append(10, T0)
    leader.on_follower_fetch(2, 10, T0, broker_epoch=50)
    leader.on_follower_fetch(3, 10, T0, broker_epoch=60)
    assert leader.high_watermark == 10
    assert leader.on_follower_fetch(3, 4, T0 + 1, broker_epoch=70).error == ErrorCode.not_leader_or_follower
    leader.on_leader_append(12, T0)
    shrunk_then_taken(leader, leo=12, refused_offset=4)


def test_a_member_below_the_hw_of_a_new_leadership_is_refused_until_it_leaves_the_isr():
    """Found by a weir sim soak (seed 703215): replica 3 crashed losing unflushed records, then a
    new leader took over with the ISR still naming it (the controller crashed before it saw the
    bounce). The new leadership had seen no LEO of it, so the test above could not tell; but no
    member of the ISR is ever below the HW, so its fetch at 36 under an HW of 43 says the same."""
    leader = make_leader(leo=50, hw=43)
    assert leader.on_follower_fetch(3, 36, T0, broker_epoch=70).error == ErrorCode.not_leader_or_follower
    leader.check_invariants()
    assert leader.on_follower_fetch(2, 43, T0, broker_epoch=50).error == ErrorCode.none, "at the HW is fine"
    shrunk_then_taken(leader, leo=50, refused_offset=36)


def shrunk_then_taken(leader, leo: int, refused_offset: int) -> None:
    """Replica 2 keeps up to `leo` and replica 3 does not fetch: the shrink takes 3 out of the ISR,
    and then its fetch at `refused_offset` is taken."""
    leader.on_follower_fetch(2, leo, T0 + LAG, broker_epoch=50)
    proposal = leader.maybe_shrink_isr(T0 + LAG + 1)
    assert proposal.new_isr == {1, 2}
    accept(leader, proposal)
    assert leader.on_follower_fetch(3, refused_offset, T0 + LAG + 2, broker_epoch=70).error == ErrorCode.none
    leader.check_invariants()


def test_a_quiet_follower_fetch_is_exactly_what_on_follower_fetch_would_do():
    """The fetch-session short way (`on_quiet_follower_fetch`) agrees with the full one whenever it
    takes a fetch (the follower's state, the HW, the ISR, no proposal) and leaves everything as it
    was when it does not, over random histories of appends, fetches, ISR changes accepted, refused
    and pending, min.insync.replicas changes and new leader epochs. (Partition.on_follower_fetch
    takes the follower's log start as it does here.)"""
    import copy
    import random

    def state(replica):
        return {name: getattr(replica, name) for name in replica.__slots__}

    def settle(proposal):  # the controller accepts, refuses, or has not answered yet
        if proposal is not None and (answer := rng.random()) < 0.6:
            accept(leader, proposal)
        elif proposal is not None and answer < 0.8:
            leader.on_isr_change_result(IsrChangeRejected(ErrorCode.ineligible_replica), T0)
    rng = random.Random(11)
    taken = 0
    for _ in range(3000):
        leader = make_leader(isr=rng.choice([(1, 2, 3), (1, 2), (1,)]), min_isr=rng.choice([1, 2, 3]), leo=0, hw=0)
        now = T0
        for _ in range(rng.randint(0, 30)):
            now += rng.randint(0, 20_000)
            action = rng.random()
            if action < 0.3:
                leader.on_leader_append(leader.log_end_offset + rng.randint(1, 3), T0)
            elif action < 0.75:
                replica = rng.choice([2, 3])
                offset = rng.randint(max(0, leader.followers[replica].log_end_offset), leader.log_end_offset)
                settle(leader.on_follower_fetch(replica, offset, now, rng.choice([10, 11])).alter_partition)
            elif action < 0.85:
                settle(leader.maybe_shrink_isr(now))
            elif action < 0.93:  # min.insync.replicas changed: the HW may stay frozen below the LEO
                leader.config = ReplicationConfig(rng.choice([1, 2, 3]), LAG)
            else:  # a new leader epoch, same ISR: the followers' positions are forgotten
                leader.on_partition_state(leader.leader_epoch + 1, leader.partition_epoch + 1, leader.committed_isr,
                                          leader.replicas, now, MemoryEpochCache())
        replica = rng.choice([2, 3])
        offset = rng.choice([leader.log_end_offset, leader.followers[replica].log_end_offset, leader.high_watermark])
        if offset < 0:
            continue
        full, before = copy.deepcopy(leader), copy.deepcopy(leader)
        incarnation = rng.choice([10, 11, -1])  # of the follower's broker (KIP-903): 10 may be stale; -1 unsaid
        log_start = rng.choice([-1, 0, leader.followers[replica].log_start_offset + 1])
        if leader.on_quiet_follower_fetch(replica, offset, now + 1, incarnation, log_start):
            taken += 1
            outcome = full.on_follower_fetch(replica, offset, now + 1, incarnation)
            full.followers[replica].log_start_offset = max(full.followers[replica].log_start_offset, log_start)
            assert (outcome.error, outcome.high_watermark_advanced, outcome.alter_partition) == (
                ErrorCode.none, False, None)
            assert state(full.followers[replica]) == state(leader.followers[replica])
            assert (full.high_watermark, full.committed_isr, full.pending) == (
                leader.high_watermark, leader.committed_isr, leader.pending)
        else:
            assert state(before.followers[replica]) == state(leader.followers[replica])
    assert taken > 25, "the histories reach quiet fetches often enough to mean something"


def test_a_fetch_at_the_leo_while_the_hw_lags_it_takes_the_full_way():
    """min.insync.replicas lowered under a leader whose HW it had frozen: the next follower fetch
    at the LEO must advance the HW, so the short way declines it."""
    leader = make_leader(isr=(1, 2), min_isr=3)
    leader.on_leader_append(10, T0)
    leader.on_follower_fetch(2, 10, T0)
    assert leader.high_watermark == 0  # the committed ISR is below min.insync.replicas
    leader.config = ReplicationConfig(2, LAG)
    assert not leader.on_quiet_follower_fetch(2, 10, T0 + 1)
    assert leader.on_follower_fetch(2, 10, T0 + 1).high_watermark_advanced and leader.high_watermark == 10


def steady_produce_rounds(leader, rounds, follower=2, records=5, interval_ms=10):
    """The leader appends between every two fetches of `follower`, which fetches at the LEO the
    leader had when it answered the previous fetch; yields each fetch's outcome."""
    fetch_offset = 0
    for i in range(rounds):
        now = T0 + i * interval_ms
        leader.on_leader_append(leader.log_end_offset + records, now)
        outcome = leader.on_follower_fetch(follower, fetch_offset, now)
        fetch_offset = leader.log_end_offset
        yield outcome


def test_a_follower_catching_up_under_steady_produce_rejoins_the_isr():
    # Kafka's maybeIncrementLeaderHW waits for a caught-up follower outside the ISR
    # (shouldWaitForReplicaToJoinIsr): else the HW is always the leader's LEO, one append ahead
    # of the follower, and the follower never reaches it
    leader = make_leader(isr=(1,), replicas=(1, 2), min_isr=1)
    proposals = [o.alter_partition for o in steady_produce_rounds(leader, 20) if o.alter_partition]
    assert proposals and proposals[0].new_isr == {1, 2} and proposals[0].is_expansion
    leader.check_invariants()


def test_only_a_live_follower_holds_the_hw_back_or_joins_the_isr():
    leader = make_leader(isr=(1,), replicas=(1, 2), min_isr=1)
    leader.on_live_brokers(frozenset({1}), T0)  # 2's registration is gone (its session expired)
    for outcome in steady_produce_rounds(leader, 20):
        assert outcome.alter_partition is None
        assert leader.high_watermark == leader.log_end_offset
    leader.on_follower_fetch(2, leader.log_end_offset, T0 + 1_000)
    assert leader.pending is None  # at the LEO, but not alive: no proposal (KIP-841)


def test_a_follower_that_stops_holding_the_hw_back_releases_it():
    leader = make_leader(isr=(1,), replicas=(1, 2), min_isr=1)
    leader.on_leader_append(10, T0)
    leader.on_follower_fetch(2, 10, T0)  # caught up, not yet in the ISR
    leader.pending = None  # the proposal is refused
    leader.on_leader_append(20, T0 + 1)
    assert leader.high_watermark == 10  # waits for 2
    assert not leader.maybe_increment_high_watermark(T0 + LAG)
    assert leader.maybe_increment_high_watermark(T0 + LAG + 1) and leader.high_watermark == 20  # 2 fell behind
    leader.on_leader_append(30, T0 + LAG + 2)
    leader.on_follower_fetch(2, 30, T0 + LAG + 2)  # caught up again
    leader.pending = None
    leader.on_leader_append(40, T0 + LAG + 3)
    assert leader.high_watermark == 30  # waits for 2 again
    assert leader.on_live_brokers(frozenset({1}), T0 + LAG + 4) and leader.high_watermark == 40  # 2 is gone


def test_a_replica_a_reassignment_adds_can_fetch_though_its_state_came_first():
    """Found by a weir sim soak (reassign seed 702731): the leader took the reassignment's state
    while its view still had the old assignment, and the only states after it were its own ISR
    changes, stale by then; replica 4 was refused for good and the reassignment never ended. A
    stale state's replicas are now taken, unless they drop an ISR member (that waits for a state
    that removes it from the ISR first)."""
    leader = make_leader(leo=10, hw=10)
    assert leader.on_follower_fetch(4, 0, T0).error == ErrorCode.not_leader_or_follower
    assert not leader.on_partition_state(5, 10, frozenset({1, 2, 3}), (1, 2, 3, 4), T0, MemoryEpochCache())
    assert leader.on_follower_fetch(4, 10, T0).error == ErrorCode.none
    leader.on_partition_state(5, 10, frozenset({1, 2, 3}), (1, 2, 4), T0, MemoryEpochCache())
    assert leader.replicas == (1, 2, 3, 4), "3 is in the ISR: not dropped by a stale state"
    leader.check_invariants()
