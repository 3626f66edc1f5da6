"""Random interleavings of appends, follower fetches, time passing, ISR timers, controller answers
and leader-epoch bumps, with acks=all produces parked along the way. After every step:
the HW never goes backwards, never exceeds the leader's LEO or the LEO of any maximal-ISR member
(whose LEO is known), moves only while the committed ISR meets the minimum, and every acks=all
produce answered successfully is below the HW."""

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from weir.replication import IsrChangeAccepted, IsrChangeRejected, LeaderPartition, ProducePurgatory, ReplicationConfig

from .epoch_caches import MemoryEpochCache

LAG = 1_000
FOLLOWERS = (2, 3, 4)

steps = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 5), st.booleans()),
    st.tuples(st.just("fetch"), st.sampled_from(FOLLOWERS), st.floats(0, 1)),
    st.tuples(st.just("tick"), st.integers(0, 1_500)),
    st.tuples(st.just("shrink")),
    st.tuples(st.just("controller"), st.sampled_from(["accept", "not_attempted", "fenced", "retry", "other_epoch"])),
    st.tuples(st.just("new_state"), st.booleans()),
), max_size=120)


@settings(max_examples=300, deadline=None)
@given(steps=steps, min_isr=st.integers(1, 4), initial_isr=st.sets(st.sampled_from(FOLLOWERS)))
def test_hw_monotonic_and_bounded_by_maximal_isr(steps, min_isr, initial_isr):
    now = 0
    epochs = MemoryEpochCache()
    leader = LeaderPartition.become_leader(1, (1, *FOLLOWERS), frozenset({1, *initial_isr}), 0, 0, 0, 0, now,
                                           epochs, ReplicationConfig(min_isr, LAG))
    purgatory = ProducePurgatory()
    follower_leo = {f: 0 for f in FOLLOWERS}   # followers never lose data here: their LEOs only grow
    in_flight = None
    keys = 0
    last_hw = leader.high_watermark
    parked_required = {}

    for step in steps:
        was_under_min = leader.is_under_min_isr
        kind = step[0]
        if kind == "append":
            _, records, acks_all = step
            if acks_all and leader.check_acks_all() is not ErrorCode.none:
                assert leader.is_under_min_isr
                continue
            leader.on_leader_append(leader.log_end_offset + records, now)
            if acks_all:
                keys += 1
                parked_required[keys] = leader.log_end_offset
                done = purgatory.park(keys, leader.log_end_offset, leader.leader_epoch, now + 3 * LAG,
                                      leader.status(), now)
                if done is not None:
                    assert done.error is not ErrorCode.none or leader.high_watermark >= leader.log_end_offset
        elif kind == "fetch":
            _, follower, fraction = step
            lo = follower_leo[follower]
            offset = lo + int((leader.log_end_offset - lo) * fraction)
            follower_leo[follower] = offset
            outcome = leader.on_follower_fetch(follower, offset, now)
            assert outcome.error is ErrorCode.none
            if outcome.alter_partition is not None:
                assert in_flight is None, "two ISR changes in flight"
                in_flight = outcome.alter_partition
        elif kind == "tick":
            now += step[1]
        elif kind == "shrink":
            proposal = leader.maybe_shrink_isr(now)
            if proposal is not None:
                assert in_flight is None, "two ISR changes in flight"
                in_flight = proposal
        elif kind == "controller" and in_flight is not None:
            answer = step[1]
            if answer == "accept":
                leader.on_isr_change_result(IsrChangeAccepted(in_flight.leader_epoch, in_flight.partition_epoch + 1,
                                                              in_flight.new_isr), now)
                in_flight = None
            elif answer == "not_attempted":
                leader.on_isr_change_result(IsrChangeRejected(ErrorCode.operation_not_attempted), now)
                in_flight = None
            elif answer == "fenced":
                leader.on_isr_change_result(IsrChangeRejected(ErrorCode.fenced_leader_epoch), now)
            elif answer == "retry":
                assert leader.on_isr_change_result(IsrChangeRejected(ErrorCode.request_timed_out), now).retry == in_flight
            else:
                leader.on_isr_change_result(IsrChangeAccepted(leader.leader_epoch + 1, 99, in_flight.new_isr), now)
        elif kind == "new_state":
            # the controller publishes new state: the committed ISR (or the proposal, if it won),
            # with a new partition epoch, and sometimes a new leader epoch
            _, bump_leader_epoch = step
            isr = in_flight.new_isr if in_flight is not None else leader.committed_isr
            leader.on_partition_state(leader.leader_epoch + bump_leader_epoch, leader.partition_epoch + 1, isr,
                                      leader.replicas, now, epochs)
            in_flight = None

        # ---- invariants after every step
        leader.check_invariants()
        assert leader.high_watermark >= last_hw, "HW went backwards"
        if was_under_min and leader.is_under_min_isr:
            assert leader.high_watermark == last_hw, "HW moved while the committed ISR was below the minimum"
        for member in leader.maximal_isr - {1}:
            known = leader.followers[member].log_end_offset
            if known >= 0:
                assert leader.high_watermark <= known
        assert leader.high_watermark <= leader.log_end_offset
        assert (in_flight is None) == (leader.pending is None)
        for completion in purgatory.complete_ready(leader.status(), now):
            if completion.error is ErrorCode.none:
                assert parked_required[completion.key] <= leader.high_watermark
        last_hw = leader.high_watermark
