"""`weir bench [WORKLOAD]`: confluent-kafka against real Weir clusters (and `leader`, in one process).

- all (the default): issue 16's table in one run, every figure beside what it is measured
  against: the no-op sink (no delivery callback: the client's ceiling), one broker RF=1 acks=1,
  three brokers RF=3 min ISR 2 acks=all (6 partitions each, linger.ms 5, no callback; rounds
  alternated), the brokers' CPU-seconds per million records (and the Produce and Fetch requests
  they answered per million records, with the CPU per request), two consumers (confluent-kafka, and
  kcat: librdkafka without Python) against the same sink answering Fetch from memory (each
  consumer's ceiling), acks=all RF=3 latency at 1,000 records/s
  beside one broker's acks=1, the sink's, and the sink's with two followers (SinkFollowers: an
  RF=3 acks=all round trip with no work in it, the floor of RF=3's latency here; rounds alternated,
  medians), with the brokers' CPU per record at that rate, and Spark count/group-by over Weir
  against Parquet.

- produce: Weir (one broker) against a no-op sink - a tiny server built from the same protocol and
  connection code whose Produce handler stores nothing - so the ratio says what the log costs.
- consume: the consume rate against the produce rate.
- replication: three brokers; RF=3 acks=all against RF=1 acks=1, with the brokers' CPU-seconds per
  million records; acks=all latency at a steady
  1,000 msg/s; and the time from kill -9 of a broker leading 1,000 partitions until every one of
  them takes writes again.
- loops: as compare, this tree's brokers under uvloop (WEIR_EVENT_LOOP=uvloop; needs `pip install
  uvloop`) against the standard asyncio loop.
- compare --against TREE: three brokers run from this source tree and three from TREE (a git
  worktree of another commit, say; --against-python PYTHON runs TREE's brokers on another
  interpreter, a venv's bin/python with Weir's dependencies), RF=3 acks=all, 6 partitions, rounds
  alternated: records/s and the brokers' user and system CPU-seconds per million records, apart
  (what a change to Python code moves is the user time; page-cache and socket copies are the
  system time), then acks=all
  latency at 1,000 records/s into a partition of its own, rounds alternated too. With
  --idle-topics N, N more topics of one partition that nobody writes (what a request naming
  topics by id costs when the cluster has many); with --idle-partitions N, an RF=3 topic of N
  partitions that nobody writes (what followers' fetches of idle partitions cost).
- spark: Spark over Weir against Parquet (weir/bench/spark.py).
- scale: what a broker costs per partition it hosts, at --partitions sizes (weir/bench/scale.py).
- leader: a leader's Python per record, in one process, RF=3 acks=all against RF=1 acks=1
  (weir/bench/leader.py).
Every latency figure is printed beside `machine_stalls`: how often the machine itself, under no
load of ours, failed to wake a sleeping process within 3 ms on each CPU; and `wake_up_cost`: what
a round trip between two processes costs back to back and when both were idle; and every CPU figure
beside `page_cache_cost`: what the kernel charges per MiB appended to a log file.
Results are printed, never asserted: speed is measured here, not in tests.
"""

import asyncio
import contextlib
import functools
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections import Counter, deque
from pathlib import Path

from weir.lab.zookeeper_server import free_port
from weir.protocol.hot_responses import (FetchPartitionResult, ProducePartitionResult, encode_fetch_response,
                                         encode_produce_response)
from weir.protocol.records import encode_batch
from weir.protocol.versions import ApiKey

BENCH_TOPIC = "bench"
SINK_TOPIC_ID = uuid.UUID(int=1)
LATENCY_RECORDS = 5_000  # per side and round of `compare`, at 1,000 records/s
SOURCE_TREE = str(Path(__file__).resolve().parents[2])  # this Weir: a side's brokers import it from here
FETCH_BATCH_RECORDS = 500  # about what confluent-kafka puts in a batch at linger.ms 5 here
FAILOVER_TIMEOUT_S = 300  # from a kill -9 until every partition has a live leader again


NEXT_FETCH = bytes(64)  # what a sink's follower sends back: about a follower's Fetch request


class SinkFollowers:
    """A sink's followers, echoing processes of their own (as brokers are): each acks=all Produce's
    records go to all of them, and its answer waits until each has sent back its "next fetch". The
    round trips of an RF=3 acks=all record with no work in them: the floor of its latency here."""

    def __init__(self, links: list) -> None:
        self.links = links  # (reader, writer) per follower
        self.pending: list[deque] = [deque() for _ in links]  # per follower, futures in the order sent
        self._readers = [asyncio.ensure_future(self._read_replies(reader, pending))
                         for (reader, _), pending in zip(links, self.pending)]

    @classmethod
    async def start(cls, count: int) -> "SinkFollowers":
        connected: asyncio.Queue = asyncio.Queue()
        server = await asyncio.start_server(lambda r, w: connected.put_nowait((r, w)), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        for _ in range(count):  # each exits when the sink's end of its connection closes
            subprocess.Popen([sys.executable, "-m", "weir.bench.clusters", "follow", str(port)], stdin=subprocess.DEVNULL)
        links = [await asyncio.wait_for(connected.get(), 60) for _ in range(count)]
        server.close()
        return cls(links)

    @staticmethod
    async def _read_replies(reader, pending: deque) -> None:
        while True:
            await reader.readexactly(len(NEXT_FETCH))
            pending.popleft().set_result(None)

    async def replicated(self, records: bytes, answer):
        """`answer` once every follower sent back its next fetch after `records`."""
        loop = asyncio.get_running_loop()
        waiting = []
        for (_, writer), pending in zip(self.links, self.pending):
            writer.write(struct.pack(">i", len(records)) + records)
            pending.append(loop.create_future())
            waiting.append(pending[-1])
        await asyncio.gather(*waiting)
        return answer


def follow_sink(port: int) -> None:
    """A sink's follower: take each message, send back NEXT_FETCH; exit when the sink goes."""

    async def main():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while True:
            size, = struct.unpack(">i", await reader.readexactly(4))
            await reader.readexactly(size)
            writer.write(NEXT_FETCH)
    with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
        asyncio.run(main())


class SinkApis:
    """Answers ApiVersions, Metadata, Produce and Fetch; Produce stores nothing, and Fetch answers
    from memory: records of `record_size` bytes, in batches of FETCH_BATCH_RECORDS, at whatever
    offset is asked, filling the partition's max bytes (the consumer's ceiling, as the sink is
    the producer's). FindCoordinator is answered COORDINATOR_NOT_AVAILABLE (no groups here).
    With `followers`, an acks=all Produce is answered once they have all echoed its records."""

    def __init__(self, port: int, partitions: int, record_size: int, followers: SinkFollowers | None = None) -> None:
        from weir.broker.apis import DataApis
        from weir.broker.metrics import BrokerMetrics
        self.port = port
        self.partitions = partitions
        self.followers = followers
        self.api_versions_body = DataApis.api_versions_body
        self.metrics = BrokerMetrics()  # the broker's request loop times every request; so does the sink's
        self.throttles = None  # no client quotas
        self.next_offset = 0
        self.batch = encode_batch([os.urandom(record_size)] * FETCH_BATCH_RECORDS)
        self._answers: dict[int, bytearray] = {}  # partition -> its answer buffer
        self.handlers = {
            ApiKey.API_VERSIONS: lambda h, r: self.api_versions_body(0),
            ApiKey.METADATA: self.metadata,
            ApiKey.PRODUCE: self.produce,
            ApiKey.FETCH: self.fetch,
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.FIND_COORDINATOR: lambda h, r: {"throttle_time": 0, "error_code": 15, "error_message": None,
                                                   "node_id": -1, "host": "", "port": -1, "coordinators": [
                                                       {"key": k, "node_id": -1, "host": "", "port": -1,
                                                        "error_code": 15, "error_message": None}
                                                       for k in getattr(r, "coordinator_keys", ())]},
        }

    def metadata(self, header, request) -> dict:
        partitions = [{"error_code": 0, "partition_index": p, "leader_id": 0, "leader_epoch": -1,
                       "replica_nodes": [0], "isr_nodes": [0], "offline_replicas": []} for p in range(self.partitions)]
        return {"throttle_time": 0, "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": self.port}],
                "cluster_id": "sink", "controller_id": 0, "error_code": 0,
                "topics": [{"error_code": 0, "name": BENCH_TOPIC, "topic_id": SINK_TOPIC_ID,
                            "partitions": partitions}]}

    def fetch(self, header, request) -> list:
        out = []
        for topic in request.topics:
            results = []
            for p in topic.partitions:
                count = max(1, p.partition_max_bytes // len(self.batch))
                records = self._answer(p.partition, count)
                for i in range(count):  # each batch at its offset, from the one asked on
                    struct.pack_into(">q", records, i * len(self.batch), p.fetch_offset + i * FETCH_BATCH_RECORDS)
                results.append(FetchPartitionResult(p.partition, 0, 1 << 50, 1 << 50, 0, [records]))
            out.append((BENCH_TOPIC, SINK_TOPIC_ID, results))
        return encode_fetch_response(header.api_version, 0, 0, out)

    @staticmethod
    def list_offsets(header, request) -> dict:
        """Every partition starts at 0 and never ends (a consumer starting at "beginning", as kcat)."""
        return {"throttle_time": 0, "topics": [{"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": 0, "timestamp": -1, "leader_epoch": -1,
             "offset": 0 if p.timestamp == -2 else 1 << 50, "old_style_offsets": []} for p in t.partitions]}
            for t in request.topics]}

    def _answer(self, partition: int, count: int) -> memoryview:
        """`count` batches for `partition` in a buffer kept for it: the answer is copied into the
        frame as it is written, so the next answer may use the buffer again (a fresh megabyte per
        answer cost the sink page faults, which no broker pays to answer from its page cache)."""
        buffer = self._answers.get(partition)
        if buffer is None or len(buffer) < count * len(self.batch):
            buffer = self._answers[partition] = bytearray(self.batch * count)
        return memoryview(buffer)[:count * len(self.batch)]

    def produce(self, header, request):
        from weir.broker.apis import InOrder
        out = []
        for topic in request.topic_data:
            results = []
            for data in topic.partition_data:
                results.append(ProducePartitionResult(data.index, 0, self.next_offset, -1, 0))
                self.next_offset += 1
            out.append((topic.name, topic.topic_id if header.api_version >= 13 else None, results))
        if request.acks == 0:
            return None
        answer = encode_produce_response(header.api_version, out)
        if request.acks == -1 and self.followers is not None:
            records = b"".join(bytes(d.records or b"") for t in request.topic_data for d in t.partition_data)
            return InOrder(self.followers.replicated(records, answer))
        return answer


def serve_sink(port: int, partitions: int, record_size: int, followers: int = 0) -> None:
    from weir.broker.connection import Connection

    async def main():
        loop = asyncio.get_running_loop()
        apis = SinkApis(port, partitions, record_size, await SinkFollowers.start(followers) if followers else None)
        await loop.create_server(lambda: Connection(apis, 104857600), "127.0.0.1", port)
        print(f"sink ready on 127.0.0.1:{port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def _start_sink(port: int, partitions: int, record_size: int, followers: int = 0) -> subprocess.Popen:
    """The no-op sink in a process of its own, serving topic `bench` with `partitions` partitions
    (its Fetch answers hold records of `record_size` bytes), with `followers` (SinkFollowers)."""
    proc = subprocess.Popen([sys.executable, "-m", "weir.bench.clusters", str(port), str(partitions), str(record_size),
                             str(followers)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    for line in proc.stdout:
        if "ready on" in line:
            return proc
    raise RuntimeError("the no-op sink did not start")


def _produce(bootstrap: str, records: int, size: int, topic: str = BENCH_TOPIC, acks: str = "all",
             partitions: int = 1, rate: float | None = None, callbacks: bool = True) -> dict:
    """Produce `records` records as fast as possible, or at `rate` per second for latency. Without
    `callbacks`, librdkafka reports only failed deliveries (the client's ceiling: no Python call
    per record), and there are no latencies."""
    from confluent_kafka import Producer
    latencies = []
    errors = []

    def delivered(err, msg):
        if err:
            errors.append(err)
        else:
            latencies.append(msg.latency())

    settings = {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0 if rate else 5,
                "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576}
    if not callbacks:
        settings.update({"delivery.report.only.error": True, "on_delivery": delivered})
    producer = Producer(settings)
    each = {"on_delivery": delivered} if callbacks else {}
    payload = os.urandom(size)
    for p in range(partitions):  # metadata and connection warm-up
        producer.produce(topic, payload, partition=p)
    producer.flush(30)
    latencies.clear()
    start = time.perf_counter()
    for i in range(records):
        if rate:  # poll returns early when a delivery report comes: wait out the whole delay
            while (delay := start + i / rate - time.perf_counter()) > 0:
                # at least 1 ms: confluent-kafka truncates poll's timeout to whole milliseconds, and
                # poll(0) in a loop would spin, taking one of this machine's two cores from the brokers
                producer.poll(max(delay, 0.001))
        while True:
            try:
                producer.produce(topic, payload, partition=i % partitions, **each)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} produce errors, first: {errors[0]}")
    figures = {"records/s": records / elapsed, "MB/s": records * size / elapsed / 1e6}
    if latencies:
        latencies.sort()
        figures.update({"p50 ms": latencies[len(latencies) // 2] * 1000,
                        "p99 ms": latencies[int(len(latencies) * 0.99)] * 1000})
    return figures


def _consume(bootstrap: str, records: int, record_size: int, skip: int = 0, partitions: int = 1) -> dict:
    """Read `records` records of topic `bench`'s partitions, each from offset `skip` (earlier rounds' records)."""
    from confluent_kafka import Consumer, TopicPartition

    # A deep prefetch queue, as a throughput consumer is configured: with librdkafka's default
    # (100k messages) the Python loop drains it faster than it refills (260k/s vs 1.6M/s here).
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "queued.min.messages": 1_000_000})
    consumer.assign([TopicPartition(BENCH_TOPIC, p, skip) for p in range(partitions)])
    seen = 0
    start = time.perf_counter()
    while seen < records:
        batch = consumer.consume(1000, timeout=5)
        failed = next((m.error() for m in batch if m.error() is not None), None)
        if failed is not None:
            raise RuntimeError(f"consume error: {failed}")
        seen += len(batch)
    elapsed = time.perf_counter() - start
    consumer.close()
    return {"records/s": seen / elapsed, "MB/s": seen * record_size / elapsed / 1e6}


def _consume_native(bootstrap: str, records: int) -> dict:
    """Read `records` records of topic `bench` from the beginning with kcat: librdkafka in C, the
    library under confluent-kafka without a Python call per record (a consumer whose own ceiling is
    above what Python's loop reaches). Timed from kcat's start, connecting included."""
    if shutil.which("kcat") is None:
        raise RuntimeError("the native consumer is kcat: apt install kcat")
    start = time.perf_counter()
    read = subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", BENCH_TOPIC, "-o", "beginning", "-c", str(records),
                           "-q", "-f", "%o\\n", "-X", "queued.min.messages=1000000"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True, timeout=300)
    elapsed = time.perf_counter() - start
    seen = read.stdout.count(b"\n")
    if seen != records:
        raise RuntimeError(f"kcat read {seen} of {records} records: {read.stderr.decode()[-500:]}")
    return {"records/s": seen / elapsed}


class BenchTimedOut(RuntimeError):
    """A wait went past its bound: the cluster is wedged, or far slower than expected. The message
    says which wait it was."""


def _create_topic(bootstrap: str, name: str, partitions: int = 1, replication: int = 1,
                  assignment: list | None = None, timeout_s: float = 60, **config) -> None:
    """CreateTopics over Weir's own client (confluent-kafka 2.16 refuses a replica assignment)."""
    _create_topics(bootstrap, [name], partitions, replication, assignment, timeout_s, **config)


def _create_topics(bootstrap: str, names: list[str], partitions: int = 1, replication: int = 1,
                   assignment: list | None = None, timeout_s: float = 60, **config) -> None:
    """Topics `names`, alike, in one CreateTopics request; BenchTimedOut if not answered within `timeout_s`."""
    from weir.client import BrokerConnection, BrokerUnreachable, RequestTimedOut, check_error
    from weir.protocol.versions import ApiKey

    async def create() -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        async with await BrokerConnection.open(host, int(port), timeout_s=timeout_s) as conn:
            response = await conn.request(ApiKey.CREATE_TOPICS, 7, {
                "timeout": int(timeout_s * 1000), "validate_only": False, "topics": [{
                    "name": name, "num_partitions": -1 if assignment else partitions,
                    "replication_factor": -1 if assignment else replication,
                    "assignments": [{"partition_index": i, "broker_ids": r} for i, r in enumerate(assignment or [])],
                    "configs": [{"name": k, "value": v} for k, v in config.items()]} for name in names]})
            for topic in response.topics:
                check_error(topic.error_code, topic.error_message)

    try:
        asyncio.run(create())
    except (BrokerUnreachable, RequestTimedOut) as e:
        raise BenchTimedOut(f"CreateTopics of {', '.join(names)}: {e}") from e


def _wait_until_led(admin, partitions: dict[str, int], what: str, timeout_s: float, dead: int = -1) -> None:
    """Poll Metadata (confluent-kafka's `admin`) until each topic of `partitions` (name: partition
    count) has that many partitions, each with a leader other than broker `dead`. BenchTimedOut,
    naming `what`, after `timeout_s`."""
    from confluent_kafka import KafkaException
    deadline = time.monotonic() + timeout_s
    while True:
        failed = ""
        try:
            topics = admin.list_topics(timeout=max(0.1, min(10.0, deadline - time.monotonic()))).topics
            unled = sum(count if name not in topics or len(topics[name].partitions) != count
                        else sum(p.leader in (dead, -1) for p in topics[name].partitions.values())
                        for name, count in partitions.items())
        except KafkaException as e:  # Metadata not answered in time
            unled, failed = sum(partitions.values()), f" (Metadata: {e})"
        if not unled:
            return
        if time.monotonic() >= deadline:
            raise BenchTimedOut(f"{what}: {unled:,} of {sum(partitions.values()):,} partitions without a live "
                                f"leader after {timeout_s:g} s{failed}")
        time.sleep(0.2)  # the poll's interval: a Metadata of every partition is no small request at 10,000


_SLEEPER = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
stalls, end, before = [], time.monotonic() + float(sys.argv[2]), time.monotonic()
while before < end:
    time.sleep(0.001)
    now = time.monotonic()
    if now - before > 0.003:
        stalls.append(now - before)
    before = now
print(len(stalls), max(stalls, default=0.0))
"""


def machine_stalls(seconds: float = 5) -> str:
    """How often this machine, with no load of ours (the brokers idle or gone), fails to wake a
    process that sleeps 1 ms at a time within 3 ms, on each CPU: stalls that are the machine's,
    not Weir's. Where they come once a second or more, they alone make a p99 of 1,000 requests
    per second (a virtual machine whose host takes one CPU away for a few milliseconds, say)."""
    cpus = sorted(os.sched_getaffinity(0))
    probes = [subprocess.Popen([sys.executable, "-c", _SLEEPER, str(cpu), str(seconds)], stdout=subprocess.PIPE,
                               text=True) for cpu in cpus]
    found = []
    for cpu, probe in zip(cpus, probes):
        count, worst = probe.communicate()[0].split()
        found.append(f"CPU {cpu} {int(count) / seconds:.1f}/s" + (f" (worst {float(worst) * 1000:.1f} ms)"
                                                                  if int(count) else ""))
    return (f"machine stalls (no load, {seconds:g} s: a process sleeping 1 ms at a time woke more than 3 ms "
            f"late): " + ", ".join(found))


_ECHO = """
import socket
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
conn = server.accept()[0]
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while data := conn.recv(4096):
    conn.sendall(data)
"""


def wake_up_cost(round_trips: int = 1000, size: int = 200) -> str:
    """A round trip over loopback to an echo process (plain blocking sockets, no event loop), back
    to back and with 1 ms of sleep before each: at 1,000 records/s every process of a request's
    path has gone idle in between, and on a virtual machine whose idle CPUs halt, waking one costs
    the host's wake-up as well. RF=3 acks=all wakes processes four times in turn per record
    (leader, followers, leader, client)."""
    echo = subprocess.Popen([sys.executable, "-c", _ECHO], stdout=subprocess.PIPE, text=True)
    try:
        port = int(echo.stdout.readline())
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            message = bytes(size)

            def median_round_trip(sleep_s: float) -> float:
                times = []
                for _ in range(round_trips):
                    if sleep_s:
                        time.sleep(sleep_s)
                    began = time.perf_counter()
                    conn.sendall(message)
                    received = 0
                    while received < size:
                        received += len(conn.recv(size))
                    times.append(time.perf_counter() - began)
                return sorted(times)[len(times) // 2]
            busy, idle = median_round_trip(0), median_round_trip(0.001)
    finally:
        echo.kill()
        echo.wait()
    return (f"wake-ups: a loopback round trip between two processes (median of {round_trips:,}) takes "
            f"{busy * 1e6:.0f} us back to back, {idle * 1e6:.0f} us when both have been idle for 1 ms")


def page_cache_cost(record_size: int, total_mib: int = 64, write_kib: int = 64) -> str:
    """What the machine's kernel charges the brokers for the log's bytes: CPU per MiB appended to
    a file in the temp dir (the bench's log dirs; new page-cache pages), against overwriting pages
    already cached (the copy alone), and what appending costs RF=3 per million records (three
    copies of each record's value, batch overhead left out). On a virtual machine whose host backs
    memory on first touch, a new page costs several times the copy."""
    chunk = os.urandom(write_kib * 1024)

    def cpu_seconds(write) -> float:
        began = time.process_time()
        for _ in range(total_mib * 1024 // write_kib):
            write()
        return time.process_time() - began
    with tempfile.TemporaryDirectory(prefix="weir-bench-") as scratch:
        fd = os.open(os.path.join(scratch, "log"), os.O_WRONLY | os.O_CREAT)
        try:
            appended = cpu_seconds(lambda: os.write(fd, chunk))
            overwritten = cpu_seconds(lambda: os.pwrite(fd, chunk, 0))
        finally:
            os.close(fd)
    rf3 = appended / total_mib * 3 * (1e6 * record_size / 2 ** 20)
    return (f"page cache ({total_mib} MiB in {write_kib} KiB writes): appending {appended / total_mib * 1e3:.2f} ms "
            f"of CPU per MiB, overwriting cached pages {overwritten / total_mib * 1e3:.2f} ms; appending alone is "
            f"about {rf3:.2f} CPU-s per million {record_size}-byte records at RF=3")


def _row(name: str, figures: dict) -> str:
    return f"{name:<26}" + "  ".join(f"{k} {v:>12,.2f}" for k, v in figures.items())


def _median(runs: list[dict]) -> dict:
    """Per figure, the median over rounds (the machine is shared; single runs are noisy)."""
    return {k: sorted(r[k] for r in runs)[len(runs) // 2] for k in runs[0]}


def _bench_produce(bootstrap: str, args) -> None:
    sink_port = free_port()
    sink = _start_sink(sink_port, 1, args.record_size)
    try:
        weir_runs, sink_runs = [], []
        for _ in range(args.rounds):  # alternate, so both see the same machine
            weir_runs.append(_produce(bootstrap, args.records, args.record_size))
            sink_runs.append(_produce(f"127.0.0.1:{sink_port}", args.records, args.record_size))
    finally:
        sink.terminate()
        sink.wait(30)
    weir, nothing = _median(weir_runs), _median(sink_runs)
    print(_row("weir produce", weir))
    print(_row("no-op sink produce", nothing))
    print(f"ratio weir/sink records/s: {weir['records/s'] / nothing['records/s']:.2f} (target >= 0.8)")


def _bench_consume(bootstrap: str, args) -> None:
    produced, consumed = [], []
    for _ in range(args.rounds):
        produced.append(_produce(bootstrap, args.records, args.record_size))
        consumed.append(_consume(bootstrap, args.records, args.record_size,
                                 skip=(args.records + 1) * len(consumed)))
    produce, consume = _median(produced), _median(consumed)
    print(_row("weir produce", produce))
    print(_row("weir consume", consume))
    print(f"ratio consume/produce records/s: {consume['records/s'] / produce['records/s']:.2f} (target >= 1.0)")


def _bench_replication(cluster, args) -> None:
    bootstrap = cluster.bootstrap
    _create_topic(bootstrap, "rf1", 1, 1)
    _create_topic(bootstrap, "rf3", 1, 3, **{"min.insync.replicas": "2"})
    rf3_runs, rf1_runs = [], []
    for _ in range(args.rounds):
        rf3_runs.append(_with_cpu(cluster, args.records, lambda: _produce(bootstrap, args.records, args.record_size,
                                                                          "rf3", "all")))
        rf1_runs.append(_with_cpu(cluster, args.records, lambda: _produce(bootstrap, args.records, args.record_size,
                                                                          "rf1", "1")))
    rf3, rf1 = _median(rf3_runs), _median(rf1_runs)
    print(_row("RF=3 acks=all", rf3))
    print(_row("RF=1 acks=1", rf1))
    print(f"ratio RF=3 acks=all / RF=1 acks=1 records/s: {rf3['records/s'] / rf1['records/s']:.2f} (target >= 0.5), "
          f"CPU-seconds per million records: {rf3['CPU s/M'] / rf1['CPU s/M']:.2f}")
    steady = _produce(bootstrap, 10_000, args.record_size, "rf3", "all", rate=1000)
    print(_row("RF=3 acks=all @1000/s", steady) + "  (target p99 < 5 ms)")
    print(machine_stalls())
    print(wake_up_cost())
    print(f"failover: {_failover_seconds(cluster, args):.2f} s from kill -9 of the leader of 1,000 partitions until "
          f"all take acks=all writes (zookeeper.session.timeout.ms {cluster.brokers[0].overrides.get('zookeeper.session.timeout.ms')}; "
          f"target <= session timeout + 1 s)")


def _bench_spark(bootstrap: str, args) -> None:
    from weir.bench.spark import report, spark_vs_parquet
    report(args.records, spark_vs_parquet(bootstrap, args.records, args.record_size, 4, args.rounds))


def _failover_seconds(cluster, args) -> float:
    """kill -9 the broker leading 1,000 partitions; seconds until every partition has a new
    leader (polled through Metadata) and has taken an acks=all write there."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    partitions = 1000
    _create_topic(cluster.bootstrap, "failover", assignment=[[0, 1, 2]] * partitions)  # broker 0 leads all
    survivor = cluster.brokers[1].bootstrap
    admin = AdminClient({"bootstrap.servers": survivor})
    cluster.brokers[0].kill()
    killed = time.perf_counter()
    _wait_until_led(admin, {"failover": partitions}, "failover of broker 0", FAILOVER_TIMEOUT_S, dead=0)
    print(f"failover: new leaders for all 1,000 partitions after {time.perf_counter() - killed:.2f} s")
    acked = []
    producer = Producer({"bootstrap.servers": survivor, "acks": "all", "linger.ms": 0})
    for p in range(partitions):
        producer.produce("failover", b"after", partition=p, on_delivery=lambda err, msg: acked.append(err is None))
    producer.flush(120)
    if sum(acked) < partitions:
        raise RuntimeError(f"only {sum(acked)} of {partitions} partitions took writes again")
    return time.perf_counter() - killed


def _user_and_system_seconds(cluster) -> tuple[float, float]:
    """User and system CPU time of the cluster's broker processes so far (Linux /proc)."""
    user = system = 0
    for broker in cluster.brokers:
        fields = Path(f"/proc/{broker.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        user, system = user + int(fields[11]), system + int(fields[12])
    return user / os.sysconf("SC_CLK_TCK"), system / os.sysconf("SC_CLK_TCK")


def _bench_compare(args) -> int:
    if not args.against:
        print("weir bench compare needs --against SOURCE_TREE", file=sys.stderr)
        return 2
    return _side_by_side(args, {"this tree": (SOURCE_TREE, {}, sys.executable, {}),
                                "--against": (str(Path(args.against).resolve()), {}, args.against_python, {})},
                         idle_partitions=args.idle_partitions or 0, idle_topics=args.idle_topics)


def _bench_sessions(args) -> int:
    """KIP-227's worth: followers with and without fetch sessions, with idle partitions beside the busy ones."""
    no_sessions = {"max.incremental.fetch.session.cache.slots": "0"}
    return _side_by_side(args, {"fetch sessions": (SOURCE_TREE, {}, sys.executable, {}),
                                "no sessions": (SOURCE_TREE, no_sessions, sys.executable, {})},
                         idle_partitions=300 if args.idle_partitions is None else args.idle_partitions)


def _side_by_side(args, sides: dict[str, tuple[str, dict, str, dict]], idle_partitions: int = 0,
                  idle_topics: int = 0) -> int:
    """Three brokers per side (its source tree, its broker settings, the Python that runs them, and
    environment variables they start with),
    RF=3 acks=all into 6 partitions (`idle_partitions` more, RF=3, and `idle_topics` topics of one
    partition, RF=1, written by nobody), rounds alternated between sides."""
    print(f"{args.records:,} records of {args.record_size} bytes, confluent-kafka (linger.ms 5, no callback), "
          f"median of {args.rounds} rounds, {len(sides)} x 3 brokers on 127.0.0.1, RF=3 acks=all"
          + (f", {idle_partitions} idle partitions" if idle_partitions else "")
          + (f", {idle_topics} idle topics" if idle_topics else ""))
    clusters: dict = {}
    runs: dict[str, list] = {name: [] for name in sides}
    steady: dict[str, list] = {name: [] for name in sides}
    try:
        for name, (tree, settings, python, env) in sides.items():
            cluster = clusters[name] = _scratch_cluster(3, python, **settings)
            with _environment({**env, "PYTHONPATH": tree}):  # the brokers import Weir from `tree`
                cluster.start()
            _create_topic(cluster.bootstrap, BENCH_TOPIC, 6, 3, **{"min.insync.replicas": "2"})
            _create_topic(cluster.bootstrap, "latency", 1, 3, **{"min.insync.replicas": "2"})
            if idle_partitions:
                _create_topic(cluster.bootstrap, "idle", idle_partitions, 3)
            for first in range(0, idle_topics, 500):  # CreateTopics requests of a bounded size
                _create_topics(cluster.bootstrap, [f"idle-{i}" for i in range(first, min(first + 500, idle_topics))])
        for _ in range(args.rounds):
            for name, cluster in clusters.items():
                runs[name].append(_with_cpu(cluster, args.records, lambda: _produce(
                    cluster.bootstrap, args.records, args.record_size, acks="all", partitions=6, callbacks=False)))
        for _ in range(args.rounds):
            for name, cluster in clusters.items():
                steady[name].append(_produce(cluster.bootstrap, LATENCY_RECORDS, args.record_size, "latency", "all",
                                             rate=1000))
    finally:
        for cluster in clusters.values():
            _discard(cluster)
    for name, (tree, settings, python, env) in sides.items():
        print(_row(name, _median(runs[name])) + f"  ({tree}{''.join(f' {k}={v}' for k, v in {**settings, **env}.items())}"
              + (f", brokers on {python}" if python != sys.executable else "") + ")")
    for name in sides:
        print(f"{name:<14} user s/M by round: " + " ".join(f"{r['user s/M']:.2f}" for r in runs[name]))
    for name in sides:
        print(f"{name:<14} acks=all at 1,000 records/s (linger.ms 0), p50 / p99 ms by round: "
              + " ".join(f"{r['p50 ms']:.2f}/{r['p99 ms']:.2f}" for r in steady[name]))
    print(machine_stalls())
    print(wake_up_cost())
    print(page_cache_cost(args.record_size))
    first, second = (_median(runs[name]) for name in sides)
    print(f"ratio {' / '.join(sides)}: records/s {first['records/s'] / second['records/s']:.2f}, "
          f"broker CPU-seconds per million records {first['CPU s/M'] / second['CPU s/M']:.2f}")
    return 0


@contextlib.contextmanager
def _environment(variables: dict[str, str]):
    """`variables` set in this process's environment, which the processes it starts meanwhile
    inherit; each put back as it was afterwards."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _scratch_cluster(size: int, python: str = sys.executable, **settings):
    """A local cluster of `size` brokers (run by `python`) in a new directory under the system's
    temp dir; the caller `_discard`s it."""
    from weir.lab.local_cluster import LocalCluster
    return LocalCluster(Path(tempfile.mkdtemp(prefix="weir-bench-")), size, python=python,
                        overrides={"zookeeper.session.timeout.ms": "6000", "metrics.port": "0", **settings})


def _discard(cluster) -> None:
    """Kill the cluster and remove its directory: each run writes gigabytes of logs, which would
    otherwise pile up in the temp dir run after run."""
    cluster.kill()
    shutil.rmtree(cluster.data_dir, ignore_errors=True)


def _with_cpu(cluster, records: int, run) -> dict:
    """`run()`'s figures plus the CPU-seconds all the cluster's brokers spent per million records:
    in all, and user and system apart; and the Produce and Fetch requests they answered per million
    records, with the CPU per request (what costs the CPU is requests more than records: a client
    sending smaller batches costs more per record)."""
    answered = _requests_answered(cluster)  # scraped outside the CPU window
    user, system = _user_and_system_seconds(cluster)
    figures = run()
    user_after, system_after = _user_and_system_seconds(cluster)
    answered = _requests_answered(cluster) - answered
    figures["user s/M"] = (user_after - user) / records * 1e6
    figures["system s/M"] = (system_after - system) / records * 1e6
    figures["CPU s/M"] = figures["user s/M"] + figures["system s/M"]
    requests = answered["Produce"] + answered["Fetch"]
    figures["Produce/M"] = answered["Produce"] / records * 1e6
    figures["Fetch/M"] = answered["Fetch"] / records * 1e6
    figures["CPU us/request"] = figures["CPU s/M"] * 1e6 / (requests / records * 1e6) if requests else 0.0
    return figures


def _requests_answered(cluster) -> Counter:
    """Requests the cluster's brokers answered so far, by API, from their metrics endpoints."""
    from weir.console.server import parse_metrics
    counts: Counter = Counter()
    for broker in cluster.brokers:
        served = re.search(r"metrics on http://[^:]+:(\d+)/metrics", broker.output())
        if served is None:  # a source tree (compare --against) older than its metrics
            continue
        with urllib.request.urlopen(f"http://127.0.0.1:{served.group(1)}/metrics", timeout=10) as response:
            for labels, value in parse_metrics(response.read().decode()).get(
                    "kafka_network_requestmetrics_requests_total", []):
                counts[labels["request"]] += value
    return counts


def _bench_loops(args) -> int:
    """RF=3 acks=all under the standard asyncio loop and under uvloop (WEIR_EVENT_LOOP=uvloop)."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        print("weir bench loops compares with uvloop: pip install uvloop", file=sys.stderr)
        return 2
    return _side_by_side(args, {"uvloop": (SOURCE_TREE, {}, sys.executable, {"WEIR_EVENT_LOOP": "uvloop"}),
                                "asyncio": (SOURCE_TREE, {}, sys.executable, {})})


def _bench_all(args) -> int:
    print(f"{args.records:,} records of {args.record_size} bytes per run, confluent-kafka, median of "
          f"{args.rounds} rounds, brokers on 127.0.0.1")
    partitions = 6
    sink_port, chain_port = free_port(), free_port()
    sink = _start_sink(sink_port, partitions, args.record_size)
    chain = _start_sink(chain_port, 1, args.record_size, followers=2)
    one, three = _scratch_cluster(1), _scratch_cluster(3)
    try:
        one.start()
        three.start()
        _create_topic(one.bootstrap, BENCH_TOPIC, partitions, 1)
        _create_topic(three.bootstrap, BENCH_TOPIC, partitions, 3, **{"min.insync.replicas": "2"})
        _create_topic(three.bootstrap, "latency", 1, 3, **{"min.insync.replicas": "2"})
        runs: dict[str, list] = {"sink": [], "one": [], "three": []}

        def produce(bootstrap: str, acks: str) -> dict:
            return _produce(bootstrap, args.records, args.record_size, acks=acks, partitions=partitions,
                            callbacks=False)
        for _ in range(args.rounds):  # alternated, so all three see the same machine
            runs["sink"].append(produce(f"127.0.0.1:{sink_port}", "1"))
            runs["one"].append(_with_cpu(one, args.records, lambda: produce(one.bootstrap, "1")))
            runs["three"].append(_with_cpu(three, args.records, lambda: produce(three.bootstrap, "all")))
        sink_figures, one_figures, three_figures = (_median(runs[k]) for k in ("sink", "one", "three"))
        consume_runs: dict[str, list] = {"sink": [], "one": [], "native sink": [], "native one": []}
        for _ in range(args.rounds):  # alternated too
            consume_runs["sink"].append(_consume(f"127.0.0.1:{sink_port}", args.records, args.record_size,
                                                 partitions=partitions))
            consume_runs["one"].append(_with_cpu(one, args.records, lambda: _consume(
                one.bootstrap, args.records, args.record_size, partitions=partitions)))
            consume_runs["native sink"].append(_consume_native(f"127.0.0.1:{sink_port}", args.records))
            consume_runs["native one"].append(_with_cpu(one, args.records, lambda: _consume_native(
                one.bootstrap, args.records)))
        consumed, consume_ceiling = _median(consume_runs["one"]), _median(consume_runs["sink"])
        native, native_ceiling = _median(consume_runs["native one"]), _median(consume_runs["native sink"])
        paced = (("sink", None, f"127.0.0.1:{sink_port}", BENCH_TOPIC, "1"),
                 ("chain", None, f"127.0.0.1:{chain_port}", BENCH_TOPIC, "all"),
                 ("one", one, one.bootstrap, BENCH_TOPIC, "1"), ("three", three, three.bootstrap, "latency", "all"))
        steady_runs: dict[str, list] = {name: [] for name, *_ in paced}
        for _ in range(args.rounds):  # alternated too: a burst of stalls would otherwise fall on one target
            for name, cluster, bootstrap, topic, acks in paced:
                run = functools.partial(_produce, bootstrap, 10_000, args.record_size, topic, acks, rate=1000)
                steady_runs[name].append(run() if cluster is None else _with_cpu(cluster, 10_000, run))
        steady = {name: _median(runs) for name, runs in steady_runs.items()}
        # Spark is imported only now: its objects make every full garbage collection slower, and
        # the consumer above would pay for them.
        from weir.bench.spark import report, spark_vs_parquet
        spark = spark_vs_parquet(one.bootstrap, args.records, args.record_size, 4, args.rounds)
    finally:
        for process in (sink, chain):
            process.terminate()
            process.wait(30)
        _discard(one)
        _discard(three)
    stalls, wake_ups = machine_stalls(), wake_up_cost()
    page_cache = page_cache_cost(args.record_size)
    ceiling = sink_figures["records/s"]
    print(f"{'target':<44}{'records/s':>12}{'x sink':>8}{'broker CPU-s per M':>20}")
    for name, figures in (("no-op sink (no callback: the client's ceiling)", sink_figures),
                          ("one broker, RF=1, acks=1", one_figures),
                          ("three brokers, RF=3, min ISR 2, acks=all", three_figures)):
        cpu = f"{figures['CPU s/M']:.2f}" if "CPU s/M" in figures else "-"
        print(f"{name:<44}{figures['records/s']:>12,.0f}{figures['records/s'] / ceiling:>8.2f}{cpu:>20}")
    for name, figures in (("one broker", one_figures), ("three brokers", three_figures)):
        print(f"{name}: {figures['Produce/M']:,.0f} Produce and {figures['Fetch/M']:,.0f} Fetch requests per M records, "
              f"broker CPU {figures['CPU us/request']:,.0f} us per request")
    print(f"consumer (confluent-kafka, one broker, {partitions} partitions): {consumed['records/s']:,.0f} records/s, "
          f"{consumed['records/s'] / consume_ceiling['records/s']:.2f}x the no-op source's "
          f"{consume_ceiling['records/s']:,.0f} (the client's ceiling); broker CPU-s per M {consumed['CPU s/M']:.2f}")
    print(f"consumer (kcat, librdkafka in C, one broker, {partitions} partitions, start-up included): "
          f"{native['records/s']:,.0f} records/s, {native['records/s'] / native_ceiling['records/s']:.2f}x the no-op "
          f"source's {native_ceiling['records/s']:,.0f}; broker CPU-s per M {native['CPU s/M']:.2f}")
    print("at 1,000 records/s, linger.ms 0: " + ", ".join(
        f"{label} p50 {steady[name]['p50 ms']:.2f} ms p99 {steady[name]['p99 ms']:.2f} ms" for name, label in
        (("three", "RF=3 acks=all"), ("one", "one broker acks=1"), ("sink", "no-op sink"))) + " (medians of the rounds)")
    print(f"  and the no-op sink with two followers (acks=all answered once both echoed the records: an RF=3 "
          f"round trip with no work in it, the floor here) p50 {steady['chain']['p50 ms']:.2f} ms p99 "
          f"{steady['chain']['p99 ms']:.2f} ms; RF=3 acks=all p99 {steady['three']['p99 ms'] / steady['chain']['p99 ms']:.1f}x it")
    print("RF=3 acks=all p50 / p99 ms by round: " + " ".join(
        f"{r['p50 ms']:.2f}/{r['p99 ms']:.2f}" for r in steady_runs["three"]))
    # CPU-seconds per million records are microseconds per record
    print(f"at 1,000 records/s the brokers' CPU per record: RF=3 {steady['three']['CPU s/M']:,.0f} us "
          f"({steady['three']['CPU s/M'] / 1000:.2f} of a core busy), one broker {steady['one']['CPU s/M']:,.0f} us")
    print(stalls)
    print(wake_ups)
    print(page_cache)
    report(args.records, spark)
    return 0


def interpreter() -> str:
    """Which Python runs the brokers and the client (the brokers are started with this one):
    what it costs per request depends on how it was built (scripts/bootstrap)."""
    with open("/proc/self/maps") as maps:
        linked = "libpython shared" if "libpython" in maps.read() else "libpython linked in"
    return f"{sys.implementation.name} {sys.version.split()[0]} ({os.path.realpath(sys.executable)}, {linked})"


def bench_clusters(args) -> int:
    """The workloads run against clusters of this module's (all but leader and scale)."""
    if args.workload in ("all", "compare", "loops", "sessions"):
        return {"all": _bench_all, "compare": _bench_compare, "loops": _bench_loops,
                "sessions": _bench_sessions}[args.workload](args)
    size = 3 if args.workload == "replication" else 1
    print(f"{args.records:,} records of {args.record_size} bytes, confluent-kafka, median of {args.rounds} rounds, "
          f"{size} broker(s) on 127.0.0.1")
    cluster = _scratch_cluster(size, **{"num.partitions": "1"})
    try:
        cluster.start()
        {"produce": lambda: _bench_produce(cluster.bootstrap, args),
         "consume": lambda: _bench_consume(cluster.bootstrap, args),
         "replication": lambda: _bench_replication(cluster, args),
         "spark": lambda: _bench_spark(cluster.bootstrap, args)}[args.workload]()
    finally:
        _discard(cluster)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "follow":
        follow_sink(int(sys.argv[2]))
    else:
        serve_sink(*map(int, sys.argv[1:5]))
