"""The transaction coordinator's asyncio shell (Kafka's TransactionCoordinator and
TransactionStateManager around the pure `weir.transactions.coordinator.TransactionCoordinator`).

A broker coordinates the transactional ids whose `__transaction_state` partition it leads, at the
partition's leader epoch (the coordinator epoch that fences its markers). When it becomes leader
of one (`on_role_change`), it reads the partition from the log start to its log end, as the group
coordinator does with `__consumer_offsets`, and hands the records to the core, which answers
COORDINATOR_LOAD_IN_PROGRESS meanwhile and afterwards re-sends the markers of every transaction
that was decided but not completed. When it stops leading, the core forgets the partition.

The core's effects are carried out here: each `Write` is appended as a one-record batch through
the normal leader path with acks=all (`ReplicaManager.append` + `await_replication`) and its
outcome goes back through `on_write_done` (the answer to the request waits for it); markers go to
`MarkerSender`; completions that failed to be written are appended again after a backoff. Two
timers run the core's periodic work: aborting timed-out transactions and expiring idle ids.
Producer ids come from the cluster-wide ZooKeeper allocator (async: fetched before the core is
asked again when it needs one).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable

from weir.broker.internal_topic import InternalTopic
from weir.broker.marker_sender import MarkerSender
from weir.clock import now_ms
from weir.log import OffsetOutOfRange
from weir.protocol.errors import ErrorCode, KafkaError
from weir.transactions.coordinator import (Answer, Effects, MarkersToSend, TransactionConfig, TransactionCoordinator,
                                           TransactionResult, UnexpectedMarkerError, Write)
from weir.transactions.state_log import TRANSACTION_STATE_TOPIC, RecordFormatError, decode_batches, encode_batch

log = logging.getLogger(__name__)

RETRY_BACKOFF_MS = 100  # Kafka's retry.backoff.ms for markers and completions
ANSWER_WAIT_S = 120  # a bound on any request's wait for its write (each write is bounded anyway)



class _NeedProducerId(Exception):
    """The core asked for a producer id: fetch one (async) and ask again."""


def _no_producer_id() -> int:
    raise _NeedProducerId


class TransactionCoordinatorShell:
    def __init__(self, replicas, config, create_topic, allocate_producer_id: Callable[[], Awaitable[int]],
                 connect) -> None:
        """`replicas`: the broker's ReplicaManager; `create_topic`: AdminApis'; `allocate_producer_id`:
        the ZooKeeper allocator's `next_id`; `connect(broker_id)`: a new BrokerConnection to a peer."""
        self.replicas = replicas
        self.config = config
        self.core = TransactionCoordinator(TransactionConfig.from_broker(config))
        self._allocate = allocate_producer_id
        self.markers = MarkerSender(replicas, connect, self._on_markers_written, self._on_markers_unroutable,
                                    RETRY_BACKOFF_MS, config["request.timeout.ms"])
        self.loading: dict[int, asyncio.Task] = {}
        self.epochs: dict[int, int] = {}  # partition → leader epoch loaded (or being loaded) at
        self.state_topic = InternalTopic(replicas, create_topic, TRANSACTION_STATE_TOPIC,
                                         "transaction.state.log.replication.factor", self._state_topic_plan)
        self._tasks: set[asyncio.Task] = set()
        self._timers: list[asyncio.Task] = []

    @property
    def txn_config(self) -> TransactionConfig:
        return self.core.config

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._timers = [
            loop.create_task(self._every(self.txn_config.abort_timed_out_transactions_interval_ms,
                                         self.core.abort_timed_out_transactions)),
            loop.create_task(self._every(self.txn_config.remove_expired_transactional_ids_interval_ms,
                                         self.core.expire_transactional_ids)),
        ]

    async def stop(self) -> None:
        for task in [*self._timers, *self.loading.values(), *self._tasks]:
            task.cancel()
        await self.markers.close()
        for index in list(self.epochs):
            self.core.unload(index)
        self.epochs.clear()

    async def _every(self, interval_ms: int, work: Callable[[int], Effects]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                self.apply(work(now_ms()))
            except Exception:
                log.exception("transaction coordinator: periodic work failed")

    # -- where transactional ids live ------------------------------------------------------

    def _sync_partition_count(self) -> None:
        """The core places ids by the topic's real partition count (it may have been created with
        another transaction.state.log.num.partitions); only while it holds no partition."""
        assignment = self.replicas.view.topics.get(TRANSACTION_STATE_TOPIC)
        if assignment is not None and assignment.partition_count != self.txn_config.num_partitions \
                and not self.epochs:
            self.core.config = dataclasses.replace(self.txn_config, num_partitions=assignment.partition_count)

    def partition_of(self, transactional_id: str) -> int:
        self._sync_partition_count()
        return self.core.partition_for(transactional_id)

    async def find_coordinator(self, transactional_id: str) -> tuple[ErrorCode, object]:
        """(error, BrokerInfo of the leader of the id's partition), creating the topic if need be."""
        if not transactional_id:
            return ErrorCode.invalid_request, None
        return await self.state_topic.coordinator(lambda: self.partition_of(transactional_id))

    def _state_topic_plan(self) -> tuple[int, int, dict[str, str]]:
        cfg = self.txn_config
        return cfg.num_partitions, cfg.replication_factor, cfg.topic_configs()

    # -- leadership: load and unload ---------------------------------------------------------

    def on_role_change(self, partition) -> None:
        """A replica's role changed (ReplicaManager calls this): follow the state partitions."""
        if partition.topic != TRANSACTION_STATE_TOPIC:
            return
        index = partition.index
        dropped = self.replicas.partitions.get(partition.key) is not partition
        if partition.leader is not None and not dropped:
            epoch = partition.leader_epoch
            if self.epochs.get(index) == epoch:
                return  # loaded or loading at this epoch already
            self._cancel_load(index)
            self._sync_partition_count()
            self.epochs[index] = epoch
            self.core.start_loading(index, epoch)
            self.loading[index] = asyncio.get_running_loop().create_task(self._load(index, epoch))
        else:
            self._cancel_load(index)
            if self.epochs.pop(index, None) is not None:
                self.core.unload(index, None if dropped else partition.leader_epoch)
                log.info("%s-%d: no longer coordinating its transactional ids", TRANSACTION_STATE_TOPIC, index)

    def _cancel_load(self, index: int) -> None:
        task = self.loading.pop(index, None)
        if task is not None:
            task.cancel()

    async def _load(self, index: int, epoch: int) -> None:
        started = time.monotonic()
        try:
            records = await self._read_partition(index, epoch)
            if records is None:
                return  # no longer the leader at this epoch: on_role_change has dealt with it
            fx = self.core.finish_loading(index, epoch, records, now_ms())
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed: its transactional ids stay unavailable here", TRANSACTION_STATE_TOPIC,
                          index)
            self.core.unload(index, epoch)
            if self.epochs.get(index) == epoch:
                del self.epochs[index]  # a later leadership loads it again
            return
        finally:
            if self.loading.get(index) is asyncio.current_task():
                del self.loading[index]
        if fx.skipped_records:
            log.warning("%s-%d: skipped %d record(s) with a key version we do not know", TRANSACTION_STATE_TOPIC, index,
                        fx.skipped_records)
        held = sum(1 for m in self.core.transactions() if self.core.partition_for(m.transactional_id) == index)
        log.log(logging.INFO if held else logging.DEBUG,
                "%s-%d: coordinating %d transactional id(s) at coordinator epoch %d, loaded from %d record(s) in "
                "%.0f ms", TRANSACTION_STATE_TOPIC, index, held, epoch, len(records),
                (time.monotonic() - started) * 1000)
        self.apply(fx)

    async def _read_partition(self, index: int, epoch: int) -> list[tuple[bytes, bytes | None]] | None:
        partition = self.replicas.partitions[(TRANSACTION_STATE_TOPIC, index)]
        plog = partition.log
        offset, end = plog.log_start_offset, plog.log_end_offset
        records: list[tuple[bytes, bytes | None]] = []
        while offset < end:
            try:
                data = plog.read(offset, self.txn_config.load_buffer_size, end).read_bytes()
            except OffsetOutOfRange:
                offset = plog.log_start_offset
                continue
            decoded, next_offset, _skipped = decode_batches(data)
            if next_offset <= offset:
                raise RecordFormatError(f"{TRANSACTION_STATE_TOPIC}-{index}: no whole batch at offset {offset}")
            records.extend((key, value) for _offset, key, value in decoded)
            offset = next_offset
            await asyncio.sleep(0)  # let the broker serve others between chunks
            if partition.leader is None or partition.leader_epoch != epoch:
                return None
        return records

    # -- requests ------------------------------------------------------------------------------

    async def _ask(self, call: Callable[[asyncio.Future], Effects]) -> Answer:
        """Run a core request with a future as its token; its answer may wait for a write."""
        future = asyncio.get_running_loop().create_future()
        return await self._wait(future, call(future))

    async def init_producer_id(self, transactional_id: str | None, timeout_ms: int,
                               expected: tuple[int, int] | None) -> Answer:
        future = asyncio.get_running_loop().create_future()
        try:
            fx = self.core.init_producer_id(transactional_id, timeout_ms, expected, now_ms(), _no_producer_id, future)
        except _NeedProducerId:
            try:
                producer_id = await self._allocate()
            except Exception as e:
                log.warning("no producer id to give: %r", e)
                return Answer(ErrorCode.coordinator_not_available)
            fx = self.core.init_producer_id(transactional_id, timeout_ms, expected, now_ms(), lambda: producer_id,
                                            future)
        return await self._wait(future, fx)

    async def _wait(self, future: asyncio.Future, fx: Effects) -> Answer:
        self.apply(fx)
        try:
            async with asyncio.timeout(ANSWER_WAIT_S):
                return await future
        except TimeoutError:
            return Answer(ErrorCode.request_timed_out)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions) -> Answer:
        return await self._ask(lambda token: self.core.add_partitions_to_txn(
            transactional_id, producer_id, producer_epoch, partitions, now_ms(), token))

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                          offsets_partitions: int) -> Answer:
        return await self._ask(lambda token: self.core.add_offsets_to_txn(
            transactional_id, producer_id, producer_epoch, group_id, offsets_partitions, now_ms(), token))

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool) -> Answer:
        result = TransactionResult.COMMIT if committed else TransactionResult.ABORT
        return await self._ask(lambda token: self.core.end_txn(
            transactional_id, producer_id, producer_epoch, result, now_ms(), token))

    # -- effects -------------------------------------------------------------------------------

    def apply(self, fx: Effects, marker_delay_s: float = 0.0) -> None:
        for token, answer in fx.answers:
            if isinstance(token, asyncio.Future) and not token.done():
                token.set_result(answer)
        for write in fx.writes:
            self._spawn(self._append(write))
        for write in fx.retry_writes:
            self._spawn(self._append(write, RETRY_BACKOFF_MS / 1000))
        for markers in fx.markers:
            self.markers.send(markers, marker_delay_s)

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _append(self, write: Write, delay_s: float = 0.0) -> None:
        if delay_s:
            await asyncio.sleep(delay_s)
        error = await self._append_record(write)
        if error:
            log.info("%s: writing %s (%s) to %s-%d failed: %s", write.transactional_id, write.transit.state.kafka_name,
                     write.purpose.value, TRANSACTION_STATE_TOPIC, write.partition, error.name)
        try:
            self.apply(self.core.on_write_done(write, error, now_ms()))
        except Exception:
            log.exception("%s: the outcome of writing %s could not be applied", write.transactional_id,
                          write.transit.state.kafka_name)

    async def _append_record(self, write: Write) -> ErrorCode:
        """Append the write's record while we lead its partition at its coordinator epoch (acks=all)."""
        partition = self.replicas.partitions.get((TRANSACTION_STATE_TOPIC, write.partition))
        if partition is None or partition.leader is None or partition.leader_epoch != write.coordinator_epoch:
            return ErrorCode.not_leader_or_follower
        now = now_ms()
        try:
            appended, _first, last, _ = self.replicas.append(TRANSACTION_STATE_TOPIC, write.partition,
                                                             encode_batch([(write.key(), write.value())], now), -1, now)
            error = await self.replicas.await_replication(appended, last, self.config["request.timeout.ms"], now)
        except KafkaError as e:
            return e.code
        return ErrorCode(error)

    # -- markers ---------------------------------------------------------------------------

    def _on_markers_written(self, markers: MarkersToSend, errors) -> None:
        try:
            fx = self.core.on_markers_written(markers, errors)
        except UnexpectedMarkerError:
            log.exception("transaction %s: stopped sending its markers", markers.transactional_id)
            return
        self.apply(fx, marker_delay_s=RETRY_BACKOFF_MS / 1000)

    def _on_markers_unroutable(self, markers: MarkersToSend, partitions) -> None:
        log.info("transaction %s: no marker for %s (deleted)", markers.transactional_id, partitions)
        self.apply(self.core.on_markers_unroutable(markers, partitions))

