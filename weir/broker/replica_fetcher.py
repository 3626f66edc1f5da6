"""Followers fetch from their leaders: one task per leader broker, fetching all its partitions.

The decisions (truncate where, append what, back off when) are `FollowerPartition`'s; this
shell sends the requests it asks for - OffsetForLeaderEpoch while truncating (KIP-101/279),
Fetch with our replica id while fetching - and applies the results to the log.
"""

import asyncio
import logging
import time

from ..client import BrokerConnection, ClientError
from ..protocol.errors import ErrorCode, error_code
from ..protocol.hot_requests import encode_follower_fetch_request
from ..protocol.hot_responses import decode_follower_fetch_response
from ..protocol.record_batch import batch_headers
from ..protocol.versions import ApiKey
from ..replication.follower import Backoff, SendFetch, SendOffsetForLeaderEpoch, backoff_ms
from ..replication.partition import Partition
from ..replication.truncation import EpochEndOffset
from .fetch_session_handler import FetchSessionHandler

log = logging.getLogger(__name__)

FETCH_VERSION = 15  # by topic id, with our broker epoch (KIP-903)
OFFSET_FOR_LEADER_EPOCH_VERSION = 4


def _now_ms() -> int:
    return int(time.time() * 1000)


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader."""

    def __init__(self, leader_id: int, manager: "ReplicaFetchers") -> None:
        self.leader_id = leader_id
        self.manager = manager
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.changed = asyncio.Event()
        self._backoff_until: dict[tuple[str, int], float] = {}
        self.session = FetchSessionHandler()  # KIP-227, with this leader
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"fetcher-{leader_id}")

    async def _run(self) -> None:
        conn: BrokerConnection | None = None
        config = self.manager.config
        failing = False  # log the first failure of an outage, not every retry
        while True:
            try:
                if conn is None or conn.closed:
                    conn = await self.manager.connect(self.leader_id)
                await self._round(conn)
                failing = False
            except asyncio.CancelledError:
                if conn is not None:
                    await conn.close()
                raise
            except (ClientError, OSError) as e:
                log.log(logging.DEBUG if failing else logging.INFO, "fetching from broker %d failed: %s",
                        self.leader_id, e)
                failing = True
                self.session.on_failure()
                if conn is not None:
                    await conn.close()
                    conn = None
                await self._wait(config["replica.fetch.backoff.ms"] / 1000)

    async def _wait(self, seconds: float) -> None:
        self.changed.clear()
        try:
            async with asyncio.timeout(seconds):  # not wait_for, which can lose a cancellation (client.request)
                await self.changed.wait()
        except TimeoutError:
            pass

    async def _round(self, conn: BrokerConnection) -> None:
        now = time.monotonic()
        ready = [p for key, p in self.partitions.items()
                 if p.follower is not None and self._backoff_until.get(key, 0) <= now]
        if not ready:
            waits = [t - now for t in self._backoff_until.values() if t > now]
            await self._wait(min(waits, default=1.0))
            return
        asks = {p.key: p.next_fetch_request() for p in ready}
        truncating = [p for p in ready if isinstance(asks[p.key], SendOffsetForLeaderEpoch)]
        if truncating:
            await self._truncate(conn, truncating, asks)
        replicas = self.manager.replicas
        throttle_holds = replicas.follower_quota.is_exceeded(now)
        fetching = [p for p in ready if isinstance(asks[p.key], SendFetch)
                    and not (throttle_holds and replicas.follower_throttled(p))]
        if fetching:
            await self._fetch(conn, fetching, asks)
        elif not truncating:  # every partition held by the follower throttle
            await self._wait(self.manager.config["replica.fetch.backoff.ms"] / 1000)

    async def _truncate(self, conn: BrokerConnection, partitions: list[Partition], asks) -> None:
        topics: dict[str, list] = {}
        for p in partitions:
            ask = asks[p.key]
            topics.setdefault(p.topic, []).append({"partition": p.index, "current_leader_epoch": ask.current_leader_epoch,
                                                   "leader_epoch": ask.leader_epoch})
        response = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, {
            "replica_id": self.manager.broker_id,
            "topics": [{"topic": t, "partitions": parts} for t, parts in topics.items()]})
        for topic in response.topics:
            for r in topic.partitions:
                p = self.partitions.get((topic.topic, r.partition))
                if p is None or p.follower is None or asks.get(p.key) is None:
                    continue
                leo = p.log.log_end_offset
                try:
                    backoff = p.on_epoch_answer(asks[p.key], EpochEndOffset(error_code(r.error_code), r.leader_epoch,
                                                                            r.end_offset))
                except Exception:
                    self._failed(p, "an OffsetForLeaderEpoch answer")
                    continue
                if backoff is not None:
                    self._back_off(p, backoff.error)
                elif p.log.log_end_offset < leo:
                    log.info("%s-%d: truncated to %d by leader epoch (LEO was %d)", *p.key, p.log.log_end_offset, leo)

    async def _fetch(self, conn: BrokerConnection, partitions: list[Partition], asks) -> None:
        config = self.manager.config
        replicas = self.manager.replicas
        view = replicas.view
        ids = {name: view.topics[name].topic_id for name in {p.topic for p in partitions} if name in view.topics}
        names = {topic_id: name for name, topic_id in ids.items()}
        max_bytes = config["replica.fetch.max.bytes"]
        session = self.session.build({
            (ids[p.topic], p.index): (asks[p.key].current_leader_epoch, asks[p.key].fetch_offset,
                                      p.log.log_start_offset, max_bytes)
            for p in partitions if p.topic in ids})
        wait_ms = config["replica.fetch.wait.max.ms"]
        body = encode_follower_fetch_request(
            FETCH_VERSION, self.manager.broker_id, replicas.own_broker_epoch(), wait_ms,
            config["replica.fetch.min.bytes"], config["replica.fetch.response.max.bytes"],
            _by_topic((topic_id, (index, *fields)) for (topic_id, index), fields in session.send.items()),
            session.session_id, session.epoch,
            _by_topic((topic_id, index) for topic_id, index in session.forgotten))
        answer = await conn.request(ApiKey.FETCH, FETCH_VERSION, body, timeout_s=wait_ms / 1000 + 30,
                                    decode=decode_follower_fetch_response)
        if not self.session.on_answer(answer.error_code, answer.session_id):
            log.info("fetch session with broker %d: error %d; fetching every partition again", self.leader_id,
                     answer.error_code)
            return
        if answer.error_code:  # every partition of the request got it
            error = error_code(answer.error_code)
            for p in partitions:
                self._back_off(p, error)
            return
        now_ms = _now_ms()
        for topic_id, answered in answer.topics:
            name = names.get(topic_id)  # ids tell a re-created topic of the same name apart
            for r in answered:
                p = self.partitions.get((name, r.partition_index))
                ask = asks.get((name, r.partition_index))
                if p is None or p.follower is None or not isinstance(ask, SendFetch):
                    continue
                records = r.records or None
                if records and replicas.follower_throttled(p):
                    replicas.follower_quota.record(len(records), time.monotonic())
                try:
                    decision = p.on_fetched(ask, error_code(r.error_code), r.high_watermark, records,
                                            batch_headers(records) if records else (), now_ms, r.log_start_offset)
                except Exception:
                    self._failed(p, "a fetch answer")
                    continue
                if isinstance(decision, Backoff):
                    self._back_off(p, decision.error)
                elif decision is not None:
                    self.manager.replicas.waiters.notify(p.key)

    def _failed(self, partition: Partition, what: str) -> None:
        """Kafka's failed partition: an error acting on one partition's answer (a broken invariant
        asserted before a write) stops that partition's fetching until its next role change, and
        no other partition's."""
        log.exception("%s-%d: acting on %s from broker %d failed; the partition stops fetching until its next "
                      "role change", *partition.key, what, self.leader_id)
        self.remove(partition.key)

    def _back_off(self, partition: Partition, error: ErrorCode) -> None:
        log.debug("%s-%d: leader %d answered %s; backing off", *partition.key, self.leader_id, error.name)
        delay_ms = backoff_ms(error, self.manager.config["replica.fetch.backoff.ms"])
        self._backoff_until[partition.key] = time.monotonic() + delay_ms / 1000

    def add(self, partition: Partition) -> None:
        self.partitions[partition.key] = partition
        self._backoff_until.pop(partition.key, None)
        self.changed.set()

    def remove(self, key: tuple[str, int]) -> None:
        self.partitions.pop(key, None)
        self._backoff_until.pop(key, None)


def _by_topic(items) -> list[tuple]:
    """[(topic id, [item])] from (topic id, item) pairs, in first-seen order."""
    topics: dict = {}
    for topic_id, item in items:
        topics.setdefault(topic_id, []).append(item)
    return list(topics.items())


class ReplicaFetchers:
    """The fetcher tasks of this broker, one per leader it follows; they follow partition roles."""

    def __init__(self, replicas, config, connect) -> None:
        self.replicas = replicas
        self.config = config
        self.broker_id = config["broker.id"]
        self.connect = connect  # async (broker id) -> BrokerConnection
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._following: dict[tuple[str, int], int] = {}

    def on_role_change(self, partition: Partition) -> None:
        previous = self._following.pop(partition.key, None)
        if previous is not None and previous in self.fetchers:
            self.fetchers[previous].remove(partition.key)
        if partition.follower is not None and partition.key in self.replicas.partitions:
            leader = partition.follower.leader_id
            fetcher = self.fetchers.get(leader)
            if fetcher is None:
                fetcher = self.fetchers[leader] = ReplicaFetcher(leader, self)
            fetcher.add(partition)
            self._following[partition.key] = leader
        for leader_id in [i for i, f in self.fetchers.items() if not f.partitions]:
            self.fetchers.pop(leader_id).task.cancel()

    async def close(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.task.cancel()
        await asyncio.gather(*(f.task for f in self.fetchers.values()), return_exceptions=True)
        self.fetchers.clear()
