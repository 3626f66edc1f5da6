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

    async def wait(self, partitions: list[tuple[str, int]], timeout_s: float, *, follower: bool = False) -> None:
        """Return when any of `partitions` has new data, or after `timeout_s`."""
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

    def notify(self, key: tuple[str, int], *, followers: bool = True) -> None:
        """Wake the fetches waiting on `key`; follower fetches only if `followers` (new records,
        a role change), not for a moved HW or log start."""
        for event in self._readers.get(key, ()):
            event.set()
        if followers:
            for event in self._followers.get(key, ()):
                event.set()
