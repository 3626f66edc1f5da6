"""`weir bench leader`: what a leader's Python costs per record, in one process, steady from run to
run where the cluster benches are not (docs/benchmarks.md).

The same DataApis, ReplicaManager, partition and log a broker runs, on a temp dir, answer requests
decoded from the bytes a client or a follower sends; there are no sockets, no connection layer and
no other process. Six cycles are timed, rounds alternated:

- RF=3 acks=all: a Produce of one record; both followers' parked Fetches woken and answered with
  it; both followers fetching again from the new log end, in their fetch sessions (the second
  moves the HW, which answers the Produce, and both park again). What a leader does per record at
  1,000 records/s, where every request carries one.
- RF=1 acks=1: a Produce of one record, answered at once.
- RF=3 acks=all with the followers too: a Produce of one record, answered once two follower
  brokers' own replica fetchers (their ReplicaManager, FetcherCore, fetch session and log), whose
  requests reach the leader's handlers through `InMemoryConnection`, have fetched it, appended it
  and fetched again: the Python of all three brokers per record.
- RF=3 acks=all cold: the first cycle with the CPU's private caches (L1, L2) evicted before each
  request, untimed. In a cluster on two cores, the other brokers and the client run between two
  requests of a broker and leave its caches so: this is most of why a broker spends more per
  record in a cluster than here, warm.
- RF=1 acks=1, wide: a Produce of 456 records, as `weir bench all`'s client sends one broker at full
  rate, once in one partition and once in six partitions of 76 records (as that client does). The
  second costs several times the first: a broker's CPU goes by the partitions its requests carry,
  each a validation, a log append and a write of its own, far more than by their records.

The ratios are what replication costs the leader, and the three brokers, what cold caches cost, and
what a request's partitions cost. What this leaves out (the sockets, the event loop's waiting) the
cluster benches count.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import tempfile
import time
import uuid

from weir.broker.apis import DataApis, now_ms
from weir.broker.replica_fetcher import ReplicaFetchers
from weir.broker.replica_manager import ReplicaManager
from weir.client import decode_response, encode_request
from weir.config.broker_config import BrokerConfig
from weir.protocol import codec
from weir.protocol.header import read_request_header
from weir.protocol.hot_requests import encode_follower_fetch_request
from weir.protocol.hot_responses import FileRegion, decode_fetch_response
from weir.protocol.records import encode_batch
from weir.protocol.versions import ApiKey
from weir.zk.model import BrokerInfo, ClusterView, PartitionState, TopicAssignment

LEADER = 1
BROKER_EPOCHS = {1: 5, 2: 6, 3: 7}
TOPIC = "bench"
PRODUCE_VERSION, FETCH_VERSION = 9, 15
MAX_CYCLES = 20_000  # a cycle is whole requests, not a record of a batch: --records is capped here
COLD_CYCLES = 2_000  # each evicts the caches three times, which takes longer than the cycle
# `weir bench all`'s Produce to one broker: about 456 records (1 M records in 2,100-2,200 requests),
# 76 in each of its 6 partitions, confluent-kafka at linger.ms 5
WIDE_PARTITIONS, WIDE_RECORDS = 6, 456
WIDE_CYCLES = 2_000  # each writes 456 records
EVICTION_BYTES = 8 << 20  # more than a core's L1 and L2 here (2 MiB), as other processes' work leaves them


def _cache_evictor():
    """A function that writes a byte on every cache line of EVICTION_BYTES: what the CPU's private
    caches hold afterwards is that buffer, not the broker's code and data."""
    buffer = bytearray(EVICTION_BYTES)
    line = bytes(EVICTION_BYTES // 64)

    def evict() -> None:
        buffer[::64] = line
    return evict


class Broker:
    """A broker's ReplicaManager on a log dir of its own in a temp dir."""

    def __init__(self, broker_id: int) -> None:
        self.directory = tempfile.mkdtemp(prefix=f"weir-bench-broker-{broker_id}-")
        self.config = BrokerConfig({"broker.id": str(broker_id), "log.dirs": self.directory})
        self.replicas = ReplicaManager(self.config, 0)

    def close(self) -> None:
        self.replicas.close()
        shutil.rmtree(self.directory, ignore_errors=True)


class Leader(Broker):
    """A broker leading `partitions` partitions, each replicated to `replicas`."""

    def __init__(self, replicas: tuple[int, ...], partitions: int = 1) -> None:
        super().__init__(LEADER)
        self.topic_id = uuid.uuid4()
        self.replicas.can_lead = True
        indexes = range(partitions)
        self.replicas.apply_view(ClusterView(
            brokers={b: BrokerInfo(b, "127.0.0.1", 9090 + b) for b in BROKER_EPOCHS},
            topics={TOPIC: TopicAssignment(TOPIC, self.topic_id, {i: replicas for i in indexes})},
            # the state written after the brokers registered (zxid 10 > their epochs), as a controller's is
            states={(TOPIC, i): PartitionState(LEADER, 0, replicas, 1, 0) for i in indexes},
            state_zxids={(TOPIC, i): 10 for i in indexes},
            broker_epochs=dict(BROKER_EPOCHS), broker_sessions={b: 100 + b for b in BROKER_EPOCHS},
            controller_id=LEADER, controller_epoch=1, session_id=100 + LEADER), now_ms())
        self.apis = DataApis(self.replicas)

    def handle(self, frame: bytes):
        """What the connection layer does with a request frame (its size cut off): the handler's answer."""
        header = read_request_header(frame, "127.0.0.1", "PLAINTEXT", None)
        return self.apis.handlers[header.api_key](header, codec.decode_request(header, frame))

    @property
    def high_watermark(self) -> int:
        return self.replicas.partitions[TOPIC, 0].high_watermark

    def log_end_offsets(self) -> list[int]:
        return [p.log.log_end_offset for p in self.replicas.partitions.values()]


def response_frame(parts: list) -> bytes:
    """A handler's answer as a client decodes it: file regions read, behind a response header of
    correlation id 0 and no tagged fields (the connection layer writes the real one)."""
    return bytes(5) + b"".join(os.pread(p.fd, p.size, p.position) if isinstance(p, FileRegion) else p
                               for p in parts)


class FollowerBroker(Broker):
    """A broker following the leader's partition with its own replica fetchers, which send their
    requests through an InMemoryConnection."""

    def __init__(self, broker_id: int, leader: Leader) -> None:
        super().__init__(broker_id)
        self.fetchers = ReplicaFetchers(self.replicas, self.config, self._connect)
        self.replicas.on_role_change = self.fetchers.on_role_change
        self.leader = leader
        self.replicas.apply_view(dataclasses.replace(leader.replicas.view, session_id=100 + broker_id), now_ms())

    async def _connect(self, broker_id: int) -> "InMemoryConnection":
        return InMemoryConnection(self.leader, f"replica-{self.config['broker.id']}")

    async def stop(self) -> None:
        await self.fetchers.close()
        self.close()


class InMemoryConnection:
    """What a replica fetcher's BrokerConnection does with a request, with the leader's handlers
    for a socket: the request encoded and its answer decoded as on the wire."""

    closed = False

    def __init__(self, leader: Leader, client_id: str) -> None:
        self.leader, self.client_id, self.correlation_id = leader, client_id, 0

    async def request(self, api_key: int, version: int, body, *, timeout_s: float | None = None, decode=None):
        self.correlation_id += 1
        answer = self.leader.handle(encode_request(api_key, version, self.correlation_id, self.client_id, body)[4:])
        if isinstance(answer, asyncio.Future):  # a long poll
            answer = await answer
        frame = response_frame(answer)
        return decode(version, frame) if decode is not None else decode_response(api_key, version, frame)

    async def close(self) -> None:
        pass


def produce_frame(correlation_id: int, acks: int, record_size: int, partitions: int = 1, records: int = 1) -> bytes:
    """A Produce of a batch of `records` records to each of partitions 0 .. `partitions` - 1."""
    return encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, correlation_id, "bench", {
        "transactional_id": None, "acks": acks, "timeout": 30_000, "topic_data": [{"name": TOPIC, "partition_data": [
            {"index": i, "records": encode_batch([b"v" * record_size] * records, timestamp=now_ms())}
            for i in range(partitions)]}]})[4:]


class Follower:
    """A follower's Fetch requests in its fetch session (KIP-227), as its fetcher sends them."""

    def __init__(self, broker_id: int, topic_id: uuid.UUID) -> None:
        self.broker_id, self.topic_id = broker_id, topic_id
        self.session_id, self.epoch = 0, 0  # epoch 0: a full request that opens a session

    def fetch_frame(self, offset: int) -> bytes:
        body = encode_follower_fetch_request(FETCH_VERSION, self.broker_id, BROKER_EPOCHS[self.broker_id], 500, 1,
                                             10 << 20, [(self.topic_id, [(0, 0, offset, 0, 1 << 20)])],
                                             self.session_id, self.epoch)
        self.epoch += 1
        return encode_request(ApiKey.FETCH, FETCH_VERSION, offset, f"replica-{self.broker_id}", body)[4:]

    def answered(self, parts: list) -> None:
        """Join the session the first answer opened."""
        if not self.session_id:
            self.session_id = decode_fetch_response(FETCH_VERSION, response_frame(parts)).session_id
            self.epoch = 1


async def _replicated(cycles: int, record_size: int, evict=lambda: None) -> float:
    """CPU-seconds per RF=3 acks=all record; `evict()` runs, untimed, before each request is handled."""
    leader = Leader((LEADER, 2, 3))
    try:
        followers = [Follower(b, leader.topic_id) for b in (2, 3)]
        parked = [leader.handle(f.fetch_frame(0)) for f in followers]
        produced = leader.handle(produce_frame(0, -1, record_size))  # a first cycle opens the fetch sessions
        for f, answer in zip(followers, parked):
            f.answered(await answer)
        parked = [leader.handle(f.fetch_frame(1)) for f in followers]
        await produced.awaitable
        produces = [produce_frame(i, -1, record_size) for i in range(1, cycles + 1)]  # built before the clock starts
        fetches = [[f.fetch_frame(offset) for f in followers] for offset in range(2, cycles + 2)]
        spent = 0.0
        for produce, fetched in zip(produces, fetches):
            evict()
            started = time.process_time()
            produced = leader.handle(produce)
            for answer in parked:
                await answer
            spent += time.process_time() - started
            parked = []
            for frame in fetched:  # each follower's Fetch arrives on its own
                evict()
                started = time.process_time()
                parked.append(leader.handle(frame))
                spent += time.process_time() - started
            started = time.process_time()
            await produced.awaitable
            spent += time.process_time() - started
        for answer in parked:
            answer.cancel()
        assert leader.high_watermark == cycles + 1, "a cycle went wrong: the HW did not follow"
        return spent / cycles
    finally:
        leader.close()


async def _with_followers(cycles: int, record_size: int) -> float:
    """CPU-seconds per RF=3 acks=all record, the followers' fetchers included."""
    leader = Leader((LEADER, 2, 3))
    followers = [FollowerBroker(b, leader) for b in (2, 3)]
    try:
        produces = [produce_frame(i, -1, record_size) for i in range(cycles + 1)]
        await leader.handle(produces[0]).awaitable  # the fetchers connected and in their fetch sessions
        started = time.process_time()
        for produce in produces[1:]:
            await leader.handle(produce).awaitable
        spent = time.process_time() - started
        assert leader.high_watermark == cycles + 1, "a cycle went wrong: the HW did not follow"
        assert all(f.replicas.partitions[TOPIC, 0].log.log_end_offset == cycles + 1 for f in followers), \
            "a cycle went wrong: a follower did not append every record"
        return spent / cycles
    finally:
        for follower in followers:
            await follower.stop()
        leader.close()


async def _alone(cycles: int, record_size: int, partitions: int = 1, records: int = 1) -> float:
    """CPU-seconds per RF=1 acks=1 Produce, of `records` records to each of `partitions` partitions."""
    leader = Leader((LEADER,), partitions)
    try:
        produces = [produce_frame(i, 1, record_size, partitions, records) for i in range(cycles)]
        started = time.process_time()
        for produce in produces:
            leader.handle(produce)
        spent = time.process_time() - started
        assert leader.log_end_offsets() == [cycles * records] * partitions, \
            "a cycle went wrong: the records are not all there"
        return spent / cycles
    finally:
        leader.close()


def bench_leader(args) -> int:
    cycles = min(args.records, MAX_CYCLES)
    print(f"{cycles:,} records of {args.record_size} bytes, one per request, in one process (no sockets), median of "
          f"{args.rounds} rounds alternated")
    replicated, alone, three, cold, one_wide, six_wide = [], [], [], [], [], []
    evict = _cache_evictor()
    wide_cycles = min(cycles, WIDE_CYCLES)
    for _ in range(args.rounds):
        replicated.append(asyncio.run(_replicated(cycles, args.record_size)))
        alone.append(asyncio.run(_alone(cycles, args.record_size)))
        three.append(asyncio.run(_with_followers(cycles, args.record_size)))
        cold.append(asyncio.run(_replicated(min(cycles, COLD_CYCLES), args.record_size, evict)))
        one_wide.append(asyncio.run(_alone(wide_cycles, args.record_size, 1, WIDE_RECORDS)))
        six_wide.append(asyncio.run(_alone(wide_cycles, args.record_size, WIDE_PARTITIONS,
                                           WIDE_RECORDS // WIDE_PARTITIONS)))
    replicated_us, alone_us, three_us, cold_us, one_wide_us, six_wide_us = (
        sorted(runs)[len(runs) // 2] * 1e6 for runs in (replicated, alone, three, cold, one_wide, six_wide))
    print(f"leader CPU per record: RF=3 acks=all {replicated_us:,.1f} us, RF=1 acks=1 {alone_us:,.1f} us, "
          f"ratio {replicated_us / alone_us:.2f}")
    print(f"three brokers' CPU per RF=3 acks=all record, the followers' fetchers included: {three_us:,.1f} us, "
          f"{three_us / alone_us:.2f}x RF=1")
    print(f"leader CPU per RF=3 acks=all record, its caches evicted before each request (as other processes "
          f"on the same cores leave them in a cluster): {cold_us:,.1f} us, {cold_us / replicated_us:.2f}x warm")
    print(f"leader CPU per RF=1 acks=1 Produce of {WIDE_RECORDS} records (as `weir bench all` sends one broker): "
          f"in one partition {one_wide_us:,.1f} us, in {WIDE_PARTITIONS} partitions of "
          f"{WIDE_RECORDS // WIDE_PARTITIONS} {six_wide_us:,.1f} us, {six_wide_us / one_wide_us:.2f}x: "
          f"{(six_wide_us - one_wide_us) / (WIDE_PARTITIONS - 1):,.1f} us per partition beyond the first "
          f"(what a request costs is its partitions, not its records)")
    print("by round, RF=3 / RF=1 / three brokers / RF=3 cold / one wide / six wide us: " + " ".join(
        "/".join(f"{run * 1e6:.1f}" for run in runs)
        for runs in zip(replicated, alone, three, cold, one_wide, six_wide)))
    return 0
