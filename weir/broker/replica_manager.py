"""The partition replicas this broker hosts, and the events that drive them.

The controller's decisions arrive as a `ClusterView` (kept current from ZooKeeper by the broker);
`apply_view` turns them into partition roles. Produce, consumer fetches, follower fetches and
timers arrive from the shell; the rules they trigger are in `weir.replication`. What this class
adds is bookkeeping: parked acks=all produces as futures, long-polling fetches, the ISR changes
waiting to be sent to the controller, and the high-watermark checkpoint.
"""

import asyncio
import itertools
import logging
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from ..config import BrokerConfig, parse_setting
from ..coordination.model import ClusterView, TopicAssignment
from ..log import LogConfig, LogDirectory, OffsetOutOfRange, RecordBatchTooLarge
from ..log.log_validator import ValidationConfig, validate_produced_batch
from ..log.checkpoint_file import read_offset_checkpoint, write_offset_checkpoint
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.hot_responses import FetchPartitionResult, FileRegion
from ..replication.epoch_fencing import check_current_leader_epoch
from ..replication.leader import AlterPartitionProposal, IsrChangeAccepted, IsrChangeRejected, ReplicationConfig
from ..replication.produce_purgatory import ProduceCompletion, PurgatoryFull
from ..replication.producer_state import Duplicate
from .fetch_waiters import FetchWaiters
from .partition import OFFLINE, Partition

log = logging.getLogger(__name__)

HW_CHECKPOINT = "replication-offset-checkpoint"

# topic config → LogConfig field
_LOG_FIELDS = {
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "flush.messages": "flush_interval_messages",
    "flush.ms": "flush_interval_ms",
    "index.interval.bytes": "index_interval_bytes",
}


class AppendResult(NamedTuple):
    partition: Partition
    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime


class ReplicaManager:
    def __init__(self, config: BrokerConfig, now_ms: int) -> None:
        self.config = config
        self.broker_id = config["broker.id"]
        self.root = Path(config["log.dirs"])
        self.root.mkdir(parents=True, exist_ok=True)
        self.logs = LogDirectory(self.root)
        self._checkpointed_hw = read_offset_checkpoint(self.root / HW_CHECKPOINT)
        self.view = ClusterView()
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.waiters = FetchWaiters()
        self._produce_futures: dict[int, asyncio.Future] = {}
        self._produce_keys = itertools.count()
        self.isr_outbox: dict[tuple[str, int], AlterPartitionProposal] = {}
        self.isr_outbox_ready = asyncio.Event()
        self.on_role_change = lambda partition: None  # set by the broker: the fetchers follow roles
        self.can_lead = False  # only while our ZooKeeper session is known to be alive
        self._validation_configs: dict[str, tuple[dict | None, ValidationConfig]] = {}

    # -- configuration ---------------------------------------------------------

    def topic_config(self, topic: str, name: str, broker_name: str):
        """A topic config, or the broker setting it overrides."""
        value = self.view.topic_configs.get(topic, {}).get(name)
        return self.config[broker_name] if value is None else parse_setting(broker_name, value)

    def log_config(self, topic: str) -> LogConfig:
        configs = self.view.topic_configs.get(topic, {})
        overrides = {_LOG_FIELDS[k]: int(v) for k, v in configs.items() if k in _LOG_FIELDS}
        return replace(self.config.log_config(), **overrides)

    def own_broker_epoch(self) -> int:
        """Our registration's czxid (KIP-380/903), or -1 while our view does not show it."""
        epoch = self.view.own_broker_epoch(self.broker_id)
        return -1 if epoch is None else epoch

    def validation_config(self, topic: str) -> ValidationConfig:
        """What a produced batch must be for `topic` (cached until its configs change)."""
        configs = self.view.topic_configs.get(topic)
        cached = self._validation_configs.get(topic)
        if cached is not None and cached[0] is configs:
            return cached[1]
        config = ValidationConfig(
            max_message_bytes=self.topic_config(topic, "max.message.bytes", "message.max.bytes"),
            timestamp_type=self.topic_config(topic, "message.timestamp.type", "log.message.timestamp.type"),
            timestamp_before_max_ms=self.topic_config(topic, "message.timestamp.before.max.ms",
                                                      "log.message.timestamp.before.max.ms"),
            timestamp_after_max_ms=self.topic_config(topic, "message.timestamp.after.max.ms",
                                                     "log.message.timestamp.after.max.ms"),
            compacted="compact" in (configs or {}).get("cleanup.policy", ""))
        self._validation_configs[topic] = (configs, config)
        return config

    def replication_config(self, topic: str) -> ReplicationConfig:
        return ReplicationConfig(self.topic_config(topic, "min.insync.replicas", "min.insync.replicas"),
                                 self.config["replica.lag.time.max.ms"])

    # -- controller decisions ----------------------------------------------------

    VIEW_CHANGED = ("", -1)  # a waiters key: woken on every metadata change

    def apply_view(self, view: ClusterView, now_ms: int, keys=None) -> None:
        """Bring hosted partitions in line with the controller's states in `view`: all of them,
        or only the partitions in `keys` when that is all that changed."""
        self.view = view
        if keys is None:
            for name in {t for t, _ in self.partitions} - set(view.topics):
                self._drop_topic(name)
            keys = [(a.name, p) for a in view.topics.values() for p in a.replicas]
        for topic, index in keys:
            assignment = view.topics.get(topic)
            state = view.states.get((topic, index))
            if assignment is not None and state is not None and self.broker_id in assignment.replicas.get(index, ()):
                self._apply_state(assignment, index, state, now_ms, view.state_zxids.get((topic, index)))
        self.waiters.notify(self.VIEW_CHANGED)

    def _apply_state(self, assignment: TopicAssignment, index: int, state, now_ms: int,
                     state_zxid: int | None = None) -> None:
        partition = self.partitions.get((assignment.name, index))
        hosted = partition is not None
        if not hosted:
            partition = self._host(assignment, index, now_ms)
        if state.leader == self.broker_id and not self._may_lead_from(state_zxid):
            self._fence_stale_leadership(partition, state, hosted)
            return
        changed, done = partition.apply_state(state, assignment.replicas[index],
                                              self.replication_config(assignment.name), now_ms)
        if changed:
            log.info("%s-%d: %s, leader %d, leader epoch %d, isr %s", assignment.name, index, partition.role,
                     state.leader, state.leader_epoch, list(state.isr))
            self.isr_outbox.pop(partition.key, None)
            self.on_role_change(partition)
        self._complete(done)
        self.waiters.notify(partition.key)

    def _may_lead_from(self, state_zxid: int | None) -> bool:
        """Broker epochs (KIP-380): a state naming us leader may be acted on only if it was written
        after our own current registration. An older one describes a previous incarnation of this
        broker (we restarted, or our session expired, before the controller noticed), which may have
        held records we lost; leading from it would let followers truncate committed records away.
        The controller rewrites every such state once it sees our registration (a bounce, a
        return, or a new controller's start-up), and we take that one."""
        own_epoch = self.view.own_broker_epoch(self.broker_id)
        return own_epoch is not None and state_zxid is not None and state_zxid > own_epoch

    def _fence_stale_leadership(self, partition: Partition, state, hosted: bool) -> None:
        """Stay offline for `partition` until a state newer than our registration arrives."""
        active = partition.role != OFFLINE or partition.state is not None
        if active or not hosted:
            log.info("%s-%d: not leading from a state written before this broker registered (leader epoch %d, "
                     "isr %s); offline until the controller rewrites it", *partition.key, state.leader_epoch,
                     list(state.isr))
        if active:
            self._complete(partition.become_offline())
            self.isr_outbox.pop(partition.key, None)
            self.on_role_change(partition)
        self.waiters.notify(partition.key)

    def _host(self, assignment: TopicAssignment, index: int, now_ms: int) -> Partition:
        config = self.log_config(assignment.name)
        try:
            plog = self.logs.open_partition(assignment.name, index, assignment.topic_id, config, now_ms)
        except ValueError:  # a stale copy of a deleted topic of the same name
            log.warning("%s-%d on disk belongs to a deleted topic; removing it", assignment.name, index)
            self.logs.delete_partition(assignment.name, index)
            plog = self.logs.open_partition(assignment.name, index, assignment.topic_id, config, now_ms)
        partition = Partition(self.broker_id, assignment.name, index, plog,
                              self._checkpointed_hw.get((assignment.name, index), 0))
        partition.load_producer_state()
        self.partitions[partition.key] = partition
        return partition

    def _drop_topic(self, name: str) -> None:
        for key in [k for k in self.partitions if k[0] == name]:
            partition = self.partitions.pop(key)
            self._complete(partition.become_offline())
            self.on_role_change(partition)
            self.logs.delete_partition(*key)
        log.info("deleted the replicas of topic %s", name)

    def lose_leadership_proof(self) -> None:
        """Our ZooKeeper session is suspended: stop acknowledging until it is known to be alive.

        The parked requests were appended, and may yet commit (a session that comes back without
        expiring leaves us leader, and the followers fetch them), so they are answered
        REQUEST_TIMED_OUT, a "possibly persisted" error, never NOT_LEADER_OR_FOLLOWER: librdkafka
        reads that as "rejected or not sent" and resends without counting a retry, even with
        retries=0, which wrote values twice, or refused the resend (NOT_ENOUGH_REPLICAS) while
        the first copy committed."""
        self.can_lead = False
        for partition in self.partitions.values():
            self._complete(partition.purgatory.fail_all(ErrorCode.request_timed_out))

    # -- produce -------------------------------------------------------------------

    def leader_partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            if topic in self.view.topics and index in self.view.topics[topic].replicas:
                raise KafkaError(ErrorCode.not_leader_or_follower, f"{topic}-{index} is not hosted here")
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"no partition {topic}-{index}")
        if partition.leader is None or not self.can_lead:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"not the leader of {topic}-{index}")
        return partition

    def append(self, topic: str, index: int, records: bytes, acks: int, now_ms: int) -> AppendResult:
        """Validate and append a produced batch as leader. Nothing is written unless the batch is
        valid (weir.log.log_validator), and a failed append leaves the log as it was."""
        partition = self.leader_partition(topic, index)
        validated = validate_produced_batch(records, self.validation_config(topic), now_ms)
        header = validated.header
        if acks == -1:
            error = partition.leader.check_acks_all()
            if error:
                raise KafkaError(error, f"{topic}-{index}: ISR {sorted(partition.leader.committed_isr)} is below "
                                        f"min.insync.replicas {partition.leader.effective_min_isr}")
        seen = partition.producers.check(header.producer_id, header.producer_epoch, header.base_sequence,
                                         header.record_count)
        if isinstance(seen, Duplicate):  # a retry: appended before, not again
            return AppendResult(partition, seen.first_offset, seen.last_offset, validated.log_append_time_ms)
        if seen is not None:
            raise KafkaError(seen, f"{topic}-{index}: producer {header.producer_id} epoch {header.producer_epoch} "
                                   f"sequence {header.base_sequence}")
        try:
            info = partition.log.append(validated.records, partition.leader.leader_epoch, now_ms)
        except RecordBatchTooLarge as e:
            raise KafkaError(ErrorCode.record_list_too_large, str(e)) from None
        partition.producers.record(header.producer_id, header.producer_epoch, header.base_sequence,
                                   header.record_count, info.first_offset, info.last_offset)
        if partition.leader.on_leader_append(partition.log.log_end_offset):
            self._high_watermark_advanced(partition, now_ms)
        self.waiters.notify(partition.key)  # followers long-polling for new data
        return AppendResult(partition, info.first_offset, info.last_offset, validated.log_append_time_ms)

    def await_replication(self, partition: Partition, last_offset: int, timeout_ms: int,
                          now_ms: int) -> asyncio.Future:
        """acks=all: a future answered with an ErrorCode once the HW passes `last_offset`."""
        key = next(self._produce_keys)
        future = asyncio.get_running_loop().create_future()
        try:
            done = partition.purgatory.park(key, last_offset + 1, partition.leader.leader_epoch,
                                            now_ms + timeout_ms, partition.status(), now_ms)
        except PurgatoryFull:
            done = ProduceCompletion(key, ErrorCode.request_timed_out)
        if done is not None:
            future.set_result(done.error)
        else:
            self._produce_futures[key] = future
        return future

    def _complete(self, completions: list[ProduceCompletion]) -> None:
        for completion in completions:
            future = self._produce_futures.pop(completion.key, None)
            if future is not None and not future.done():
                future.set_result(completion.error)

    def _high_watermark_advanced(self, partition: Partition, now_ms: int) -> None:
        self._complete(partition.purgatory.complete_ready(partition.status(), now_ms))
        self.waiters.notify(partition.key)

    # -- fetch -----------------------------------------------------------------------

    def read(self, topic: str, index: int, offset: int, max_bytes: int, current_leader_epoch: int,
             replica_id: int, now_ms: int, replica_epoch: int = -1) -> FetchPartitionResult:
        """A fetch from a consumer (replica_id < 0: committed data only) or a follower (up to the
        LEO), the follower's incarnation being `replica_epoch` (its broker epoch, KIP-903)."""
        try:
            partition = self.leader_partition(topic, index) if replica_id < 0 else self._leader_for_follower(
                topic, index)
        except KafkaError as e:
            return FetchPartitionResult(index, e.code)
        error = check_current_leader_epoch(current_leader_epoch, partition.leader_epoch)
        if error:
            return FetchPartitionResult(index, error)
        leader = partition.leader
        if replica_id >= 0:
            outcome = leader.on_follower_fetch(replica_id, offset, now_ms, replica_epoch)
            if outcome.error:
                return FetchPartitionResult(index, outcome.error, leader.high_watermark, leader.high_watermark,
                                            partition.log.log_start_offset)
            if outcome.alter_partition is not None:
                self.send_isr_change(partition, outcome.alter_partition)
            if outcome.high_watermark_advanced:
                self._high_watermark_advanced(partition, now_ms)
        plog = partition.log
        hw = leader.high_watermark
        limit = plog.log_end_offset if replica_id >= 0 else hw
        result = FetchPartitionResult(index, 0, hw, hw, plog.log_start_offset)
        # Out of range means outside the log, as in Kafka: a consumer ahead of a new leader's
        # lagging HW (but within its log) gets an empty answer, not a reason to reset.
        if offset > plog.log_end_offset or offset < plog.log_start_offset:
            result.error_code = ErrorCode.offset_out_of_range
            return result
        if offset >= limit or max_bytes <= 0:
            return result
        try:
            fetched = plog.read(offset, max_bytes, limit)
        except OffsetOutOfRange:
            result.error_code = ErrorCode.offset_out_of_range
            return result
        result.records = [FileRegion(fd, position, size) for fd, position, size in fetched.file_slices]
        return result

    def _leader_for_follower(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None or partition.leader is None:
            raise KafkaError(ErrorCode.not_leader_or_follower)
        return partition

    def on_topic_config_changed(self, topic: str) -> None:
        """min.insync.replicas is read at every produce in Kafka: hand the new value to our leaders."""
        for partition in self.partitions.values():
            if partition.topic == topic and partition.leader is not None:
                partition.leader.config = self.replication_config(topic)

    def follower_advanced(self, partition: Partition) -> None:
        """A follower appended or learned a new HW: wake consumers reading from it (none today)."""
        self.waiters.notify(partition.key)

    # -- ISR changes (AlterPartition) -----------------------------------------------

    def send_isr_change(self, partition: Partition, proposal: AlterPartitionProposal) -> None:
        self.isr_outbox[partition.key] = proposal
        self.isr_outbox_ready.set()

    def on_isr_change_result(self, key: tuple[str, int], proposal: AlterPartitionProposal,
                             result: IsrChangeAccepted | IsrChangeRejected, now_ms: int) -> None:
        partition = self.partitions.get(key)
        if partition is None or partition.leader is None or partition.leader.pending is not proposal:
            return  # leadership moved on meanwhile
        outcome = partition.leader.on_isr_change_result(result)
        if isinstance(result, IsrChangeAccepted):
            log.info("%s-%d: ISR now %s", *key, sorted(result.isr))
        if outcome.retry is not None:
            self.send_isr_change(partition, outcome.retry)
        if outcome.high_watermark_advanced:
            self._high_watermark_advanced(partition, now_ms)
        self._complete(partition.purgatory.complete_ready(partition.status(), now_ms))

    # -- timers ------------------------------------------------------------------------

    def check_isr(self, now_ms: int) -> None:
        """Every replica.lag.time.max.ms / 2: propose dropping followers that fell behind."""
        for partition in self.partitions.values():
            if partition.leader is not None:
                proposal = partition.leader.maybe_shrink_isr(now_ms)
                if proposal is not None:
                    log.info("%s-%d: proposing ISR %s (followers fell behind)", *partition.key,
                             sorted(proposal.new_isr))
                    self.send_isr_change(partition, proposal)

    def expire_produces(self, now_ms: int) -> None:
        for partition in self.partitions.values():
            if len(partition.purgatory):
                self._complete(partition.purgatory.complete_ready(partition.status(), now_ms))

    def maintain(self, now_ms: int) -> None:
        """Retention: delete whole segments past retention.ms / retention.bytes, never above the HW."""
        for partition in list(self.partitions.values()):
            deleted = partition.log.enforce_retention(now_ms, partition.high_watermark)
            if deleted:
                log.info("retention deleted %d segment(s) of %s-%d", deleted, *partition.key)

    def flush_due(self, now_ms: int) -> None:
        self.logs.flush_if_due(now_ms)

    def checkpoint(self) -> None:
        for partition in self.partitions.values():
            partition.save_producer_state()
        self.logs.write_checkpoints()
        write_offset_checkpoint(self.root / HW_CHECKPOINT,
                                {key: p.high_watermark for key, p in self.partitions.items()})

    def close(self) -> None:
        for partition in self.partitions.values():  # appended, fate unknown: see lose_leadership_proof
            self._complete(partition.purgatory.fail_all(ErrorCode.request_timed_out))
        self.checkpoint()
        self.logs.close()
