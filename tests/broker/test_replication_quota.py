"""The replication throttle's rate and the throttled-replica lists (weir/replication/replication_quota.py)."""

from weir.replication.replication_quota import WINDOW_S, WINDOWS, ReplicationQuota, is_throttled


def test_the_rate_is_measured_over_the_windows_and_forgets_older_traffic():
    quota = ReplicationQuota(lambda: 1000)
    quota.record(900, now_s=0.0)
    assert not quota.is_exceeded(0.5)  # 900 B within the first second
    quota.record(300, now_s=0.6)
    assert quota.is_exceeded(0.7)  # 1,200 B in under a second
    assert not quota.is_exceeded(1.3)  # 1,200 B over 1.3 s
    assert not quota.is_exceeded(WINDOW_S * WINDOWS + 1)  # all of it forgotten


def test_the_limit_is_read_at_every_check():
    limit = [10**9]
    quota = ReplicationQuota(lambda: limit[0])
    quota.record(5000, now_s=0.0)
    assert not quota.is_exceeded(0.1)
    limit[0] = 1000  # a dynamic config change
    assert quota.is_exceeded(0.1)


def test_throttled_replica_lists():
    assert is_throttled("*", 3, 7)
    assert is_throttled("0:1, 3:7", 3, 7) and not is_throttled("0:1,3:7", 3, 1) and not is_throttled("", 0, 0)
