"""Replication throttles (KIP-73), as reassign-partitions --throttle sets them: a leader sends, and
a follower fetches, at most `leader.replication.throttled.rate` / `follower.replication.throttled.rate`
bytes per second for the replicas a topic's `leader.replication.throttled.replicas` /
`follower.replication.throttled.replicas` name ('*' or partition:broker,...). Replicas in the ISR
are never throttled: a throttle slows a catching-up replica, never acks=all.

Over the rate (measured over the last `WINDOWS` windows of `WINDOW_S`, Kafka's
replication.quota.window.num and .size.seconds), a leader answers a throttled fetch with no
records and a follower leaves throttled partitions out of its fetches, until the rate is below.
"""

from collections import deque
from collections.abc import Callable

WINDOW_S = 1.0
WINDOWS = 11


class ReplicationQuota:
    def __init__(self, limit: Callable[[], int]) -> None:
        """`limit()`: the bytes/s allowed now (the dynamic config may change at any time)."""
        self.limit = limit
        self._windows: deque[list] = deque()  # [start, bytes], oldest first

    def record(self, size: int, now_s: float) -> None:
        self._expire(now_s)
        if not self._windows or now_s - self._windows[-1][0] >= WINDOW_S:
            self._windows.append([now_s, 0])
        self._windows[-1][1] += size

    def is_exceeded(self, now_s: float) -> bool:
        self._expire(now_s)
        if not self._windows:
            return False
        elapsed = max(WINDOW_S, now_s - self._windows[0][0])
        return sum(size for _, size in self._windows) / elapsed > self.limit()

    def _expire(self, now_s: float) -> None:
        while self._windows and now_s - self._windows[0][0] >= WINDOW_S * WINDOWS:
            self._windows.popleft()


def is_throttled(throttled_replicas: str, partition: int, broker: int) -> bool:
    """Whether a throttled-replicas config names (partition, broker)."""
    items = [item.strip() for item in throttled_replicas.split(",")]
    return items == ["*"] or f"{partition}:{broker}" in items
