"""The partition replicas this broker hosts, and the events that drive them.

The controller's decisions arrive as a `ClusterView` (kept current from ZooKeeper by the broker);
`apply_view` turns them into partition roles through `HostedPartitions`, whose rules weir sim's
broker runs too; this class supplies its logs on disk and carries out the effects. Produce,
consumer fetches, follower fetches and timers arrive from the shell; the rules they trigger are in
`weir.replication`. What this class adds is bookkeeping: parked acks=all produces as futures,
long-polling fetches, the ISR changes waiting to be sent to the controller, and the high-watermark
checkpoint.

A replica that cannot be created (out of descriptors or memory, a full disk; weir.broker.descriptors)
is not hosted and is answered KAFKA_STORAGE_ERROR, as Kafka's broker answers for a replica offline
after a storage error; it is tried again at every metadata change that concerns it and every
log.retention.check.interval.ms. The replicas already here go on serving.
"""

import asyncio
import itertools
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

from weir.broker.descriptors import OUT_OF_DESCRIPTORS, DescriptorBudget
from weir.broker.metrics import BrokerMetrics
from weir.broker.producer_snapshots import read_producer_snapshot, write_producer_snapshot
from weir.config import topic_configs
from weir.config.broker_config import BrokerConfig
from weir.log import LogConfig, LogDirectory, OffsetOutOfRange, RecordBatchTooLarge, SegmentFileCache
from weir.log.checkpoint_file import read_offset_checkpoint, write_offset_checkpoint
from weir.log.log_validator import NO_TIMESTAMP, ValidatedBatch, ValidationConfig, validate_produced_batch
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.hot_responses import FetchPartitionResult, FileRegion
from weir.replication.epoch_fencing import NO_EPOCH_CHECK
from weir.replication.hosted_partitions import HostedPartitions
from weir.replication.isr_outbox import IsrOutbox
from weir.replication.leader import AlterPartitionProposal, IsrChangeAccepted, IsrChangeRejected, ReplicationConfig
from weir.replication.partition import Effects, Partition, ProducerSnapshot
from weir.replication.produce_purgatory import ProduceCompletion
from weir.replication.replication_quota import ReplicationQuota, is_throttled
from weir.transactions.partition_txns import SENTINEL, AppendOrigin, VerificationGuard
from weir.zk.model import ClusterView, TopicAssignment

log = logging.getLogger(__name__)

HW_CHECKPOINT = "replication-offset-checkpoint"

# topic config → LogConfig field (segment.ms: log_config)
_LOG_FIELDS = {
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "segment.bytes": "segment_bytes",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
    "flush.messages": "flush_interval_messages",
    "flush.ms": "flush_interval_ms",
    "index.interval.bytes": "index_interval_bytes",
    "file.delete.delay.ms": "file_delete_delay_ms",
}


class AppendResult(NamedTuple):
    partition: Partition
    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime


@dataclass(frozen=True, slots=True)
class FetchParams:
    """What one pass over a Fetch request asks of each partition it names (Kafka's FetchParams): a
    consumer's (replica_id < 0: committed data only; `read_committed`: below the last stable
    offset, with the aborted transactions of what it returns, KIP-98) or a follower's (up to the
    LEO), the follower's incarnation being `replica_epoch` (its broker epoch, KIP-903). A long
    poll reads again with `first` false: the follower's position is taken once per request."""
    replica_id: int
    replica_epoch: int
    read_committed: bool
    now_ms: int
    first: bool = True


class ReplicaNotCreated(Exception):
    """This broker could not create a replica (a storage error: out of descriptors or memory, a
    full disk)."""


class ReplicaManager:
    def __init__(self, config: BrokerConfig, now_ms: int) -> None:
        self.config = config
        self.broker_id = config["broker.id"]
        self.root = Path(config["log.dirs"])
        self.root.mkdir(parents=True, exist_ok=True)
        self.descriptors = DescriptorBudget(config["weir.log.closed.segment.files.max"])
        self.logs = LogDirectory(self.root, files=SegmentFileCache(self.descriptors.cached_files))
        # replicas assigned here that could not be created, with why: answered KAFKA_STORAGE_ERROR
        self.not_created: dict[tuple[str, int], str] = {}
        self._checkpointed_hw = read_offset_checkpoint(self.root / HW_CHECKPOINT)
        self.view = ClusterView()
        self.hosting = HostedPartitions(self.broker_id, self)  # the rules weir sim's broker runs too
        self.partitions = self.hosting.partitions
        # per partition, (its directory, the producer snapshot there): unchanged ones are not written again
        self._snapshots_on_disk: dict[tuple[str, int], tuple[Path, ProducerSnapshot | None]] = {}
        self.waiters = self.hosting.waiters
        self._produce_futures: dict[int, asyncio.Future] = {}
        self._produce_keys = itertools.count()
        self._parking: set[Partition] = set()  # the expiry timer's round: those that may hold parked produces
        self.isr_outbox = IsrOutbox()  # its clock: monotonic milliseconds
        self.isr_outbox_ready = asyncio.Event()
        self.on_role_change = lambda partition: None  # set by the broker: the fetchers follow roles
        self.on_log_start_moved = lambda key: None  # set by the broker: a follower's next fetch tells it
        # Set by the server (the group coordinator's complete_transaction): a transaction marker
        # was appended to __consumer_offsets partition `partition_index` and replicated.
        self.on_offsets_marker: Callable[[int, int, bool], None] | None = None
        self.metrics = BrokerMetrics()
        self.can_lead = False  # only while our ZooKeeper session is known to be alive
        self._validation_configs: dict[str, tuple[dict | None, ValidationConfig]] = {}
        self.leader_quota = ReplicationQuota(lambda: self.config["leader.replication.throttled.rate"])
        self.follower_quota = ReplicationQuota(lambda: self.config["follower.replication.throttled.rate"])
        self._topic_settings: dict[str, tuple[dict | None, dict]] = {}

    # -- configuration ---------------------------------------------------------

    def topic_settings(self, topic: str) -> dict:
        """Every topic config of `topic`: its override, else the broker setting it overrides, else
        the default (weir.config.topic_configs); cached until the topic's configs change."""
        overrides = self.view.topic_configs.get(topic)
        cached = self._topic_settings.get(topic)
        if cached is None or cached[0] is not overrides:
            cached = self._topic_settings[topic] = (overrides, topic_configs.effective(overrides or {}, self.config))
        return cached[1]

    def topic_config(self, topic: str, name: str):
        """One topic config of `topic` (see topic_settings)."""
        return self.topic_settings(topic)[name]

    def cleanup_policy(self, topic: str) -> str:
        """`delete`, `compact` or both (comma-separated): the topic's cleanup.policy, else the broker's."""
        return self.topic_config(topic, "cleanup.policy")

    def log_config(self, topic: str) -> LogConfig:
        settings = self.topic_settings(topic)
        segment_ms = settings["segment.ms"]
        if "compact" in settings["cleanup.policy"]:
            # Kafka's maxSegmentMs: the active segment is never cleaned, so a compacted log rolls it
            # by max.compaction.lag.ms at the latest.
            segment_ms = min(segment_ms, settings["max.compaction.lag.ms"])
        return LogConfig(segment_ms=segment_ms, **{field: settings[name] for name, field in _LOG_FIELDS.items()})

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
        settings = self.topic_settings(topic)
        before, after = topic_configs.timestamp_bounds(configs or {}, self.config)
        compression = topic_configs.CODECS[settings["compression.type"]]
        config = ValidationConfig(
            max_message_bytes=settings["max.message.bytes"],
            timestamp_type=settings["message.timestamp.type"],
            timestamp_before_max_ms=before,
            timestamp_after_max_ms=after,
            compacted="compact" in settings["cleanup.policy"],
            compression=compression,
            compression_level=topic_configs.compression_level(compression, settings))
        self._validation_configs[topic] = (configs, config)
        return config

    def leader_throttled(self, partition: Partition, follower_id: int) -> bool:
        """Our fetches to `follower_id` count against the leader throttle (replication_quota.py)."""
        return (partition.leader is not None and follower_id not in partition.leader.committed_isr
                and is_throttled(self.topic_config(partition.topic, "leader.replication.throttled.replicas"),
                                 partition.index, self.broker_id))

    def follower_throttled(self, partition: Partition) -> bool:
        """Our fetches for `partition` count against the follower throttle."""
        return (partition.state is not None and self.broker_id not in partition.state.isr
                and is_throttled(self.topic_config(partition.topic, "follower.replication.throttled.replicas"),
                                 partition.index, self.broker_id))

    def replication_config(self, topic: str) -> ReplicationConfig:
        return ReplicationConfig(self.topic_config(topic, "min.insync.replicas"),
                                 self.config["replica.lag.time.max.ms"])

    # -- controller decisions ----------------------------------------------------

    VIEW_CHANGED = ("", -1)  # a waiters key: woken on every metadata change

    def apply_view(self, view: ClusterView, now_ms: int, keys=None, topics=()) -> None:
        """Bring hosted partitions in line with the controller's states in `view`: all of them,
        or, when that is all that changed, the partitions in `keys` and those of `topics` (created,
        deleted, reassigned or reconfigured): a topic's change costs its partitions, not the
        cluster's."""
        self.view = view
        self.hosting.on_live_brokers(frozenset(view.brokers), now_ms)  # who may join an ISR, or hold a HW back
        if keys is None:
            self._take_topics(view, None)
            keys = [(a.name, p) for a in view.topics.values() for p in a.replicas]
        elif topics:
            self._take_topics(view, set(topics))
            keys = [*keys, *((t, p) for t in sorted(topics) if (a := view.topics.get(t)) for p in a.replicas)]
        not_created = []
        for topic, index in keys:
            assignment = view.topics.get(topic)
            state = view.states.get((topic, index))
            if assignment is not None and state is not None:
                try:
                    self._apply_state(assignment, index, state, now_ms, view.state_zxids.get((topic, index)))
                except ReplicaNotCreated as e:
                    self.not_created[(topic, index)] = str(e)
                    not_created.append((topic, index))
        if not_created:
            shown = ", ".join(f"{t}-{p}" for t, p in not_created[:5]) + (", ..." if len(not_created) > 5 else "")
            log.error("could not create %d replica(s) (%s): %s; %s. They are answered KAFKA_STORAGE_ERROR and "
                      "tried again at the next metadata change and every log.retention.check.interval.ms; the "
                      "replicas already here go on serving", len(not_created), shown,
                      self.not_created[not_created[0]], self.descriptors.usage())
        self.waiters.notify(self.VIEW_CHANGED)

    def _take_topics(self, view: ClusterView, names: set[str] | None) -> None:
        """The topics `names` (None: every one) as `view` has them: deleted ones go, and the replicas
        here they no longer assign, hosted or only on disk (reassigned away, perhaps while this
        broker was down)."""
        def named(topic: str) -> bool:
            return names is None or topic in names
        for key in [k for k in self.not_created if named(k[0]) and not self._assigned_here(k)]:
            del self.not_created[key]
        for name in ({t for t, _ in self.partitions} if names is None else names) - view.topics.keys():
            self._drop_topic(name)
        for cache in (self._topic_settings, self._validation_configs):  # deleted topics' settings
            for name in [n for n in cache.keys() - view.topics.keys() if named(n)]:
                del cache[name]
        topics = view.topics if names is None else {t: view.topics[t] for t in names if t in view.topics}
        on_disk = self.logs.partitions_on_disk() if names is None else [
            (t, p) for t, a in topics.items() for p, replicas in a.replicas.items()
            if self.broker_id not in replicas and self.logs.is_on_disk((t, p))]
        for key in self.hosting.drop_assigned_elsewhere(topics, on_disk):
            log.info("%s-%d is assigned to other brokers: deleted its replica here", *key)

    def _assigned_here(self, key: tuple[str, int]) -> bool:
        assignment = self.view.topics.get(key[0])
        return assignment is not None and self.broker_id in assignment.replicas.get(key[1], ())

    def settled(self, topic: str, partitions: int) -> bool:
        """Whether each of the topic's first `partitions` replicas assigned here is hosted, or
        could not be created."""
        return all((topic, p) in self.partitions or (topic, p) in self.not_created
                   for p in range(partitions) if self._assigned_here((topic, p)))

    def not_created_of(self, topic: str) -> list[int]:
        """The partitions of `topic` whose replica here could not be created."""
        return sorted(p for t, p in self.not_created if t == topic)

    def _apply_state(self, assignment: TopicAssignment, index: int, state, now_ms: int,
                     state_zxid: int | None = None) -> None:
        partition = self.partitions.get((assignment.name, index))
        isr = partition.leader.committed_isr if partition is not None and partition.leader else None
        applied = self.hosting.apply_state(assignment, index, state, now_ms, state_zxid,
                                           self.view.own_broker_epoch(self.broker_id))
        if applied is None:
            return
        self.not_created.pop(applied[0].key, None)
        partition, effects = applied
        self._count_isr_change(partition, isr, effects)
        if effects.fenced:
            log.info("%s-%d: not leading from a state written before this broker registered (leader epoch %d, "
                     "isr %s); offline until the controller rewrites it", *partition.key, state.leader_epoch,
                     list(state.isr))
        elif effects.role_changed:
            log.info("%s-%d: %s, leader %d, leader epoch %d, isr %s", *partition.key, partition.role,
                     state.leader, state.leader_epoch, list(state.isr))

    # -- HostedPartitions' shell: storage and effects

    def open_partition(self, topic: str, index: int, now_ms: int) -> Partition:
        """A replica that cannot be created (too few descriptors would be left, or an EMFILE,
        ENOMEM, full disk... on the way) raises ReplicaNotCreated."""
        try:
            self.descriptors.check_room_for_replica()
            return self._open_partition(topic, index, now_ms)
        except MemoryError as e:
            raise ReplicaNotCreated("out of memory") from e
        except OSError as e:
            limits = f" ({self.descriptors.limits()})" if e.errno in OUT_OF_DESCRIPTORS else ""
            raise ReplicaNotCreated(f"{e}{limits}") from e

    def _open_partition(self, topic: str, index: int, now_ms: int) -> Partition:
        config = self.log_config(topic)
        topic_id = self.view.topics[topic].topic_id
        try:
            plog = self.logs.open_partition(topic, index, topic_id, config, now_ms)
        except ValueError as e:  # a copy of a deleted topic of the same name, or a damaged partition.metadata
            kept = self.logs.set_aside_partition(topic, index)
            log.warning("%s; moved to %s and kept (a copy of a deleted topic of the same name, or damage: an "
                        "operator may delete it); the replica starts empty", e, kept)
            plog = self.logs.open_partition(topic, index, topic_id, config, now_ms)
        partition = Partition(self.broker_id, topic, index, plog, self._checkpointed_hw.get((topic, index), 0),
                              transaction_verification=self.config["transaction.partition.verification.enable"])
        # indexes dropped as damaged are built again by replaying the whole log, snapshot ignored
        snapshot = None if plog.txn_indexes.lost else read_producer_snapshot(plog.directory)
        partition.load_producers(snapshot)
        if snapshot is None and plog.log_end_offset == 0:  # an empty log: no file says the same as an empty snapshot
            snapshot = partition.producer_snapshot()
        self._snapshots_on_disk[partition.key] = (plog.directory, snapshot)
        return partition

    def delete_log(self, key: tuple[str, int]) -> None:
        self._snapshots_on_disk.pop(key, None)
        self.logs.delete_partition(*key)

    def complete(self, completions: list[ProduceCompletion]) -> None:
        for completion in completions:
            future = self._produce_futures.pop(completion.key, None)
            if future is not None and not future.done():
                future.set_result(completion.error)

    def role_changed(self, partition: Partition) -> None:
        self.isr_outbox.withdraw(partition.key)
        self.on_role_change(partition)

    def send_isr_change(self, partition: Partition, proposal: AlterPartitionProposal) -> None:
        log.debug("%s-%d: proposing ISR %s", *partition.key, sorted(proposal.new_isr))
        self.isr_outbox.submit(partition.key, proposal, time.monotonic() * 1000)
        self.isr_outbox_ready.set()

    def _drop_topic(self, name: str) -> None:
        hosted = [k for k in self.partitions if k[0] == name]
        for key in hosted:
            self.hosting.drop(key)
        if hosted:
            log.info("deleted the replicas of topic %s", name)

    def lose_leadership_proof(self) -> None:
        """Our ZooKeeper session is suspended: stop acknowledging until it is known to be alive."""
        self.can_lead = False
        for partition in self.partitions.values():
            self.complete(partition.lose_leadership_proof())

    # -- produce -------------------------------------------------------------------

    def hosted(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            if topic in self.view.topics and index in self.view.topics[topic].replicas:
                if (topic, index) in self.not_created:
                    raise KafkaError(ErrorCode.kafka_storage_error, f"{topic}-{index}: its replica here could not "
                                     f"be created: {self.not_created[(topic, index)]}")
                raise KafkaError(ErrorCode.not_leader_or_follower, f"{topic}-{index} is not hosted here")
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"no partition {topic}-{index}")
        return partition

    def leader_partition(self, topic: str, index: int, current_leader_epoch: int = NO_EPOCH_CHECK) -> Partition:
        """The partition if we lead it and can prove it (the request's leader epoch checked first)."""
        partition = self.hosted(topic, index)
        error = partition.check_request(current_leader_epoch, proven=self.can_lead)
        if error:
            raise KafkaError(error, f"not the leader of {topic}-{index}" if error == ErrorCode.not_leader_or_follower
                             else f"{topic}-{index}: {error.name}")
        return partition

    def append(self, topic: str, index: int, records: bytes, acks: int, now_ms: int, *,
               validated: ValidatedBatch | None = None,
               verification_guard: VerificationGuard = SENTINEL,
               origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendResult:
        """Validate and append a produced batch as leader. Nothing is written unless the batch is
        valid (weir.log.log_validator) and its producer's state accepts it (a transactional
        batch: with the `verification_guard` of its KIP-890 verification), and a failed append
        leaves the log as it was. `validated`: the batch already validated (by `validate`)."""
        partition = self.leader_partition(topic, index)
        if validated is None:
            validated = validate_produced_batch(records, self.validation_config(topic), now_ms)
        try:
            produced = partition.produce(validated.records, validated.header, acks, now_ms, proven=self.can_lead,
                                         verification_guard=verification_guard, origin=origin)
        except RecordBatchTooLarge as e:
            raise KafkaError(ErrorCode.record_list_too_large, str(e)) from None
        except OSError as e:  # the log is as it was (all or nothing): the producer may retry
            raise KafkaError(ErrorCode.kafka_storage_error, f"{topic}-{index}: {e}") from None
        self.hosting.act(partition, produced.effects)
        self.metrics.produced(topic, len(records), validated.header.record_count)
        append_time = validated.log_append_time_ms
        if append_time != NO_TIMESTAMP and produced.duplicate_timestamp != NO_TIMESTAMP:
            append_time = produced.duplicate_timestamp  # a retry: when the original was appended
        return AppendResult(partition, produced.first_offset, produced.last_offset, append_time)

    def validate(self, topic: str, index: int, records: bytes, now_ms: int) -> tuple[Partition, ValidatedBatch]:
        """The leader partition and the validated batch, before an append (KIP-890 verification
        happens in between)."""
        partition = self.leader_partition(topic, index)
        return partition, validate_produced_batch(records, self.validation_config(topic), now_ms)

    def append_marker(self, topic: str, index: int, producer_id: int, producer_epoch: int, committed: bool,
                      coordinator_epoch: int, now_ms: int) -> tuple[Partition, int]:
        """WriteTxnMarkers: append a transaction marker as leader; (the partition, its offset)."""
        partition = self.leader_partition(topic, index)
        produced = partition.append_marker(producer_id, producer_epoch, committed, coordinator_epoch, now_ms,
                                           proven=self.can_lead)
        self.hosting.act(partition, produced.effects)
        return partition, produced.last_offset

    def await_replication(self, partition: Partition, last_offset: int, timeout_ms: int,
                          now_ms: int) -> asyncio.Future:
        """acks=all: a future answered with an ErrorCode once the HW passes `last_offset`."""
        key = next(self._produce_keys)
        future = asyncio.get_running_loop().create_future()
        done = partition.await_replication(key, last_offset, now_ms + timeout_ms, now_ms)
        if done is not None:
            future.set_result(done.error)
        else:
            self._produce_futures[key] = future
            self._parking.add(partition)
        return future

    # -- fetch -----------------------------------------------------------------------

    def read(self, params: FetchParams, topic: str, index: int, offset: int, max_bytes: int,
             current_leader_epoch: int, *, log_start_offset: int = -1, told: tuple[int, int, int] | None = None,
             min_one_batch: bool = True) -> FetchPartitionResult | None:
        """One partition of a fetch (`params`), the follower's log starting at `log_start_offset`.
        None when the follower's fetch session was `told` all there is (`Partition.answer_fetch`).
        With `min_one_batch` the first batch comes whole whatever `max_bytes` (KIP-74)."""
        replica_id, now_ms = params.replica_id, params.now_ms
        follower = replica_id >= 0
        try:
            partition = self.hosted(topic, index)
        except KafkaError as e:
            return FetchPartitionResult(index, e.code)
        answer = partition.answer_fetch(offset, current_leader_epoch, replica_id, now_ms,
                                        replica_epoch=params.replica_epoch, log_start_offset=log_start_offset,
                                        first=params.first, proven=self.can_lead,
                                        read_committed=params.read_committed, told=told)
        if answer is None:
            return None
        result, limit, effects = answer
        if effects is not None:
            self.hosting.act(partition, effects)
        if result.error_code or offset >= limit or (max_bytes <= 0 and not min_one_batch):
            return result
        throttled = follower and self.leader_throttled(partition, replica_id)
        if throttled and self.leader_quota.is_exceeded(now_ms / 1000):
            return result
        try:
            fetched = partition.log.read(offset, max(max_bytes, 0), limit, min_one_batch=min_one_batch)
        except OffsetOutOfRange:
            result.error_code = ErrorCode.offset_out_of_range
            return result
        except OSError as e:  # a closed segment's file could not be opened (out of descriptors, say)
            log.warning("%s-%d: a read failed: %s (%s)", topic, index, e, self.descriptors.describe())
            result.error_code = ErrorCode.kafka_storage_error
            return result
        result.records = [FileRegion(fd, position, size) for fd, position, size in fetched.file_slices]
        if result.aborted_transactions is not None and result.records:
            # Kafka's upper bound is the offset after the returned batches; the LSO bounds them
            # (an aborted transaction starting between the two is listed, and ignored by consumers).
            result.aborted_transactions = [txn.as_aborted_transaction()
                                            for txn in partition.aborted_transactions(offset, limit)]
        if throttled:
            self.leader_quota.record(sum(region.size for region in result.records), now_ms / 1000)
        self.metrics.fetched(topic, sum(region.size for region in result.records), follower)
        return result

    def on_broker_config_changed(self, now_ms: int) -> None:
        """A dynamic broker config changed: every topic's settings are read again."""
        self._topic_settings.clear()
        self._validation_configs.clear()
        for topic in sorted({p.topic for p in self.partitions.values()}):
            self.on_topic_config_changed(topic, now_ms)

    def on_topic_config_changed(self, topic: str, now_ms: int) -> None:
        """A topic's configs changed: its logs take the new settings from their next append, roll
        or retention pass on (as Kafka's), and its partitions the new min.insync.replicas."""
        log_config = self.log_config(topic)
        self.logs.topic_configs[topic] = log_config
        for partition in self.partitions.values():
            if partition.topic == topic:
                partition.log.config = log_config
                self.hosting.act(partition, partition.on_config(self.replication_config(topic), now_ms))

    # -- ISR changes (AlterPartition) -----------------------------------------------

    def on_isr_change_result(self, key: tuple[str, int], proposal: AlterPartitionProposal,
                             result: IsrChangeAccepted | IsrChangeRejected, now_ms: int) -> None:
        partition = self.partitions.get(key)
        if partition is not None:
            if isinstance(result, IsrChangeAccepted) and partition.leader and partition.leader.pending is proposal:
                log.info("%s-%d: ISR now %s", *key, sorted(result.isr))
            isr = partition.leader.committed_isr if partition.leader else None
            effects = partition.on_isr_change_result(proposal, result, now_ms)
            self._count_isr_change(partition, isr, effects)
            self.hosting.act(partition, effects)

    def _count_isr_change(self, partition: Partition, isr_before, effects: Effects) -> None:
        """IsrShrinks/IsrExpands: the ISR of a partition led here changed (by our AlterPartition's
        answer or by the controller's state, whichever arrived first), leadership unchanged."""
        if isr_before is not None and partition.leader is not None and not effects.role_changed:
            self.metrics.on_isr_change(isr_before, partition.leader.committed_isr)

    # -- timers ------------------------------------------------------------------------

    def check_isr(self, now_ms: int) -> None:
        """Every replica.lag.time.max.ms / 2: propose dropping followers that fell behind (a
        partition that decides nothing stays quiet in fetch sessions: HostedPartitions.act)."""
        for partition in self.partitions.values():
            self.hosting.act(partition, partition.check_isr(now_ms))

    def quiet_fetch_credit(self, topic: str, index: int, replica_id: int):
        """Partition.quiet_fetch_credit of a hosted leader's partition."""
        return self.partitions[(topic, index)].quiet_fetch_credit(replica_id)

    def expire_produces(self, now_ms: int) -> None:
        """Every 100 ms: answer the parked produces past their deadline. Only partitions that
        parked some are looked at, so an idle broker's timer does not grow with its partitions."""
        for partition in list(self._parking):
            self.hosting.act(partition, partition.expire(now_ms))
            if not len(partition.purgatory):
                self._parking.discard(partition)

    def maintain(self, now_ms: int) -> None:
        """Retention: delete whole segments past retention.ms / retention.bytes, never above the HW;
        not for a compact-only topic, whose old records the cleaner removes. And the transaction
        state of producers idle for producer.id.expiration.ms goes, and the replicas that could
        not be created are tried again."""
        if self.not_created:
            self.apply_view(self.view, now_ms, list(self.not_created))
        for partition in list(self.partitions.values()):
            partition.expire_producers(now_ms, self.config["producer.id.expiration.ms"])
            if "delete" not in self.cleanup_policy(partition.topic):
                continue
            deleted = partition.log.enforce_retention(now_ms, partition.high_watermark)
            if deleted:
                log.info("retention deleted %d segment(s) of %s-%d", deleted, *partition.key)
                self.hosting.news(partition.key, wake=False)  # a new log start to tell
                self.on_log_start_moved(partition.key)

    def flush_due(self, now_ms: int) -> None:
        """Every second: flush the logs due by flush.ms, and delete the files of removed segments
        whose file.delete.delay.ms is over."""
        self.logs.flush_if_due(now_ms)
        self.logs.delete_due_files(now_ms)

    def checkpoint(self) -> None:
        """Every log.flush.offset.checkpoint.interval.ms and at close: each partition's producer
        snapshot (only where it differs from the one on disk: writing every idle partition's file
        each minute stalls the loop), the recovery points, the HWs. A file that cannot be written
        now (out of descriptors, a full disk) is written at the next checkpoint; the others are
        written all the same."""
        failed: list[OSError] = []
        for key, partition in self.partitions.items():
            on_disk = (partition.log.directory, partition.producer_snapshot())
            if self._snapshots_on_disk.get(key) != on_disk:
                try:
                    write_producer_snapshot(*on_disk)
                except OSError as e:
                    failed.append(e)
                    continue
                self._snapshots_on_disk[key] = on_disk
        for write in (self.logs.write_checkpoints,
                      lambda: write_offset_checkpoint(self.root / HW_CHECKPOINT,
                                                      {key: p.high_watermark for key, p in self.partitions.items()})):
            try:
                write()
            except OSError as e:
                failed.append(e)
        if failed:
            log.error("checkpoint: %d file(s) not written, written at the next checkpoint: %s (%s)", len(failed),
                      failed[0], self.descriptors.describe())

    def close(self) -> None:
        for partition in self.partitions.values():  # appended, fate unknown: see lose_leadership_proof
            self.complete(partition.lose_leadership_proof())
        self.checkpoint()
        self.logs.close()
