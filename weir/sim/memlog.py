"""A partition's log in memory: what the simulator's brokers append to, truncate and crash.

Rules kept here (those of weir.log.PartitionLog that replication depends on):

- Offsets are dense from 0; each record carries the leader epoch it was written in.
- A leader append stamps its epoch; the leader-epoch cache learns an epoch's start offset from the
  first record written in it (as PartitionLog does from batch headers), as leader or follower.
- Truncation cuts records at and above an offset and the epochs that started there.
- A flushed prefix: records below `flushed` survive any crash. A crash that loses unflushed data
  (a machine crash, not a process kill) cuts the log back to it. The epoch cache is persisted on
  every change (as the real checkpoint file is), so it survives and is cut with the log.
"""

from __future__ import annotations

from pathlib import Path

from weir.log.leader_epoch_cache import LeaderEpochCache


class SimEpochCache(LeaderEpochCache):
    """weir.log.LeaderEpochCache with its checkpoint kept in memory."""

    def __init__(self) -> None:
        super().__init__(Path("/nonexistent/leader-epoch-checkpoint"), [])

    def _persist(self, *args, **kwargs) -> None:
        pass


class MemoryLog:
    __slots__ = ("epochs", "values", "flushed", "leader_epochs")

    log_start_offset = 0

    def __init__(self) -> None:
        self.epochs: list[int] = []  # leader epoch of each record
        self.values: list[str] = []
        self.flushed = 0
        self.leader_epochs = SimEpochCache()

    @property
    def log_end_offset(self) -> int:
        return len(self.values)

    def append(self, values: list[str], leader_epoch: int) -> tuple[int, int]:
        """As leader: returns (first offset, last offset)."""
        assert values
        first = len(self.values)
        if leader_epoch > self.leader_epochs.latest_epoch:
            self.leader_epochs.assign(leader_epoch, first)
        self.values.extend(values)
        self.epochs.extend([leader_epoch] * len(values))
        return first, len(self.values) - 1

    def append_as_follower(self, base_offset: int, epochs: list[int], values: list[str]) -> None:
        assert base_offset == len(self.values), ("append position must equal the LEO", base_offset, len(self.values))
        for epoch, value in zip(epochs, values):
            if epoch > self.leader_epochs.latest_epoch:
                self.leader_epochs.assign(epoch, len(self.values))
            self.epochs.append(epoch)
            self.values.append(value)

    def read(self, offset: int, limit: int, max_records: int) -> tuple[list[int], list[str]]:
        end = min(limit, offset + max_records)
        return self.epochs[offset:end], self.values[offset:end]

    def truncate_to(self, offset: int) -> None:
        if offset < len(self.values):
            del self.values[offset:], self.epochs[offset:]
            self.flushed = min(self.flushed, offset)
        self.leader_epochs.truncate_from_end(len(self.values))

    def flush(self) -> None:
        self.flushed = len(self.values)

    def crash(self, lose_unflushed: bool) -> int:
        """The machine died. Returns how many records were lost."""
        if not lose_unflushed:
            return 0
        lost = len(self.values) - self.flushed
        self.truncate_to(self.flushed)
        return lost
