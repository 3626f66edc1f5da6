"""`weir bench produce|consume`: confluent-kafka against Weir, and against a no-op sink.

The sink is a tiny server built from the same protocol and connection code as
the broker whose Produce handler stores nothing, so the ratio Weir/sink tells
what the log and the broker's bookkeeping cost. Results are printed, never
asserted: speed is measured here, not in tests.
"""

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid

from .protocol.hot_responses import ProducePartitionResult, encode_produce_response
from .protocol.versions import ApiKey

BENCH_TOPIC = "bench"
SINK_TOPIC_ID = uuid.UUID(int=1)


class SinkApis:
    """Answers ApiVersions, Metadata and Produce; Produce stores nothing."""

    def __init__(self, port: int) -> None:
        from .broker.apis import KafkaApis
        self.port = port
        self.api_versions_body = KafkaApis.api_versions_body
        self.next_offset = 0
        self.handlers = {
            ApiKey.API_VERSIONS: lambda h, r: self.api_versions_body(0),
            ApiKey.METADATA: self.metadata,
            ApiKey.PRODUCE: self.produce,
        }

    def metadata(self, header, request) -> dict:
        partition = {"error_code": 0, "partition_index": 0, "leader_id": 0, "leader_epoch": 0,
                     "replica_nodes": [0], "isr_nodes": [0], "offline_replicas": []}
        return {"throttle_time": 0, "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": self.port}],
                "cluster_id": "sink", "controller_id": 0, "error_code": 0,
                "topics": [{"error_code": 0, "name": BENCH_TOPIC, "topic_id": SINK_TOPIC_ID,
                            "partitions": [partition]}]}

    def produce(self, header, request):
        out = []
        for topic in request.topic_data:
            results = []
            for data in topic.partition_data:
                results.append(ProducePartitionResult(data.index, 0, self.next_offset, -1, 0))
                self.next_offset += 1
            out.append((topic.name, topic.topic_id if header.api_version >= 13 else None, results))
        return None if request.acks == 0 else encode_produce_response(header.api_version, out)


def serve_sink(port: int) -> None:
    import asyncio

    from .broker.connection import Connection

    async def main():
        loop = asyncio.get_running_loop()
        apis = SinkApis(port)
        await loop.create_server(lambda: Connection(apis, 104857600), "127.0.0.1", port)
        print(f"sink ready on 127.0.0.1:{port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str]) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, stdin=subprocess.DEVNULL)
    for line in proc.stdout:
        if "ready on" in line:
            return proc
    raise RuntimeError(f"{args} did not start")


def _produce(bootstrap: str, records: int, size: int) -> dict:
    from confluent_kafka import Producer
    latencies = []
    errors = []

    def delivered(err, msg):
        if err:
            errors.append(err)
        else:
            latencies.append(msg.latency())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576})
    payload = os.urandom(size)
    producer.produce(BENCH_TOPIC, payload, partition=0)  # metadata and connection warm-up
    producer.flush(30)
    latencies.clear()
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(BENCH_TOPIC, payload, partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} produce errors, first: {errors[0]}")
    latencies.sort()
    return {"records/s": records / elapsed, "MB/s": records * size / elapsed / 1e6,
            "p50 ms": latencies[len(latencies) // 2] * 1000, "p99 ms": latencies[int(len(latencies) * 0.99)] * 1000,
            "seconds": elapsed}


def _consume(bootstrap: str, records: int, record_size: int, skip: int) -> dict:
    """Read `records` records starting at offset `skip` (earlier rounds' records)."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    consumer.assign([TopicPartition(BENCH_TOPIC, 0, skip)])
    seen = 0
    start = time.perf_counter()
    while seen < records:
        batch = consumer.consume(1000, timeout=5)  # larger asks stall on librdkafka's queue refill
        failed = next((m.error() for m in batch if m.error() is not None), None)
        if failed is not None:
            raise RuntimeError(f"consume error: {failed}")
        seen += len(batch)
    elapsed = time.perf_counter() - start
    consumer.close()
    return {"records/s": seen / elapsed, "MB/s": seen * record_size / elapsed / 1e6, "seconds": elapsed}


def _row(name: str, figures: dict) -> str:
    return f"{name:<22}" + "  ".join(f"{k} {v:>12,.2f}" for k, v in figures.items())


def _median(runs: list[dict]) -> dict:
    """Per figure, the median over rounds (the machine is shared; single runs are noisy)."""
    return {k: sorted(r[k] for r in runs)[len(runs) // 2] for k in runs[0]}


def run_bench(args) -> int:
    procs = []
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            port = _free_port()
            data = tempfile.mkdtemp(prefix="weir-bench-")
            procs.append(_start(["weir.cli", "broker", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                                 "--override", f"log.dirs={data}", "--override", "num.partitions=1"]))
            bootstrap = f"127.0.0.1:{port}"
        print(f"{args.records:,} records of {args.record_size} bytes, confluent-kafka, acks=all, one partition, "
              f"median of {args.rounds} rounds")
        if args.workload == "produce":
            sink_port = _free_port()
            procs.append(_start(["weir.bench", str(sink_port)]))
            weir_runs, sink_runs = [], []
            for _ in range(args.rounds):  # alternate, so both see the same machine
                weir_runs.append(_produce(bootstrap, args.records, args.record_size))
                sink_runs.append(_produce(f"127.0.0.1:{sink_port}", args.records, args.record_size))
            weir, sink = _median(weir_runs), _median(sink_runs)
            print(_row("weir produce", weir))
            print(_row("no-op sink produce", sink))
            print(f"ratio weir/sink records/s: {weir['records/s'] / sink['records/s']:.2f} (target >= 0.8)")
        else:
            produced, consumed = [], []
            for _ in range(args.rounds):
                produced.append(_produce(bootstrap, args.records, args.record_size))
                consumed.append(_consume(bootstrap, args.records, args.record_size, skip=args.records * len(consumed)))
            produce, consume = _median(produced), _median(consumed)
            print(_row("weir produce", produce))
            print(_row("weir consume", consume))
            print(f"ratio consume/produce records/s: {consume['records/s'] / produce['records/s']:.2f}"
                  " (target >= 1.0)")
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)
    return 0


if __name__ == "__main__":
    serve_sink(int(sys.argv[1]))
