"""Followers fetch from their leaders: one task per leader broker, fetching all its partitions.

The decisions (truncate where, append what, back off when) are `FollowerPartition`'s, and a
round's (who asks what, who backs off) `FetcherCore`'s, which weir sim's fetcher drives too; this
shell sends the requests they ask for - OffsetForLeaderEpoch while truncating (KIP-101/279),
Fetch with our replica id while fetching - and applies the results to the log.
"""

import asyncio
import logging
import time

from weir.client import BrokerConnection, ClientError
from weir.clock import now_ms
from weir.protocol.errors import error_code
from weir.protocol.hot_requests import encode_follower_fetch_request
from weir.protocol.hot_responses import decode_fetch_response
from weir.protocol.record_batch import batch_headers
from weir.protocol.versions import ApiKey
from weir.replication.fetch_session_handler import SESSION_ERRORS
from weir.replication.fetcher_core import FetcherCore, FetchRound
from weir.replication.follower import Backoff
from weir.replication.partition import Partition
from weir.replication.truncation import EpochEndOffset

log = logging.getLogger(__name__)

FETCH_VERSION = 15  # by topic id, with our broker epoch (KIP-903)
OFFSET_FOR_LEADER_EPOCH_VERSION = 4



class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader; what it asks and what the
    answers mean are its FetcherCore's."""

    def __init__(self, leader_id: int, manager: "ReplicaFetchers") -> None:
        self.leader_id = leader_id
        self.manager = manager
        self.core = FetcherCore(leader_id, lambda: manager.config["replica.fetch.backoff.ms"],
                                lambda: time.monotonic() * 1000)
        self.changed = asyncio.Event()
        self._wanted_made_for: tuple | None = None  # the round, view and fetch size _last_wanted is of
        self._last_wanted: tuple[dict, dict] = ({}, {})
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"fetcher-{leader_id}")

    @property
    def partitions(self) -> dict[tuple[str, int], Partition]:
        return self.core.partitions

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
                self.core.on_request_failed()
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
        replicas = self.manager.replicas
        throttle_holds = replicas.follower_quota.is_exceeded(time.monotonic())
        round_ = self.core.next_round(held=replicas.follower_throttled if throttle_holds else None)
        if not isinstance(round_, FetchRound):  # none follows us (until `changed`), or all back off
            await self._wait(1.0 if round_ is None else round_ / 1000)
            return
        if round_.truncating:
            await self._truncate(conn, round_)
            round_.fetching = self.core.still_fetching(round_)
        if round_.fetching:
            await self._fetch(conn, round_)
        elif not round_.truncating:  # every partition held by the follower throttle
            await self._wait(self.manager.config["replica.fetch.backoff.ms"] / 1000)

    async def _truncate(self, conn: BrokerConnection, round_: FetchRound) -> None:
        topics: dict[str, list] = {}
        for p in round_.truncating:
            ask = round_.asks[p.key]
            topics.setdefault(p.topic, []).append({"partition": p.index, "current_leader_epoch": ask.current_leader_epoch,
                                                   "leader_epoch": ask.leader_epoch})
        response = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, {
            "replica_id": self.manager.broker_id,
            "topics": [{"topic": t, "partitions": parts} for t, parts in topics.items()]})
        for topic in response.topics:
            for r in topic.partitions:
                key = (topic.topic, r.partition)
                leo = self.core.on_epoch_answer(round_, key, EpochEndOffset(error_code(r.error_code), r.leader_epoch,
                                                                            r.end_offset))
                if leo is not None:
                    log.info("%s-%d: truncated to %d by leader epoch (LEO was %d)", *key,
                             self.core.partitions[key].log.log_end_offset, leo)

    async def _fetch(self, conn: BrokerConnection, round_: FetchRound) -> None:
        config = self.manager.config
        replicas = self.manager.replicas
        partitions = round_.fetching
        wanted, names = self._wanted(round_)
        session = self.core.session.build(wanted)
        wait_ms = config["replica.fetch.wait.max.ms"]
        body = encode_follower_fetch_request(
            FETCH_VERSION, self.manager.broker_id, replicas.own_broker_epoch(), wait_ms,
            config["replica.fetch.min.bytes"], config["replica.fetch.response.max.bytes"],
            _by_topic((topic_id, (index, *fields)) for (topic_id, index), fields in session.send.items()),
            session.session_id, session.epoch,
            _by_topic((topic_id, index) for topic_id, index in session.forgotten))
        answer = await conn.request(ApiKey.FETCH, FETCH_VERSION, body, timeout_s=wait_ms / 1000 + 30,
                                    decode=decode_fetch_response)
        if not self.core.on_fetch_answer(partitions, answer.error_code, answer.session_id):
            if answer.error_code in SESSION_ERRORS:
                log.info("fetch session with broker %d: error %d; fetching every partition again", self.leader_id,
                         answer.error_code)
            return
        now = now_ms()
        for topic_id, answered in answer.topics:
            name = names.get(topic_id)  # ids tell a re-created topic of the same name apart
            for r in answered:
                key = (name, r.partition_index)
                records = r.records or None
                if records and (p := self.core.current(key)) is not None and replicas.follower_throttled(p):
                    replicas.follower_quota.record(len(records), time.monotonic())
                decision = self.core.on_partition_answer(
                    round_, key, error_code(r.error_code), r.high_watermark, records,
                    batch_headers(records) if records else (), now, r.log_start_offset)
                if decision is not None and not isinstance(decision, Backoff):
                    replicas.waiters.notify(key)

    def _wanted(self, round_: FetchRound) -> tuple[dict, dict]:
        """What the round's fetching partitions ask, by (topic id, partition), and the topic names
        by id; the last ones again (the same objects) while the round, the topic ids and the fetch
        size are unchanged, which costs the round no look at its partitions."""
        view = self.manager.replicas.view
        max_bytes = self.manager.config["replica.fetch.max.bytes"]
        made_for = (round_, view, max_bytes)
        if self._wanted_made_for is not None and all(a is b for a, b in zip(made_for, self._wanted_made_for)):
            return self._last_wanted
        asks = round_.asks
        ids = {name: view.topics[name].topic_id for name in {p.topic for p in round_.fetching} if name in view.topics}
        wanted = {(ids[p.topic], p.index): (asks[p.key].current_leader_epoch, asks[p.key].fetch_offset,
                                            p.log.log_start_offset, max_bytes)
                  for p in round_.fetching if p.topic in ids}
        self._wanted_made_for, self._last_wanted = made_for, (wanted, {topic_id: name for name, topic_id in ids.items()})
        return self._last_wanted

    def add(self, partition: Partition) -> None:
        self.core.add(partition)
        self.changed.set()

    def remove(self, key: tuple[str, int]) -> None:
        self.core.remove(key)

    def touch(self, key: tuple[str, int]) -> None:
        self.core.touch(key)


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

    def on_log_start_moved(self, key: tuple[str, int]) -> None:
        """A followed partition's log start moved (retention): its next fetch tells the leader."""
        leader = self._following.get(key)
        if leader is not None and leader in self.fetchers:
            self.fetchers[leader].touch(key)

    async def close(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.task.cancel()
        await asyncio.gather(*(f.task for f in self.fetchers.values()), return_exceptions=True)
        self.fetchers.clear()
