"""Leader-epoch caches for tests: the log's own cache, kept in memory."""

from pathlib import Path

from weir.log import LeaderEpochCache


class MemoryEpochCache(LeaderEpochCache):
    """weir.log.LeaderEpochCache without the checkpoint file (the simulator's needs, too)."""

    def __init__(self, entries: list[tuple[int, int]] = ()):
        super().__init__(Path("/nonexistent/leader-epoch-checkpoint"), [])
        for epoch, offset in entries:
            self._add(epoch, offset)

    def _persist(self, durable: bool = True) -> None:
        pass
