"""Sending transaction markers (Kafka's TransactionMarkerChannelManager): WriteTxnMarkers v1 to
the leader of each partition of a transaction that the coordinator has decided.

The coordinator core (`weir.transactions.coordinator`) decides which partitions still wait for a
marker and what an error means; this module only routes and sends. A partition is routed to its
leader in the broker's metadata view: a topic or partition no longer in the view was deleted
(`on_unroutable`: nothing waits there), a partition without a live leader is tried again after
a backoff. One request per (transaction, leader broker); its per-partition errors, or
REQUEST_TIMED_OUT for every partition when the request failed on the network, go to
`on_result`, whose retries come back here after the backoff.

Markers travel on connections of their own, one per broker: the receiving broker answers
requests of a connection in order, and a WriteTxnMarkers waits for its ISR, so sharing the
connection of ISR changes (AlterPartition) would put those behind it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from weir.client import BrokerConnection, ClientError
from weir.protocol.errors import ErrorCode
from weir.protocol.versions import ApiKey
from weir.transactions.coordinator import MarkersToSend, TopicPartition

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1
NO_LEADER = -1
FAILURE_LOG_INTERVAL_S = 10


class MarkerSender:
    def __init__(self, replicas, connect: Callable[[int], Awaitable[BrokerConnection]],
                 on_result: Callable[[MarkersToSend, dict[TopicPartition, ErrorCode]], None],
                 on_unroutable: Callable[[MarkersToSend, list[TopicPartition]], None],
                 backoff_ms: int, timeout_ms: int) -> None:
        self.replicas = replicas
        self._connect = connect
        self._on_result = on_result
        self._on_unroutable = on_unroutable
        self.backoff_s = backoff_ms / 1000
        self.timeout_s = timeout_ms / 1000
        self._connections: dict[int, BrokerConnection] = {}
        self._tasks: set[asyncio.Task] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        self._closed = False
        self._last_warned: dict[int, float] = {}  # broker id → when its failure was last logged

    def send(self, markers: MarkersToSend, delay_s: float = 0.0) -> None:
        """Route `markers` to the partitions' leaders now, or after `delay_s` (a retry)."""
        if self._closed:
            return
        if delay_s > 0:
            self._send_later(markers, delay_s)
            return
        view = self.replicas.view
        by_leader: dict[int, set[TopicPartition]] = {}
        unroutable, leaderless = [], set()
        for topic, index in sorted(markers.partitions):
            assignment = view.topics.get(topic)
            if assignment is None or index not in assignment.replicas:
                unroutable.append((topic, index))
                continue
            state = view.states.get((topic, index))
            leader = state.leader if state is not None else NO_LEADER
            if leader == NO_LEADER or leader not in view.brokers:
                leaderless.add((topic, index))
            else:
                by_leader.setdefault(leader, set()).add((topic, index))
        if unroutable:
            self._on_unroutable(markers, unroutable)
        if leaderless:
            self.send(_subset(markers, leaderless), self.backoff_s)
        for broker_id, partitions in by_leader.items():
            self._spawn(self._send_to(broker_id, _subset(markers, partitions)))

    def _send_later(self, markers: MarkersToSend, delay_s: float) -> None:
        def fire() -> None:
            self._timers.discard(timer)
            self.send(markers)
        timer = asyncio.get_running_loop().call_later(delay_s, fire)
        self._timers.add(timer)

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_to(self, broker_id: int, markers: MarkersToSend) -> None:
        body = request_body(markers)
        try:
            conn = self._connections.get(broker_id)
            if conn is None or conn.closed:
                conn = self._connections[broker_id] = await self._connect(broker_id)
            response = await conn.request(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body,
                                          timeout_s=self.timeout_s)
            errors = response_errors(response, markers)
        except (ClientError, OSError) as e:
            now = time.monotonic()
            if now - self._last_warned.get(broker_id, -FAILURE_LOG_INTERVAL_S) >= FAILURE_LOG_INTERVAL_S:
                self._last_warned[broker_id] = now  # retries come every backoff: log one in a while
                log.info("WriteTxnMarkers for %s to broker %d failed (%s); retrying", markers.transactional_id,
                         broker_id, e)
            stale = self._connections.pop(broker_id, None)
            if stale is not None:
                await stale.close()
            errors = {tp: ErrorCode.request_timed_out for tp in markers.partitions}
        if not self._closed:
            self._on_result(markers, errors)

    async def close(self) -> None:
        self._closed = True
        for timer in self._timers:
            timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()


def _subset(markers: MarkersToSend, partitions) -> MarkersToSend:
    return MarkersToSend(markers.transactional_id, markers.producer_id, markers.producer_epoch,
                         markers.coordinator_epoch, markers.result, frozenset(partitions))


def request_body(markers: MarkersToSend) -> dict:
    topics: dict[str, list[int]] = {}
    for topic, index in sorted(markers.partitions):
        topics.setdefault(topic, []).append(index)
    return {"markers": [{"producer_id": markers.producer_id, "producer_epoch": markers.producer_epoch,
                         "transaction_result": bool(markers.result), "coordinator_epoch": markers.coordinator_epoch,
                         "topics": [{"name": name, "partition_indexes": indexes} for name, indexes in topics.items()]}]}


def response_errors(response, markers: MarkersToSend) -> dict[TopicPartition, ErrorCode]:
    """Each partition's error; one the response leaves out is retried (REQUEST_TIMED_OUT)."""
    errors = {tp: ErrorCode.request_timed_out for tp in markers.partitions}
    for result in response.markers:
        if result.producer_id != markers.producer_id:
            continue
        for topic in result.topics:
            for p in topic.partitions:
                if (topic.name, p.partition_index) in errors:
                    errors[(topic.name, p.partition_index)] = ErrorCode(p.error_code)
    return errors
