"""Fetch purgatory: long polls parked until data arrives or max_wait_ms passes.

Loop-free but for `FetchWaiters.wait`: a parked Fetch is a `ParkedFetch` that the shell drives
with its own clock and scheduling (the broker's asyncio loop, weir sim's event queue), so weir
sim's leaders hold their followers' fetches with this same code.
"""

from __future__ import annotations

import asyncio
from typing import Callable


class FetchWaiters:
    """Maps a partition to the parked fetches that want to hear of new data in it. A parked fetch
    is anything with `set()`: a ParkedFetch, or the asyncio.Event of `wait`.

    A follower's fetch reads up to the leader's LEO, so only new records (or a role change) can
    give it something: it is not woken when just the HW or the log start moves (Kafka's
    DelayedFetch, likewise). Waking it would cost an empty answer and one more round trip per
    batch; the follower learns the HW from its next answer."""

    def __init__(self) -> None:
        # key -> parked fetches, in the order they parked (dicts, not sets: weir sim wakes them
        # in that order, and a run must replay exactly)
        self._readers: dict[tuple[str, int], dict] = {}  # any change
        self._followers: dict[tuple[str, int], dict] = {}  # records only

    def park(self, partitions: list[tuple[str, int]], waiter, *, follower: bool = False) -> None:
        """Have `waiter` set when any of `partitions` has news."""
        registry = self._followers if follower else self._readers
        for key in partitions:
            registry.setdefault(key, {})[waiter] = None

    def unpark(self, partitions: list[tuple[str, int]], waiter, *, follower: bool = False) -> None:
        registry = self._followers if follower else self._readers
        for key in partitions:
            waiting = registry.get(key)
            if waiting is not None:
                waiting.pop(waiter, None)
                if not waiting:
                    del registry[key]

    async def wait(self, partitions: list[tuple[str, int]], timeout_s: float) -> None:
        """Return when any of `partitions` has news, or after `timeout_s`."""
        event = asyncio.Event()
        self.park(partitions, event)
        try:
            async with asyncio.timeout(timeout_s):  # not wait_for: on 3.11 it can swallow a cancel
                await event.wait()
        except TimeoutError:
            pass
        finally:
            self.unpark(partitions, event)

    def notify(self, key: tuple[str, int], *, followers: bool = True) -> None:
        """Wake the fetches waiting on `key`; follower fetches only if `followers` (new records,
        a role change), not for a moved HW or log start. A waiter's set() only schedules its
        wake-up (it unparks later), so the registry is not changed while this walks it."""
        for waiter in self._readers.get(key, ()):
            waiter.set()
        if followers:
            for waiter in self._followers.get(key, ()):
                waiter.set()

    def on_effects(self, key: tuple[str, int], effects) -> None:
        """What a partition's decision (its Effects) means for the fetches parked on it."""
        if effects.data_changed:
            self.notify(key, followers=effects.new_records)


def records_size(result) -> int:
    """The bytes of records in one partition's fetch result."""
    return sum(r.size for r in result.records) if result.records else 0


def keeps_waiting(results, min_bytes: int, time_left: float) -> bool:
    """Whether a fetch whose reads gave `results` ((topic, key, [partition result or None])
    each) waits on: less than min_bytes of records, no partition in error, and time left."""
    if time_left <= 0:
        return False
    size = 0
    for _, _, parts in results:
        for p in parts:
            if p is not None:
                if p.error_code:
                    return False
                size += records_size(p)
    return size < min_bytes


class ParkedFetch:
    """A Fetch whose first read found too little (`keeps_waiting`), held until a read finds
    min_bytes or an error, or max_wait passes; then answered once (Kafka's DelayedFetch).

    It parks in `waiters` at once, in the same event as the first read, so a record appended
    after that read always wakes it. The shell supplies, in its own time unit:
    - read(first): the fetch's partitions read again (first=False: a follower is not timed again);
    - answer(results, error): send the answer; or, when a read raised `error`, fail the request;
    - clock(), call_soon(fn), call_at(when, fn): its time and scheduling (call_at may return a
      handle to cancel()).
    """

    def __init__(self, waiters: FetchWaiters, keys: list[tuple[str, int]], *, follower: bool, min_bytes: int,
                 deadline: float, read: Callable, answer: Callable, clock: Callable[[], float],
                 call_soon: Callable, call_at: Callable) -> None:
        self.waiters, self.keys, self.follower, self.min_bytes, self.deadline = (
            waiters, keys, follower, min_bytes, deadline)
        self._read, self._answer, self._clock, self._call_soon = read, answer, clock, call_soon
        self.answered = self._waking = False
        waiters.park(keys, self, follower=follower)
        self._timer = call_at(deadline, self._expire)

    def set(self) -> None:
        """News on one of its partitions (FetchWaiters): read again once the current event is done."""
        if not self._waking and not self.answered:
            self._waking = True
            self._call_soon(self._read_again)

    def _read_again(self) -> None:
        self._waking = False
        if not self.answered:
            self._read_and_answer(expired=False)

    def _expire(self) -> None:
        if not self.answered:
            self._read_and_answer(expired=True)

    def _read_and_answer(self, expired: bool) -> None:
        try:
            results = self._read(False)
        except Exception as e:  # the request fails, not the loop: it must not stay parked
            self._finish(None, e)
            return
        if expired or not keeps_waiting(results, self.min_bytes, self.deadline - self._clock()):
            self._finish(results, None)

    def _finish(self, results, error: Exception | None) -> None:
        self.answered = True
        self.waiters.unpark(self.keys, self, follower=self.follower)
        if self._timer is not None:
            self._timer.cancel()
        self._answer(results, error)
