"""Fetch purgatory: long polls parked until data arrives or max_wait_ms passes.

The bookkeeping (who waits on which partition, which notify came when, and when a fetch waits at
all) is loop-free, so weir sim's leader parks its followers' fetches in the same object; only
`wait` is asyncio's.
"""

import asyncio


class FetchWaiters:
    """Maps a partition to the parked fetches that want to hear of new data in it. A parked fetch
    is anything with `set()`: an asyncio.Event here, a simulated fetch in weir sim.

    A follower's fetch reads up to the leader's LEO, so only new records (or a role change) can
    give it something: it is not woken when just the HW or the log start moves (Kafka's
    DelayedFetch, likewise). Waking it would cost an empty answer and one more round trip per
    batch; the follower learns the HW from its next answer."""

    def __init__(self) -> None:
        # key -> parked fetches, in the order they parked (dicts, not sets: weir sim wakes them
        # in that order, and a run must replay exactly)
        self._readers: dict[tuple[str, int], dict] = {}  # any change
        self._followers: dict[tuple[str, int], dict] = {}  # records only
        # A fetch reads, and parks a loop turn later (its coroutine starts then): what it read may
        # be stale by then. Each notify is numbered, so that it can tell (`park`'s `since`).
        self.news = 0
        self._news_for_readers: dict[tuple[str, int], int] = {}
        self._news_for_followers: dict[tuple[str, int], int] = {}

    def park(self, partitions: list[tuple[str, int]], waiter, *, follower: bool = False,
             since: int | None = None) -> bool:
        """Have `waiter` set when any of `partitions` has news; False, and nothing parked, when one
        had news after notify number `since` (what the caller saw was `news` then)."""
        if since is not None and self._news_after(since, partitions, follower):
            return False
        registry = self._followers if follower else self._readers
        for key in partitions:
            registry.setdefault(key, {})[waiter] = None
        return True

    def unpark(self, partitions: list[tuple[str, int]], waiter, *, follower: bool = False) -> None:
        registry = self._followers if follower else self._readers
        for key in partitions:
            waiting = registry.get(key)
            if waiting is not None:
                waiting.pop(waiter, None)
                if not waiting:
                    del registry[key]

    async def wait(self, partitions: list[tuple[str, int]], timeout_s: float, *, follower: bool = False,
                   since: int | None = None) -> None:
        """Return when any of `partitions` has new data, or after `timeout_s`; at once when one
        had news after notify number `since`."""
        event = asyncio.Event()
        if not self.park(partitions, event, follower=follower, since=since):
            return
        try:
            async with asyncio.timeout(timeout_s):  # not wait_for: on 3.11 it can swallow a cancel
                await event.wait()
        except TimeoutError:
            pass
        finally:
            self.unpark(partitions, event, follower=follower)

    def _news_after(self, since: int, partitions: list[tuple[str, int]], follower: bool) -> bool:
        if self.news == since:
            return False
        news = self._news_for_followers if follower else self._news_for_readers
        return any(news.get(key, 0) > since for key in partitions)

    def notify(self, key: tuple[str, int], *, followers: bool = True) -> None:
        """Wake the fetches waiting on `key`; follower fetches only if `followers` (new records,
        a role change), not for a moved HW or log start."""
        self.news += 1
        self._news_for_readers[key] = self.news
        for waiter in list(self._readers.get(key, ())):
            waiter.set()
        if followers:
            self._news_for_followers[key] = self.news
            for waiter in list(self._followers.get(key, ())):
                waiter.set()

    def on_effects(self, key: tuple[str, int], effects) -> None:
        """What a partition's decision (its Effects) means for the fetches parked on it."""
        if effects.data_changed:
            self.notify(key, followers=effects.new_records)

    def forget(self, key: tuple[str, int]) -> None:
        """`key` is gone (its replica deleted here): what was noted of it goes too."""
        self._news_for_readers.pop(key, None)
        self._news_for_followers.pop(key, None)


def records_size(result) -> int:
    """The bytes of records in one partition's fetch result."""
    return sum(r.size for r in result.records) if result.records else 0


def keeps_waiting(results, min_bytes: int, time_left: float) -> bool:
    """Whether a fetch whose reads gave `results` ((topic, key, [partition result or None])
    each) waits on: less than min_bytes of records, no partition in error, and time left."""
    answered = [p for _, _, parts in results for p in parts if p is not None]
    return (time_left > 0 and sum(records_size(p) for p in answered) < min_bytes
            and not any(p.error_code for p in answered))
