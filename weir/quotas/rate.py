"""Kafka's `Rate` over a `SampledStat` (org.apache.kafka.common.metrics.stats), the measure client
quotas are held to, with the throttle time of a violation (QuotaUtils.throttleTime).

Theory of operation. A rate keeps `samples` sums (quota.window.num, 11), each over a window of
`window_ms` (quota.window.size.seconds, 1 s). A value recorded at `now` goes into the current
sample; once that sample is a window old, the next one (the oldest, reused) starts, aligned to
the window boundary after the previous one. A sample older than `samples` windows counts as
empty. The rate is the sum of the samples over the time they span - from the oldest sample's
start to `now`, but never less than `samples - 1` whole windows: a new client is measured over
ten seconds from its first byte, so it may start with a burst of up to ten seconds' quota, as
in Kafka.

A quota is violated when the rate after recording is above the bound; the client is then
throttled for as long as it takes the rate to come back to the bound if it sends nothing more:
(rate - bound) / bound * window span.

`TokenBucket` is KIP-599's measure for controller_mutation_rate: a bucket of `samples` windows'
worth of the quota, full at first, refilled at the quota's rate, emptied by each mutation
(partitions created or deleted) and allowed to go below zero by the one that overdraws it; the
client then waits until it is back to zero.
"""

from __future__ import annotations


class Rate:
    """Values per second over the last `samples` windows of `window_ms` (times in ms)."""

    __slots__ = ("samples", "window_ms", "_starts", "_sums", "_current")

    def __init__(self, samples: int, window_ms: int) -> None:
        assert samples >= 1 and window_ms >= 1, (samples, window_ms)
        self.samples = samples
        self.window_ms = window_ms
        self._starts: list[int] = []  # each sample's window start (ms)
        self._sums: list[float] = []
        self._current = 0

    def record(self, value: float, now_ms: int, bound: float | None = None) -> None:
        """(`bound`: unused, as in TokenBucket's signature.)"""
        if not self._starts:
            self._starts.append(now_ms)
            self._sums.append(0.0)
        start = self._starts[self._current]
        if now_ms - start >= self.window_ms:  # the current sample is complete: the next one starts
            previous_end = start + self.window_ms
            aligned = now_ms - (now_ms - previous_end) % self.window_ms
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._starts):
                self._starts.append(aligned)
                self._sums.append(0.0)
            else:
                self._starts[self._current] = aligned
                self._sums[self._current] = 0.0
        self._sums[self._current] += value

    def _purge(self, now_ms: int) -> None:
        expire_ms = self.samples * self.window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire_ms:
                self._starts[i] = now_ms
                self._sums[i] = 0.0

    def span_ms(self, now_ms: int) -> int:
        """The time the rate is measured over (Rate.windowSize)."""
        self._purge(now_ms)
        oldest = min(self._starts) if self._starts else now_ms
        elapsed = now_ms - oldest
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Values per second."""
        span = self.span_ms(now_ms)
        return sum(self._sums) / (span / 1000)

    def total(self, now_ms: int) -> float:
        """The sum of the samples still counted."""
        self._purge(now_ms)
        return sum(self._sums)

    def throttle_ms(self, bound: float, now_ms: int) -> int:
        """How long the client must keep still for the rate to come back to `bound` (0: within it)."""
        rate = self.measure(now_ms)
        if rate <= bound:
            return 0
        return round((rate - bound) / bound * self.span_ms(now_ms))


class TokenBucket:
    """Kafka's TokenBucket stat (times in ms, the quota per second)."""

    __slots__ = ("burst_s", "tokens", "_last_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.burst_s = samples * window_ms / 1000  # the bucket holds this many seconds' worth
        self.tokens: float | None = None  # None: full
        self._last_ms = 0

    def _refill(self, bound: float, now_ms: int) -> None:
        burst = self.burst_s * bound
        self.tokens = burst if self.tokens is None else min(burst, self.tokens + bound * (now_ms - self._last_ms) / 1000)
        self._last_ms = now_ms

    def record(self, value: float, now_ms: int, bound: float | None = None) -> None:
        if bound is None:  # no quota: nothing to count against
            return
        self._refill(bound, now_ms)
        self.tokens = min(self.burst_s * bound, self.tokens - value)

    def throttle_ms(self, bound: float, now_ms: int) -> int:
        """How long until the bucket is back to zero (0: it is not below)."""
        self._refill(bound, now_ms)
        return round(-self.tokens / bound * 1000) if self.tokens < 0 else 0

    def measure(self, now_ms: int) -> float:
        """The tokens left (as last refilled)."""
        return self.tokens if self.tokens is not None else 0.0
