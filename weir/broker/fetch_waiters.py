"""Fetch purgatory: long polls parked until data arrives or max_wait_ms passes."""

import asyncio
from collections import defaultdict


class FetchWaiters:
    """Maps a partition to the parked fetches that want to hear of new data in it.

    A follower's fetch reads up to the leader's LEO, so only new records (or a role change) can
    give it something: it is not woken when just the HW or the log start moves (Kafka's
    DelayedFetch, likewise). Waking it would cost an empty answer and one more round trip per
    batch; the follower learns the HW from its next answer."""

    def __init__(self) -> None:
        self._readers: dict[tuple[str, int], set[asyncio.Event]] = defaultdict(set)  # any change
        self._followers: dict[tuple[str, int], set[asyncio.Event]] = defaultdict(set)  # records only
        # A fetch reads, and parks a loop turn later (its coroutine starts then): what it read may
        # be stale by then. Each notify is numbered, so that it can tell (`wait`'s `since`).
        self.news = 0
        self._news_for_readers: dict[tuple[str, int], int] = {}
        self._news_for_followers: dict[tuple[str, int], int] = {}

    async def wait(self, partitions: list[tuple[str, int]], timeout_s: float, *, follower: bool = False,
                   since: int | None = None) -> None:
        """Return when any of `partitions` has new data, or after `timeout_s`; at once when one
        had news after notify number `since` (what the caller saw was `news` then)."""
        if since is not None and self._news_after(since, partitions, follower):
            return
        event = asyncio.Event()
        registry = self._followers if follower else self._readers
        for key in partitions:
            registry[key].add(event)
        try:
            async with asyncio.timeout(timeout_s):  # not wait_for: on 3.11 it can swallow a cancel
                await event.wait()
        except TimeoutError:
            pass
        finally:
            for key in partitions:
                waiting = registry.get(key)
                if waiting is not None:
                    waiting.discard(event)
                    if not waiting:
                        del registry[key]

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
        for event in self._readers.get(key, ()):
            event.set()
        if followers:
            self._news_for_followers[key] = self.news
            for event in self._followers.get(key, ()):
                event.set()

    def forget(self, key: tuple[str, int]) -> None:
        """`key` is gone (its replica deleted here): what was noted of it goes too."""
        self._news_for_readers.pop(key, None)
        self._news_for_followers.pop(key, None)
