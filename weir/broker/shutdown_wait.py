"""Controlled shutdown's wait, loop-free: what a stopping broker does next. server.py drives it on
the asyncio loop, weir sim on simulated time, so both stop, and ask again, by the same rule."""

from __future__ import annotations

from collections.abc import Iterable

MOVED, TIMED_OUT, ASK, WAIT = "moved", "timed out", "ask", "wait"


class ShutdownWait:
    """The wait after a broker asked the controller to move its leaderships away, in registration
    `asked_in` (its broker epoch), until `deadline`."""

    def __init__(self, deadline: float, asked_in: int | None) -> None:
        self.deadline = deadline
        self.asked_in = asked_in

    def next_step(self, partitions: Iterable, registration: int | None, now: float) -> str:
        """MOVED when no partition hosted here awaits a handover (Partition.awaits_leadership_handover),
        TIMED_OUT at the deadline; ASK when registered (`registration`; None: not now) in a session
        other than the one the request was made in, which it did not outlive (Kafka's broker retries
        its ControlledShutdown); else WAIT."""
        if not any(p.awaits_leadership_handover() for p in partitions):
            return MOVED
        if now >= self.deadline:
            return TIMED_OUT
        if registration is not None and registration != self.asked_in:
            return ASK
        return WAIT

    def asked(self, registration: int) -> None:
        self.asked_in = registration
