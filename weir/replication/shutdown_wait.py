"""Controlled shutdown's wait, loop-free: what a stopping broker does next. server.py drives it on
the asyncio loop, weir sim on simulated time, so both stop, and ask again, by the same rule."""

from __future__ import annotations

from collections.abc import Iterable

MOVED, TIMED_OUT, GAVE_UP, ASK, WAIT = "moved", "timed out", "gave up", "ask", "wait"


class ShutdownWait:
    """The wait after a broker asked the controller to move its leaderships away (or failed to),
    until `deadline`. A request that could not be made is tried again `retry_backoff` later
    (controlled.shutdown.retry.backoff.ms, as Kafka's broker retries its ControlledShutdown), until
    `max_attempts` requests have failed (controlled.shutdown.max.retries: Kafka's broker makes that
    many attempts; at least one here), when it stops trying."""

    def __init__(self, deadline: float, retry_backoff: float, max_attempts: int = 3) -> None:
        self.deadline = deadline
        self.retry_backoff = retry_backoff
        self.max_attempts = max(max_attempts, 1)
        self.failures = 0
        self.asked_in: int | None = None  # the registration (broker epoch) the standing request was made in
        self.retry_at = float("-inf")

    def next_step(self, partitions: Iterable, registration: int | None, now: float) -> str:
        """MOVED when no partition hosted here awaits a handover (Partition.awaits_leadership_handover),
        TIMED_OUT at the deadline, GAVE_UP after `max_attempts` failed requests; ASK when registered
        (`registration`; None: not now) in a session no standing request was made in (none was, it
        failed, or it went with an earlier session), once any retry backoff is over; else WAIT,
        until `next_check` at the latest."""
        if not any(p.awaits_leadership_handover() for p in partitions):
            return MOVED
        if now >= self.deadline:
            return TIMED_OUT
        if self.failures >= self.max_attempts:
            return GAVE_UP
        if registration is not None and registration != self.asked_in and now >= self.retry_at:
            return ASK
        return WAIT

    def asked(self, registration: int) -> None:
        self.asked_in = registration

    def ask_failed(self, now: float) -> None:
        self.asked_in = None
        self.failures += 1
        self.retry_at = now + self.retry_backoff

    def next_check(self, now: float) -> float:
        """When to look again without news (a view change): at the retry, else at the deadline."""
        return self.retry_at if now < self.retry_at < self.deadline else self.deadline
