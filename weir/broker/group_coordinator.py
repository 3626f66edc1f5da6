"""The group coordinator's asyncio shell: which groups this broker coordinates, and the effects.

A broker coordinates the groups whose `__consumer_offsets` partition it leads. When it becomes
leader of one (`on_role_change`), it loads that partition from the log start to its log end - a
new leader's log holds every acknowledged record, even above a high watermark that has not caught
up yet - and only then answers for its groups (COORDINATOR_LOAD_IN_PROGRESS meanwhile). When it
stops leading it drops them: parked requests get NOT_COORDINATOR and their clients look for the
new coordinator, which loads the same records.

Every change another coordinator must see - a commit, an assignment, an Empty group, a deletion,
an expiry - is appended as a record batch through the normal leader path with acks=all
(`ReplicaManager.append` + `await_replication`), and becomes visible here only once the ISR has
it. The decisions are in `weir.groups.group` (pure); this module feeds it requests, the clock and
store outcomes, resolves the futures of parked JoinGroup/SyncGroup requests, and keeps one timer
per group at the group's next deadline.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping

from weir.broker.internal_topic import InternalTopic
from weir.clock import now_ms
from weir.groups.consumer_group import ConsumerGroup, ConsumerGroupConfig, TopicInfo
from weir.groups.consumer_records import ConsumerGroupKey, group_records
from weir.groups.consumer_records import read_key as read_any_key
from weir.groups.consumer_records import rebuild
from weir.groups.group import Effects, Group, GroupConfig, GroupState, JoinResult, StoreGroup
from weir.groups.offsets import CommittedOffset
from weir.groups.placement import OFFSETS_TOPIC, partition_for
from weir.groups.records import (GroupKey, LoggedMarker, OffsetKey, OffsetValue, RecordFormatError, encode_batch,
                                 encode_transactional_batch, group_key, group_value, offset_key, offset_value,
                                 read_group_value, read_offset_value, read_offsets_log)
from weir.log import OffsetOutOfRange
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.record_batch import read_batch_header
from weir.transactions.partition_txns import SENTINEL, AppendOrigin

log = logging.getLogger(__name__)

LOAD_READ_BYTES = 1 << 20
MAX_RECORDS_PER_BATCH = 1000

# Kafka's GroupMetadataManager mapping of append errors to what a group client understands
_STORE_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
}
_OFFSET_SIZE_ERRORS = {ErrorCode.message_too_large, ErrorCode.record_list_too_large}



class GroupCoordinator:
    def __init__(self, replicas, config, create_topic, verify_transaction=None) -> None:
        """`replicas`: the broker's ReplicaManager (groups does not import the broker layer);
        `create_topic(name, partitions, replication_factor, assignment, configs)`: AdminApis';
        `verify_transaction(transactional_id, producer_id, epoch, partitions)`: async, KIP-890's
        question to the transaction coordinator (`TxnVerifier.verify`: the partitions not
        verified, with the error a producer gets)."""
        self.replicas = replicas
        self.config = config
        self.group_config = GroupConfig.from_broker(config)
        self._verify_transaction = verify_transaction
        self.groups: dict[str, Group] = {}  # classic ones
        # consumer-protocol groups (KIP-848): a group id is one or the other
        self.consumer_config = ConsumerGroupConfig.from_broker(config)
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self._written: dict[str, dict[bytes, bytes]] = {}  # a consumer group's records as last written
        self._written_version: dict[str, int] = {}  # ... and the group's version they were computed at
        self._consumer_timers: dict[str, asyncio.TimerHandle] = {}
        self.owned: dict[int, int] = {}  # offsets partition → leader epoch it was loaded in
        self.loading: dict[int, asyncio.Task] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self.offsets_topic = InternalTopic(replicas, create_topic, OFFSETS_TOPIC, "offsets.topic.replication.factor",
                                           self._offsets_topic_plan)
        self._expiry_task: asyncio.Task | None = None
        # transaction markers that landed in a partition while it was loading: (producer id, committed)
        self._completed_while_loading: dict[int, list[tuple[int, bool]]] = {}

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._expiry_task = loop.create_task(self._expire_periodically())

    def stop(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        for task in self.loading.values():
            task.cancel()
        for index in list(self.owned):
            self._unload(index)

    # -- where groups live -----------------------------------------------------------------

    def offsets_partition_count(self) -> int:
        assignment = self.replicas.view.topics.get(OFFSETS_TOPIC)
        return assignment.partition_count if assignment else self.config["offsets.topic.num.partitions"]

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.offsets_partition_count())

    def coordinator_error(self, group_id: str, empty_allowed: bool = False) -> ErrorCode | None:
        """None if this broker coordinates `group_id` now; else the error a client acts on. The
        empty group id is valid only where Kafka keeps it for backward compatibility
        (`empty_allowed`: OffsetCommit, OffsetFetch, DescribeGroups, DeleteGroups; Kafka's
        GroupCoordinator.isValidGroupId)."""
        if not group_id and not empty_allowed:
            return ErrorCode.invalid_group_id
        if OFFSETS_TOPIC not in self.replicas.view.topics:
            return ErrorCode.not_coordinator
        index = self.partition_of(group_id)
        if index in self.loading:
            return ErrorCode.coordinator_load_in_progress
        partition = self.replicas.partitions.get((OFFSETS_TOPIC, index))
        if index not in self.owned or partition is None or partition.leader is None or not self.replicas.can_lead:
            return ErrorCode.not_coordinator
        return None

    async def find_coordinator(self, group_id: str) -> tuple[ErrorCode, object]:
        """(error, BrokerInfo of the leader of the group's partition), creating the topic if need be.
        Any group id has one, the empty one too (Kafka's KafkaApis.getCoordinator)."""
        return await self.offsets_topic.coordinator(lambda: self.partition_of(group_id))

    def _offsets_topic_plan(self) -> tuple[int, int, dict[str, str]]:
        # Compacted, as Kafka's: the cleaner keeps each group's and offset's latest record, and the
        # tombstones of DeleteGroups, OffsetDelete and expiry remove them.
        return (self.config["offsets.topic.num.partitions"], self.config["offsets.topic.replication.factor"],
                {"cleanup.policy": "compact", "segment.bytes": str(self.config["offsets.topic.segment.bytes"])})

    # -- leadership: load and unload ---------------------------------------------------------

    def on_role_change(self, partition) -> None:
        """A replica's role changed (ReplicaManager calls this): follow the offsets partitions."""
        if partition.topic != OFFSETS_TOPIC:
            return
        index = partition.index
        if partition.leader is not None:
            if index in self.owned:
                self.owned[index] = partition.leader_epoch  # still ours, and every write of ours is in the log
                return
            task = self.loading.pop(index, None)
            if task is not None:
                task.cancel()
            self._completed_while_loading[index] = []
            self.loading[index] = asyncio.get_running_loop().create_task(self._load(index, partition.leader_epoch))
        else:
            task = self.loading.pop(index, None)
            if task is not None:
                task.cancel()
            self._completed_while_loading.pop(index, None)
            if index in self.owned:
                self._unload(index)

    async def _load(self, index: int, epoch: int) -> None:
        started = time.monotonic()
        try:
            groups, records = await self._read_partition(index, epoch)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", OFFSETS_TOPIC, index)
            self.loading.pop(index, None)
            return
        partition = self.replicas.partitions.get((OFFSETS_TOPIC, index))
        if partition is None or partition.leader is None or partition.leader_epoch != epoch:
            self.loading.pop(index, None)
            return
        for producer_id, committed in self._completed_while_loading.pop(index, []):
            for group in groups.values():
                group.complete_txn_offsets(producer_id, committed)
        for group in groups.values():
            old = self.groups.pop(group.group_id, None)
            if old is not None:
                self._answer(old.mark_dead(ErrorCode.not_coordinator, now_ms()))
            stale = self.consumer_groups.get(group.group_id)
            if stale is not None:
                self._drop_consumer_group(stale)
            if isinstance(group, ConsumerGroup):
                self.consumer_groups[group.group_id] = group
                self._written[group.group_id] = group_records(group)  # what its records in the log say
                self._written_version[group.group_id] = group.version
                self.schedule_consumer(group)
            else:
                self.groups[group.group_id] = group
                self._schedule(group)
        self.owned[index] = epoch
        self.loading.pop(index, None)
        log.log(logging.INFO if groups else logging.DEBUG,  # groups moving here matter; 50 empty partitions do not
                "%s-%d: coordinating %d group(s), loaded from %d record(s) in %.0f ms", OFFSETS_TOPIC, index,
                len(groups), records, (time.monotonic() - started) * 1000)

    async def _read_partition(self, index: int, epoch: int) -> tuple[dict[str, Group | ConsumerGroup], int]:
        partition = self.replicas.partitions[(OFFSETS_TOPIC, index)]
        plog = partition.log
        offset, end = plog.log_start_offset, plog.log_end_offset
        metadata: dict[str, object] = {}  # group → GroupValue or None (tombstone)
        consumer: dict[str, dict[ConsumerGroupKey, bytes | None]] = {}  # consumer group → its records
        offsets: dict[str, dict[tuple[str, int], CommittedOffset | None]] = {}
        # producer id → group → its transaction's offsets, until the marker (Kafka's loader)
        pending: dict[int, dict[str, dict[tuple[str, int], CommittedOffset]]] = {}
        count = 0
        while offset < end:
            try:
                data = plog.read(offset, LOAD_READ_BYTES, end).read_bytes()
            except OffsetOutOfRange:
                offset = plog.log_start_offset
                continue
            entries, next_offset, skipped = read_offsets_log(data)
            if skipped:
                log.warning("%s-%d: skipped %d batch(es) at %d that are compressed or emptied control batches",
                            OFFSETS_TOPIC, index, skipped, offset)
            if next_offset <= offset:
                raise RecordFormatError(f"{OFFSETS_TOPIC}-{index}: no whole batch at offset {offset}")
            for entry in entries:
                count += 1
                if isinstance(entry, LoggedMarker):
                    _replay_marker(offsets, pending.pop(entry.producer_id, {}), entry.committed)
                    continue
                try:
                    key = read_any_key(entry.key)
                    if isinstance(key, ConsumerGroupKey):
                        consumer.setdefault(key.group, {})[key] = entry.value
                    elif isinstance(key, OffsetKey):
                        value = None if entry.value is None else read_offset_value(entry.value)
                        committed = None if value is None else \
                            CommittedOffset(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                                            value.expire_timestamp, entry.offset)
                        if entry.producer_id is None:
                            offsets.setdefault(key.group, {})[(key.topic, key.partition)] = committed
                        elif committed is not None:
                            pending.setdefault(entry.producer_id, {}).setdefault(key.group, {})[
                                (key.topic, key.partition)] = committed
                    elif isinstance(key, GroupKey):
                        metadata[key.group] = None if entry.value is None else read_group_value(entry.value)
                except (RecordFormatError, UnicodeDecodeError) as e:
                    log.warning("%s-%d: unreadable record at offset %d: %s", OFFSETS_TOPIC, index, entry.offset, e)
            offset = next_offset
            await asyncio.sleep(0)  # let the broker serve others between chunks
            if partition.leader is None or partition.leader_epoch != epoch:
                return {}, count
        now = now_ms()
        groups: dict[str, Group | ConsumerGroup] = {}
        open_groups = {group_id for by_group in pending.values() for group_id in by_group}
        for group_id in set(metadata) | set(offsets) | open_groups | set(consumer):
            value = metadata.get(group_id)
            group = None
            if group_id in consumer:
                live = {k: v for k, v in consumer[group_id].items() if v is not None}
                group, problems = rebuild(group_id, live, self.consumer_config, index, now)
                for problem in problems:
                    log.warning("%s-%d: %s", OFFSETS_TOPIC, index, problem)
            if group is None:
                group = Group.from_record(group_id, value, self.group_config, now, index) if value is not None \
                    else Group(group_id, self.group_config, now, index)
            group.offsets = {k: v for k, v in offsets.get(group_id, {}).items() if v is not None}
            for producer_id, by_group in pending.items():
                if group_id in by_group:
                    group.pending_txn_offsets[producer_id] = by_group[group_id]
            if isinstance(group, Group) and value is None and not group.offsets and not group.pending_txn_offsets:
                continue  # deleted
            groups[group_id] = group
        return groups, count

    def _unload(self, index: int) -> None:
        self.owned.pop(index, None)
        now = now_ms()
        gone = [g for g in self.groups.values() if g.partition == index]
        for group in gone:
            del self.groups[group.group_id]
            timer = self._timers.pop(group.group_id, None)
            if timer is not None:
                timer.cancel()
            if not group.is_(GroupState.DEAD):
                self._answer(group.mark_dead(ErrorCode.not_coordinator, now))
        consumer = [g for g in self.consumer_groups.values() if g.partition == index]
        for group in consumer:
            self._drop_consumer_group(group)
            self._written.pop(group.group_id, None)
            self._written_version.pop(group.group_id, None)
        log.info("%s-%d: no longer coordinating its %d group(s)", OFFSETS_TOPIC, index, len(gone) + len(consumer))

    # -- groups, effects and timers ------------------------------------------------------

    def group(self, group_id: str, create: bool) -> Group | None:
        """The classic group `group_id`; with `create`, made if there is none, or in place of an
        empty consumer-protocol group (its offsets kept, Kafka's classicGroupJoinToClassicGroup).
        None for a consumer group with members: a group id is of one type."""
        group = self.groups.get(group_id)
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None and not (create and consumer.is_empty()):
            return None
        if group is None and create:
            group = self.groups[group_id] = Group(group_id, self.group_config, now_ms(), self.partition_of(group_id))
            if consumer is not None:
                group.offsets, group.pending_txn_offsets = consumer.offsets, consumer.pending_txn_offsets
                self._drop_consumer_group(consumer)
                asyncio.get_running_loop().create_task(self._tombstone_consumer_records(consumer))
                log.info("group %s: the empty consumer-protocol group is now a classic group", group_id)
        return group

    # -- consumer-protocol groups (KIP-848) ----------------------------------------------------

    def consumer_group(self, group_id: str, create: bool) -> tuple[ConsumerGroup | None, ErrorCode, str | None]:
        """The consumer group `group_id` (made with `create`, also in place of an empty classic
        group, its offsets kept); else the error (GROUP_ID_NOT_FOUND: none, or a classic one with
        members: Kafka's getOrMaybeCreateConsumerGroup)."""
        group = self.consumer_groups.get(group_id)
        if group is not None:
            return group, ErrorCode.none, None
        classic = self.groups.get(group_id)
        if classic is not None and not (create and classic.is_(GroupState.EMPTY)):
            return None, ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group."
        if not create:
            return None, ErrorCode.group_id_not_found, f"Consumer group {group_id} not found."
        group = self.consumer_groups[group_id] = ConsumerGroup(group_id, self.consumer_config,
                                                               self.partition_of(group_id))
        self._written[group_id] = {}
        if classic is not None:
            group.offsets, group.pending_txn_offsets = classic.offsets, classic.pending_txn_offsets
            del self.groups[group_id]
            self._answer(classic.mark_dead(ErrorCode.not_coordinator, now_ms()))
            timer = self._timers.pop(group_id, None)
            if timer is not None:
                timer.cancel()
            asyncio.get_running_loop().create_task(self.append(group.partition, [(group_key(group_id), None)]))
            log.info("group %s: the empty classic group is now a consumer-protocol group", group_id)
        return group, ErrorCode.none, None

    def topics(self) -> "_ViewTopics":
        return _ViewTopics(self.replicas.view.topics)

    async def store_consumer_group(self, group: ConsumerGroup) -> ErrorCode:
        """Append the group's records that differ from what was last written, and tombstones
        for those gone, with acks=all. What failed is written again with the next change."""
        version = group.version
        if self._written_version.get(group.group_id) == version:
            return ErrorCode.none  # nothing the records hold changed since they were written
        written = self._written.setdefault(group.group_id, {})
        current = group_records(group)
        changed = [(k, v) for k, v in current.items() if written.get(k) != v]
        changed += [(k, None) for k in written if k not in current]
        if not changed:
            self._written_version[group.group_id] = version
            return ErrorCode.none
        error, _ = await self.append(group.partition, changed)
        if error:
            log.warning("group %s: storing %d record(s) failed: %s", group.group_id, len(changed), error.name)
            return error
        if self.consumer_groups.get(group.group_id) is group:
            for key, value in changed:
                if value is None:
                    written.pop(key, None)
                else:
                    written[key] = value
            # a later store may have finished first; its diff held this one's changes too
            self._written_version[group.group_id] = max(version, self._written_version.get(group.group_id, -1))
        return ErrorCode.none

    async def _tombstone_consumer_records(self, group: ConsumerGroup) -> ErrorCode:
        keys = set(group_records(group)) | set(self._written.pop(group.group_id, {}))
        self._written_version.pop(group.group_id, None)
        error, _ = await self.append(group.partition, [(key, None) for key in sorted(keys)])
        return error

    def _drop_consumer_group(self, group: ConsumerGroup) -> None:
        if self.consumer_groups.get(group.group_id) is group:
            del self.consumer_groups[group.group_id]
        group.mark_dead()
        timer = self._consumer_timers.pop(group.group_id, None)
        if timer is not None:
            timer.cancel()

    def schedule_consumer(self, group: ConsumerGroup) -> None:
        timer = self._consumer_timers.pop(group.group_id, None)
        if timer is not None:
            timer.cancel()
        deadline = group.next_deadline()
        if group.dead or deadline >= 2**62:
            return
        delay_s = max(deadline - now_ms(), 0) / 1000
        self._consumer_timers[group.group_id] = asyncio.get_running_loop().call_later(
            delay_s, self._on_consumer_timer, group)

    def _on_consumer_timer(self, group: ConsumerGroup) -> None:
        self._consumer_timers.pop(group.group_id, None)
        if self.consumer_groups.get(group.group_id) is not group:
            return
        for member_id, why in group.on_timer(now_ms()):
            log.info("group %s: member %s fenced (%s); group epoch %d", group.group_id, member_id, why,
                     group.group_epoch)
        asyncio.get_running_loop().create_task(self.store_consumer_group(group))
        self.schedule_consumer(group)

    async def delete_consumer_group(self, group: ConsumerGroup) -> ErrorCode:
        """DeleteGroups of an empty consumer group: tombstones for its offsets and records."""
        self._drop_consumer_group(group)
        error, _ = await self.append(group.partition, [(offset_key(group.group_id, t, p), None)
                                                       for t, p in group.offsets])
        return error or await self._tombstone_consumer_records(group)

    @staticmethod
    def new_member_id(client_id: str) -> str:
        return f"{client_id or 'member'}-{uuid.uuid4()}"

    def apply(self, group: Group, effects: Effects) -> None:
        """Carry out what the core decided: answer parked requests, store metadata, re-arm the timer."""
        self._answer(effects)
        if effects.store is not None:
            asyncio.get_running_loop().create_task(self._store_group(group, effects.store))
        self._schedule(group)
        if group.is_(GroupState.EMPTY) and group.generation == 0 and not group.members and not group.pending_members \
                and not group.offsets and not group.pending_txn_offsets and self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]  # a join that failed before the group ever formed

    @staticmethod
    def _answer(effects: Effects) -> None:
        for future, result in effects.answers:
            if not future.done():
                future.set_result(result)

    def _schedule(self, group: Group) -> None:
        timer = self._timers.pop(group.group_id, None)
        if timer is not None:
            timer.cancel()
        deadline = group.next_deadline()
        if group.is_(GroupState.DEAD) or deadline >= 2**62:
            return
        loop = asyncio.get_running_loop()
        delay_s = max(deadline - now_ms(), 0) / 1000
        self._timers[group.group_id] = loop.call_later(delay_s, self._on_timer, group)

    def _on_timer(self, group: Group) -> None:
        self._timers.pop(group.group_id, None)
        if self.groups.get(group.group_id) is not group:
            return
        self.apply(group, group.on_timer(now_ms()))

    async def _store_group(self, group: Group, store: StoreGroup) -> None:
        value = None if store.value is None else group_value(store.value)
        error, _ = await self.append(group.partition, [(group_key(store.group_id), value)])
        if error in _OFFSET_SIZE_ERRORS:
            error = ErrorCode.unknown_server_error
        elif error == ErrorCode.coordinator_not_available and store.purpose == "assignment":
            error = ErrorCode.rebalance_in_progress  # Kafka: the members rejoin
        if error:
            log.warning("group %s: storing its metadata (%s) failed: %s", group.group_id, store.purpose, error.name)
        if self.groups.get(group.group_id) is group:
            self.apply(group, group.on_group_stored(store, error, now_ms()))
        elif store.token is not None and not store.token.done():
            # unloaded meanwhile: the static rejoiner's JoinGroup is parked nowhere else
            store.token.set_result(JoinResult(ErrorCode.not_coordinator, store.member_id))

    async def append(self, index: int, records: list[tuple[bytes, bytes | None]],
                     transaction: tuple[str, int, int] | None = None) -> tuple[ErrorCode, int]:
        """Append records to our offsets partition with acks=all: (error, base offset). With
        `transaction` (transactional id, producer id, epoch): as the producer's transactional
        batch (TxnOffsetCommit), verified with its transaction coordinator first (KIP-890)."""
        now = now_ms()
        base = -1
        try:
            for start in range(0, len(records), MAX_RECORDS_PER_BATCH):
                chunk = records[start:start + MAX_RECORDS_PER_BATCH]
                if transaction is None:
                    partition, first, last, _ = self.replicas.append(OFFSETS_TOPIC, index, encode_batch(chunk, now),
                                                                     -1, now)
                else:
                    partition, first, last = await self._append_transactional(index, chunk, transaction, now)
                base = first if base < 0 else base
                error = await self.replicas.await_replication(partition, last, self.config["offsets.commit.timeout.ms"],
                                                              now)
                if error:
                    return _STORE_ERRORS.get(ErrorCode(error), ErrorCode(error)), base
        except KafkaError as e:
            return _STORE_ERRORS.get(e.code, e.code), base
        return ErrorCode.none, base

    async def _append_transactional(self, index: int, records, transaction: tuple[str, int, int],
                                    now: int) -> tuple[object, int, int]:
        """Kafka's storeOffsets for a transactional producer: the partition asks for a KIP-890
        guard, the transaction coordinator confirms the partition is in the transaction, and the
        append carries the guard. Raises KafkaError."""
        transactional_id, producer_id, producer_epoch = transaction
        batch = encode_transactional_batch(records, now, producer_id, producer_epoch)
        guard = self.replicas.leader_partition(OFFSETS_TOPIC, index).start_verification(read_batch_header(batch), now)
        if guard is SENTINEL:
            appended = self.replicas.append(OFFSETS_TOPIC, index, batch, -1, now, origin=AppendOrigin.COORDINATOR)
        else:
            if self._verify_transaction is None:
                raise KafkaError(ErrorCode.invalid_txn_state, "no transaction coordinator to verify with")
            unverified = await self._verify_transaction(transactional_id, producer_id, producer_epoch,
                                                        [(OFFSETS_TOPIC, index)])
            if unverified:  # a retriable NOT_ENOUGH_REPLICAS tells the client COORDINATOR_NOT_AVAILABLE
                error = next(iter(unverified.values()))
                raise KafkaError(error, f"transaction {transactional_id} not verified: {error.name}")
            appended = self.replicas.append(OFFSETS_TOPIC, index, batch, -1, now, verification_guard=guard,
                                            origin=AppendOrigin.COORDINATOR)
        return appended.partition, appended.first_offset, appended.last_offset

    # -- offsets ------------------------------------------------------------------------------

    async def commit_offsets(self, group: Group, offsets: dict[tuple[str, int], OffsetValue]) -> ErrorCode:
        keys = list(offsets)
        records = [(offset_key(group.group_id, t, p), offset_value(offsets[(t, p)])) for t, p in keys]
        error, base = await self.append(group.partition, records)
        if error in _OFFSET_SIZE_ERRORS:
            return ErrorCode.invalid_commit_offset_size
        if error:
            return error
        group.on_offsets_committed({key: CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                                                         v.expire_timestamp, base + i)
                                    for i, (key, v) in enumerate(offsets.items())})
        return ErrorCode.none

    async def commit_txn_offsets(self, group: Group, transactional_id: str, producer_id: int, producer_epoch: int,
                                 offsets: dict[tuple[str, int], OffsetValue]) -> ErrorCode:
        """TxnOffsetCommit: pending at once, written as the producer's transactional batch, visible
        once the transaction's commit marker lands (`complete_transaction`)."""
        prepared = {key: CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)
                    for key, v in offsets.items()}
        group.prepare_txn_offsets(producer_id, prepared)
        records = [(offset_key(group.group_id, t, p), offset_value(v)) for (t, p), v in offsets.items()]
        error, base = await self.append(group.partition, records, (transactional_id, producer_id, producer_epoch))
        if error:
            group.on_txn_offsets_failed(producer_id, prepared)
            return ErrorCode.invalid_commit_offset_size if error in _OFFSET_SIZE_ERRORS else error
        group.on_txn_offsets_written(producer_id, prepared, {key: base + i for i, key in enumerate(prepared)})
        return ErrorCode.none

    def complete_transaction(self, partition_index: int, producer_id: int, committed: bool) -> None:
        """A transaction marker of `producer_id` was appended to `__consumer_offsets` partition
        `partition_index` (the WriteTxnMarkers handler calls this, Kafka's
        onTransactionCompleted): its groups' pending offsets become visible or are dropped. A
        partition still loading applies it once loaded (its load may not reach the marker)."""
        if partition_index in self.loading:
            self._completed_while_loading.setdefault(partition_index, []).append((producer_id, committed))
            return
        for group in [*self.groups.values(), *self.consumer_groups.values()]:
            if group.partition == partition_index and producer_id in group.pending_txn_offsets:
                group.complete_txn_offsets(producer_id, committed)

    async def delete_group(self, group: Group) -> ErrorCode:
        """Tombstones for the group's offsets and metadata (the group is already Dead here)."""
        records = [(offset_key(group.group_id, t, p), None) for t, p in group.offsets]
        records.append((group_key(group.group_id), None))
        error, _ = await self.append(group.partition, records)
        return error

    async def delete_offsets(self, group: Group, keys) -> ErrorCode | None:
        """Tombstones for the group's committed offsets of `keys` (OffsetDelete, expiry); they are
        forgotten once written, unless a later commit replaced them meanwhile."""
        keys = [key for key in keys if key in group.offsets]
        if not keys:
            return None
        error, base = await self.append(group.partition, [(offset_key(group.group_id, t, p), None) for t, p in keys])
        if error:
            return error
        group.remove_offsets(keys, base)
        return None

    async def _expire_periodically(self) -> None:
        interval = self.config["offsets.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_offsets(now_ms())
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("offset expiry failed")

    async def expire_offsets(self, now: int) -> int:
        """Tombstone expired offsets; an Empty group left with none is deleted (Kafka's cleanupGroupMetadata)."""
        expired = 0
        for group in list(self.groups.values()):
            if group.partition not in self.owned or group.is_(GroupState.DEAD):
                continue
            keys = group.expired_offsets(now)
            if keys:
                error = await self.delete_offsets(group, keys)
                if error:
                    log.warning("group %s: expiring %d offset(s) failed: %s", group.group_id, len(keys), error.name)
                    continue
                expired += len(keys)
                log.info("group %s: %d committed offset(s) expired", group.group_id, len(keys))
            if group.is_(GroupState.EMPTY) and not group.offsets and not group.pending_members \
                    and not group.pending_txn_offsets \
                    and self.groups.get(group.group_id) is group:
                self._answer(group.mark_dead(ErrorCode.coordinator_not_available, now))
                del self.groups[group.group_id]
                await self.append(group.partition, [(group_key(group.group_id), None)])
                log.info("group %s: empty and without offsets; removed", group.group_id)
        for group in list(self.consumer_groups.values()):
            if group.partition not in self.owned:
                continue
            keys = group.expired_offsets(now)
            if keys and not await self.delete_offsets(group, keys):
                expired += len(keys)
            if group.is_empty() and not group.offsets and not group.pending_txn_offsets \
                    and self.consumer_groups.get(group.group_id) is group:
                await self.delete_consumer_group(group)
                log.info("group %s: empty and without offsets; removed", group.group_id)
        return expired


class _ViewTopics(Mapping):
    """The cluster's topics as the consumer group core reads them (by name, with id and
    partition count), over the broker's view without a copy."""

    def __init__(self, topics) -> None:
        self._topics = topics

    def __getitem__(self, name: str) -> TopicInfo:
        a = self._topics[name]
        return TopicInfo(a.topic_id, a.name, a.partition_count)

    def __iter__(self):
        return iter(self._topics)

    def __len__(self) -> int:
        return len(self._topics)


def _replay_marker(offsets: dict[str, dict], transaction: dict[str, dict[tuple[str, int], CommittedOffset]],
                   committed: bool) -> None:
    """Loading: a marker ends its producer's transaction; a commit's offsets win over older records."""
    if not committed:
        return
    for group_id, by_partition in transaction.items():
        loaded = offsets.setdefault(group_id, {})
        for key, offset in by_partition.items():
            current = loaded.get(key)
            if current is None or current.log_offset < offset.log_offset:
                loaded[key] = offset
