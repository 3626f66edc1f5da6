"""weir sim's leaders hold fetches in production's ParkedFetch: a follower's or a consumer's fetch
that finds no records parks; news wakes it (records; for a consumer, a new HW too), and it is read
again (`Partition.answer_fetch(first=False)`: a follower is not timed again, a consumer is served
only while leadership is proven); when its max wait passes it is answered as it is."""

from weir.broker.fetch_waiters import ParkedFetch
from weir.replication.partition import Partition
from weir.sim.runner import run_seed


def test_fetches_are_parked_read_again_on_news_and_answered_at_max_wait(monkeypatch):
    seen = {"woken": 0, "expired": 0, "read again": 0, "consumer read again": 0}

    def counted(name, original):
        def wrapper(self, *args, **kwargs):
            seen[name] += 1
            return original(self, *args, **kwargs)
        return wrapper

    answer_fetch = Partition.answer_fetch

    def answer(self, fetch_offset, current_leader_epoch, replica_id, now_ms, *, first=True, **kwargs):
        if not first:
            seen["read again" if replica_id >= 0 else "consumer read again"] += 1
        return answer_fetch(self, fetch_offset, current_leader_epoch, replica_id, now_ms, first=first, **kwargs)

    monkeypatch.setattr(ParkedFetch, "_read_again", counted("woken", ParkedFetch._read_again))
    monkeypatch.setattr(ParkedFetch, "_expire", counted("expired", ParkedFetch._expire))
    monkeypatch.setattr(Partition, "answer_fetch", answer)
    result = run_seed(0, schedule=[])
    assert result.ok, result.violations
    assert result.acked > 0
    assert seen["woken"] > 0 and seen["expired"] > 0
    assert seen["read again"] > 0 and seen["consumer read again"] > 0
