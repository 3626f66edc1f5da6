from weir.replication import FollowerReplica

LAG = 30_000


def test_follower_at_leader_leo_is_caught_up():
    replica = FollowerReplica(2)
    replica.update_fetch_state(100, now_ms=1_000, leader_log_end_offset=100)
    assert replica.last_caught_up_time_ms == 1_000
    assert replica.is_caught_up(100, now_ms=1_000_000, replica_lag_time_max_ms=LAG)


def test_follower_that_reached_leader_leo_within_lag_time_is_caught_up():
    replica = FollowerReplica(2)
    replica.update_fetch_state(10, now_ms=1_000, leader_log_end_offset=50)   # leader LEO 50 then
    replica.update_fetch_state(50, now_ms=2_000, leader_log_end_offset=80)   # reached 50: caught up at 1_000
    assert replica.last_caught_up_time_ms == 1_000
    assert replica.is_caught_up(80, now_ms=1_000 + LAG, replica_lag_time_max_ms=LAG)
    assert not replica.is_caught_up(80, now_ms=1_001 + LAG, replica_lag_time_max_ms=LAG)


def test_follower_behind_the_previous_fetch_leo_does_not_count_as_caught_up():
    replica = FollowerReplica(2)
    replica.update_fetch_state(10, now_ms=1_000, leader_log_end_offset=50)
    replica.update_fetch_state(49, now_ms=2_000, leader_log_end_offset=80)
    assert replica.last_caught_up_time_ms == 0


def test_busy_leader_follower_keeps_being_caught_up():
    """Under steady produce the follower is never at the LEO, yet stays caught up."""
    replica = FollowerReplica(2)
    leader_leo = 0
    for step in range(1, 100):
        fetch_offset = leader_leo        # has what the leader had at the previous fetch
        leader_leo += 10                 # the leader appended meanwhile
        replica.update_fetch_state(fetch_offset, now_ms=step * 1_000, leader_log_end_offset=leader_leo)
        assert replica.is_caught_up(leader_leo, now_ms=step * 1_000, replica_lag_time_max_ms=LAG)
    assert replica.last_caught_up_time_ms == 98_000


def test_last_caught_up_time_never_moves_backwards():
    replica = FollowerReplica(2)
    replica.update_fetch_state(100, now_ms=5_000, leader_log_end_offset=100)
    replica.update_fetch_state(100, now_ms=4_000, leader_log_end_offset=100)  # a reordered clock reading
    assert replica.last_caught_up_time_ms == 5_000


def test_new_leadership_forgets_positions_and_trusts_isr_members():
    replica = FollowerReplica(2)
    replica.update_fetch_state(100, now_ms=5_000, leader_log_end_offset=100)
    replica.reset_for_leadership(9_000, in_isr=True)
    assert replica.log_end_offset == -1 and replica.last_caught_up_time_ms == 9_000
    replica.reset_for_leadership(9_000, in_isr=False)
    assert replica.last_caught_up_time_ms == 0
