"""A partition's log in memory: what the simulator's brokers append to, truncate and crash.

It has the methods weir.replication.partition needs of a log (`ReplicaLog`), with one record per
batch (`SimBatch`) in place of record-batch bytes. Rules kept here (those of
weir.log.PartitionLog that replication depends on):

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
from typing import NamedTuple

from weir.log.leader_epoch_cache import LeaderEpochCache
from weir.protocol.record_batch import HEADER_SIZE
from weir.transactions.txn_index import TransactionIndex


class SimEpochCache(LeaderEpochCache):
    """weir.log.LeaderEpochCache with its checkpoint kept in memory."""

    def __init__(self) -> None:
        super().__init__(Path("/nonexistent/leader-epoch-checkpoint"), [])

    def _persist(self, *args, **kwargs) -> None:
        pass


class SimBatch(NamedTuple):
    """One record as a batch, with the header fields the producer table reads. A produced one has
    offset and epoch -1 until the leader appends it."""
    value: str
    producer_id: int
    base_offset: int = -1
    leader_epoch: int = -1
    producer_epoch: int = 0
    base_sequence: int = 0
    record_count: int = 1
    max_timestamp: int = -1  # the producer's clock when it sent the record (CreateTime)
    attributes: int = 0  # never transactional: the simulation has no transactions (yet)

    @property
    def last_offset(self) -> int:
        return self.base_offset

    @property
    def partition_leader_epoch(self) -> int:  # the header's name for it
        return self.leader_epoch

    @property
    def size(self) -> int:
        """Its bytes, as a fetch counts them against fetch.min.bytes: a v2 batch header and the value."""
        return HEADER_SIZE + len(self.value)


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int


class MemoryLog:
    __slots__ = ("batches", "values", "flushed", "leader_epochs", "txn_index")

    log_start_offset = 0

    def __init__(self) -> None:
        self.batches: list[SimBatch] = []
        self.values: list[str] = []  # the batches' values, for the checker
        self.flushed = 0
        self.leader_epochs = SimEpochCache()
        self.txn_index = TransactionIndex()  # one index for the whole log (the real log keeps one a segment)

    @property
    def log_end_offset(self) -> int:
        return len(self.batches)

    def append(self, batch: SimBatch, leader_epoch: int, now_ms: int) -> AppendInfo:
        offset = len(self.batches)
        self._add(batch._replace(base_offset=offset, leader_epoch=leader_epoch))
        return AppendInfo(offset, offset)

    def append_as_follower(self, batches: list[SimBatch], now_ms: int) -> AppendInfo:
        assert batches[0].base_offset == len(self.batches), ("append position must equal the LEO", batches[0])
        for batch in batches:
            self._add(batch)
        return AppendInfo(batches[0].base_offset, batches[-1].base_offset)

    def _add(self, batch: SimBatch) -> None:
        assert batch.base_offset == len(self.batches)
        if batch.leader_epoch != self.leader_epochs.latest_epoch:
            self.leader_epochs.assign(batch.leader_epoch, batch.base_offset)
        self.batches.append(batch)
        self.values.append(batch.value)

    def read(self, offset: int, limit: int, max_records: int) -> list[SimBatch]:
        return self.batches[offset:min(limit, offset + max_records)]

    def batch_headers(self, from_offset: int = 0) -> list[SimBatch]:
        return self.batches[from_offset:]

    def batch_at(self, offset: int) -> SimBatch:
        return self.batches[offset]

    def append_aborted_txns(self, entries) -> None:
        for entry in entries:
            if not self.txn_index.entries or entry.last_offset > self.txn_index.entries[-1].last_offset:
                self.txn_index.append(entry)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> list:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset).aborted

    def truncate_to(self, offset: int) -> None:
        if offset < len(self.batches):
            self.txn_index.truncate_to(offset)
            del self.batches[offset:], self.values[offset:]
            self.flushed = min(self.flushed, offset)
            self.leader_epochs.truncate_from_end(offset)

    def flush(self) -> None:
        self.flushed = len(self.batches)

    def crash(self, lose_unflushed: bool) -> int:
        """The machine died. Returns how many records were lost."""
        if not lose_unflushed:
            return 0
        lost = len(self.batches) - self.flushed
        self.truncate_to(self.flushed)
        return lost
