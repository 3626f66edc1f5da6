"""weir sim's brokers forget idle producers as the real broker's periodic maintenance does
(ReplicaManager.maintain): every log.retention.check.interval.ms each partition, leader or
follower, runs production's `Partition.expire_producers` with producer.id.expiration.ms, against
the timestamps the simulated producers stamped on their records."""

from weir.replication.partition import Partition
from weir.sim.runner import run_seed
from weir.sim.settings import SimSettings


def test_leaders_and_followers_forget_exactly_the_producers_idle_for_the_expiration(monkeypatch):
    settings = SimSettings()
    forgotten = {"leader": 0, "follower": 0}
    kept_recent = 0
    expire_producers = Partition.expire_producers

    def expire(self, now_ms, expiration_ms):
        nonlocal kept_recent
        assert expiration_ms == settings.producer_id_expiration_ms
        idle = {pid: now_ms - e.last_timestamp for pid, e in self.producers.producers.items()}
        expire_producers(self, now_ms, expiration_ms)
        gone = idle.keys() - self.producers.producers.keys()
        assert all(idle[pid] >= expiration_ms for pid in gone)
        assert all(idle[pid] < expiration_ms for pid in idle.keys() - gone)
        kept_recent += len(idle) - len(gone)
        forgotten["leader" if self.leader is not None else "follower"] += len(gone)

    monkeypatch.setattr(Partition, "expire_producers", expire)
    result = run_seed(0, settings, schedule=[])
    assert result.ok, result.violations
    assert forgotten["leader"] > 0 and forgotten["follower"] > 0 and kept_recent > 0
