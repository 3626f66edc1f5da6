"""The simulated clock and event queue: the only source of time in a simulation.

Events are (time, sequence, callback, args) in a heap; the sequence number breaks ties in
scheduling order, so one seed always runs the same events in the same order. Nothing here reads a
real clock. A bound on the number of events protects against a run that would never end.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable


class EventLimitExceeded(Exception):
    pass


class EventQueue:
    __slots__ = ("now", "_heap", "_seq", "events_run", "max_events")

    def __init__(self, max_events: int = 2_000_000) -> None:
        self.now = 0
        self._heap: list = []
        self._seq = 0
        self.events_run = 0
        self.max_events = max_events

    def at(self, time_ms: int, callback: Callable, *args) -> None:
        assert time_ms >= self.now, ("no event in the past", time_ms, self.now)
        self._seq += 1
        heapq.heappush(self._heap, (time_ms, self._seq, callback, args))

    def after(self, delay_ms: int, callback: Callable, *args) -> None:
        self.at(self.now + max(0, delay_ms), callback, *args)

    def step(self) -> bool:
        """Run the next event; False when none is left."""
        if not self._heap:
            return False
        time_ms, _, callback, args = heapq.heappop(self._heap)
        self.now = time_ms
        self.events_run += 1
        if self.events_run > self.max_events:
            raise EventLimitExceeded(f"more than {self.max_events} events")
        callback(*args)
        return True

    def next_time(self) -> int | None:
        return self._heap[0][0] if self._heap else None
