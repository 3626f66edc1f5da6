"""One partition replica on this broker: its log, and its role as leader, follower, or neither.

The decisions live in `weir.replication` (LeaderPartition, FollowerPartition, ProducePurgatory);
this class only holds them together with the log and turns controller states into roles:

- state.leader == us         → leader: a LeaderPartition (a new one for each new leader epoch)
- state.leader == someone    → follower: a FollowerPartition, fed by the replica fetcher
- state.leader == NO_LEADER  → neither: offline, nothing is served

Stale states (older leader epoch, or same leader epoch and older partition epoch) are ignored.
"""

import json
import logging

from ..coordination.model import NO_LEADER, PartitionState
from ..log import PartitionLog
from ..log.checkpoint_file import write_atomically
from ..protocol.errors import ErrorCode
from ..replication.follower import FollowerPartition
from ..replication.leader import LeaderPartition, ReplicationConfig, ReplicationStatus
from ..replication.produce_purgatory import ProduceCompletion, ProducePurgatory
from ..replication.producer_state import ProducerStateTable

log = logging.getLogger(__name__)
PRODUCER_SNAPSHOT = "producer-state.json"

LEADER, FOLLOWER, OFFLINE = "leader", "follower", "offline"


class Partition:
    def __init__(self, broker_id: int, topic: str, index: int, log: PartitionLog, high_watermark: int) -> None:
        self.broker_id = broker_id
        self.topic = topic
        self.index = index
        self.log = log
        self.state: PartitionState | None = None
        self.replicas: tuple[int, ...] = ()
        self.leader: LeaderPartition | None = None
        self.follower: FollowerPartition | None = None
        self.purgatory = ProducePurgatory()
        self._high_watermark = min(high_watermark, log.log_end_offset)
        self.producers = ProducerStateTable()  # filled by load_producer_state() and appends

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.index

    @property
    def role(self) -> str:
        return LEADER if self.leader else FOLLOWER if self.follower else OFFLINE

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch if self.state else -1

    @property
    def high_watermark(self) -> int:
        if self.leader:
            return self.leader.high_watermark
        if self.follower:
            return self.follower.high_watermark
        return self._high_watermark

    def status(self) -> ReplicationStatus:
        if self.leader:
            return self.leader.status()
        return ReplicationStatus(None, self.high_watermark, False)

    def apply_state(self, state: PartitionState, replicas: tuple[int, ...], config: ReplicationConfig,
                    now_ms: int) -> tuple[bool, list[ProduceCompletion]]:
        """Take a controller state. Returns (role or leader changed, produce requests now decided)."""
        old = self.state
        if old is not None and (state.leader_epoch, state.partition_epoch) <= (old.leader_epoch, old.partition_epoch):
            return False, []
        self.state = state
        self.replicas = replicas
        if state.leader == self.broker_id:
            if self.leader is not None and old is not None and old.leader == self.broker_id:
                self.leader.on_partition_state(state.leader_epoch, state.partition_epoch, frozenset(state.isr),
                                               replicas, now_ms, self.log.leader_epochs)
                return state.leader_epoch != old.leader_epoch, self.purgatory.complete_ready(self.status(), now_ms)
            self._drop_role()
            self.leader = LeaderPartition.become_leader(
                self.broker_id, replicas, frozenset(state.isr), state.leader_epoch, state.partition_epoch,
                self.log.log_end_offset, self._high_watermark, now_ms, self.log.leader_epochs, config)
            return True, self.purgatory.complete_ready(self.status(), now_ms)
        changed = old is None or old.leader != state.leader or old.leader_epoch != state.leader_epoch
        if not changed:
            return False, []
        self._drop_role()
        if state.leader != NO_LEADER:
            self.follower = FollowerPartition(self.broker_id, state.leader, state.leader_epoch,
                                              self.log.log_end_offset, self._high_watermark, self.log.leader_epochs)
        return True, self.purgatory.fail_all(ErrorCode.not_leader_or_follower)

    def _drop_role(self) -> None:
        self._high_watermark = self.high_watermark
        self.leader = None
        self.follower = None

    # -- idempotent producers ----------------------------------------------------------

    def record_batches(self, headers) -> None:
        """Batches now in the log (appended as leader or replicated as follower)."""
        for h in headers:
            self.producers.record(h.producer_id, h.producer_epoch, h.base_sequence, h.record_count,
                                  h.base_offset, h.last_offset)

    def load_producer_state(self) -> None:
        """Rebuild the producer table: from the snapshot if it is still valid, then the log after it."""
        snapshot_path = self.log.directory / PRODUCER_SNAPSHOT
        self.producers, start = ProducerStateTable(), self.log.log_start_offset
        if snapshot_path.exists():
            try:
                saved = json.loads(snapshot_path.read_text())
                if saved["offset"] <= self.log.log_end_offset:
                    self.producers, start = ProducerStateTable.from_json(saved["state"]), saved["offset"]
            except (ValueError, KeyError, OSError) as e:
                log.warning("%s-%d: ignoring a damaged producer snapshot: %r", self.topic, self.index, e)
        self.record_batches(h for h in self.log.batch_headers(start) if h.base_offset >= start)

    def save_producer_state(self) -> None:
        write_atomically(self.log.directory / PRODUCER_SNAPSHOT,
                         json.dumps({"offset": self.log.log_end_offset, "state": self.producers.to_json()}),
                         durable=False)

    def become_offline(self) -> list[ProduceCompletion]:
        """The topic is gone, or this broker can no longer prove its leadership."""
        self._drop_role()
        self.state = None
        return self.purgatory.fail_all(ErrorCode.not_leader_or_follower)
