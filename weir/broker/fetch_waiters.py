"""Fetch purgatory: long polls parked until data arrives or max_wait_ms passes."""

import asyncio
from collections import defaultdict


class FetchWaiters:
    """Maps a partition to the parked fetches that want to hear of new data in it."""

    def __init__(self) -> None:
        self._by_partition: dict[tuple[str, int], set[asyncio.Event]] = defaultdict(set)

    async def wait(self, partitions: list[tuple[str, int]], timeout_s: float) -> None:
        """Return when any of `partitions` has new data, or after `timeout_s`."""
        event = asyncio.Event()
        for key in partitions:
            self._by_partition[key].add(event)
        try:
            async with asyncio.timeout(timeout_s):  # not wait_for: on 3.11 it can swallow a cancel
                await event.wait()
        except TimeoutError:
            pass
        finally:
            for key in partitions:
                waiting = self._by_partition.get(key)
                if waiting is not None:
                    waiting.discard(event)
                    if not waiting:
                        del self._by_partition[key]

    def notify(self, key: tuple[str, int]) -> None:
        for event in self._by_partition.get(key, ()):
            event.set()
