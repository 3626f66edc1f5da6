"""Produce and consume with real Kafka clients: confluent-kafka, kafka-python, kcat,
@platformatic/kafka and Sarama (consuming in a group), and (produce only) aiokafka and kafkajs.

Each function takes the bootstrap address and works like a user's program
would; the tests compare what went in with what came out.
"""

import asyncio
import functools
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

JS_CLIENTS = Path(__file__).parent.parent / "js"
GO_CLIENTS = Path(__file__).parent.parent / "go"


@dataclass(frozen=True)
class Message:
    partition: int
    offset: int
    key: bytes
    value: bytes
    headers: tuple
    timestamp: int


def make_messages(count: int, partitions: int) -> list[tuple[int, bytes, bytes, tuple, int]]:
    """(partition, key, value, headers, timestamp ms): deterministic, distinct."""
    base_ts = 1_700_000_000_000
    return [(i % partitions, f"key-{i}".encode(), f"value-{i}-".encode() * 3,
             (("seq", str(i).encode()), ("kind", b"test")), base_ts + i) for i in range(count)]


# -- confluent-kafka (librdkafka) ------------------------------------------

def confluent_produce(bootstrap, topic, messages, compression="none", acks="all", **config):
    from confluent_kafka import Producer
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": compression, "acks": acks,
                         "linger.ms": 5, "queue.buffering.max.messages": 2_000_000, **config})
    for partition, key, value, headers, ts in messages:
        while True:
            try:
                producer.produce(topic, value, key, partition=partition, headers=list(headers), timestamp=ts,
                                 on_delivery=lambda err, msg: err and errors.append(err))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:5]


def confluent_consume(bootstrap, topic, partitions, expected, headers=True):
    """Messages from the start of each partition; headers=False leaves them out (confluent-kafka
    cannot decode a header key that is not UTF-8, which Kafka's brokers accept)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out = []
    idle_polls = 0
    try:
        while len(out) < expected and idle_polls < 3:
            batch = consumer.consume(10000, timeout=5)
            idle_polls = 0 if batch else idle_polls + 1
            for msg in batch:
                assert msg.error() is None, msg.error()
                out.append(Message(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                   tuple(msg.headers() or ()) if headers else (), msg.timestamp()[1]))
    finally:
        consumer.close()
    return out


# -- kafka-python --------------------------------------------------------------

def kafka_python_produce(bootstrap, topic, messages, compression="none", acks="all"):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if compression == "none" else compression,
                             acks=acks, linger_ms=5, batch_size=64 * 1024)  # idempotence on, kafka-python's default
    futures = [producer.send(topic, value=value, key=key, partition=partition, headers=list(headers),
                             timestamp_ms=ts) for partition, key, value, headers, ts in messages]
    producer.flush(60)
    for f in futures:
        f.get(timeout=0)
    producer.close()


def kafka_python_consume(bootstrap, topic, partitions, expected):
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    out = []
    for msg in consumer:
        out.append(Message(msg.partition, msg.offset, msg.key, msg.value, tuple(msg.headers), msg.timestamp))
        if len(out) >= expected:
            break
    consumer.close()
    return out


# -- aiokafka (asyncio, its own record encoder) ------------------------------------

def aiokafka_produce(bootstrap, topic, messages, compression="none", acks="all"):
    from aiokafka import AIOKafkaProducer

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=5,
                                    compression_type=None if compression == "none" else compression)
        await producer.start()
        try:
            sent = [await producer.send(topic, value=value, key=key, partition=partition, headers=list(headers),
                                        timestamp_ms=ts) for partition, key, value, headers, ts in messages]
            await asyncio.gather(*sent)
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(produce(), 60))


# -- kafkajs (Node.js) -----------------------------------------------------------------

def kafkajs_produce(bootstrap, topic, messages, compression="none", acks="all"):
    """One kafkajs send of all messages (kafkajs batches them per partition); a timestamp of None
    leaves the record's timestamp to kafkajs. Keys, values and headers must be text."""
    assert acks == "all" and compression in ("none", "gzip"), "kafkajs runs here with acks=all, none or gzip"
    payload = [{"partition": partition, "key": key.decode(), "value": value.decode(),
                "timestamp": None if ts is None else str(ts), "headers": {k: v.decode() for k, v in headers}}
               for partition, key, value, headers, ts in messages]
    subprocess.run(["node", str(JS_CLIENTS / "produce.js"), bootstrap, topic, compression],
                   input=json.dumps(payload).encode(), check=True, timeout=120)


# -- @platformatic/kafka (Node.js, its own protocol code) --------------------------------

def platformatic_produce(bootstrap, topic, messages, compression="none"):
    """An idempotent producer, acks=all. Keys, values and headers must be text; no zstd on Node 20."""
    payload = [{"partition": partition, "key": key.decode(), "value": value.decode(), "timestamp": str(ts),
                "headers": {k: v.decode() for k, v in headers}} for partition, key, value, headers, ts in messages]
    subprocess.run(["node", str(JS_CLIENTS / "platformatic.mjs"), "produce", bootstrap, topic, compression],
                   input=json.dumps(payload).encode(), check=True, timeout=120)


def platformatic_group_consume(bootstrap, topic, group, expected):
    """Joins `group`, reads `expected` messages from the earliest offsets and commits them."""
    result = subprocess.run(["node", str(JS_CLIENTS / "platformatic.mjs"), "consume", bootstrap, topic, group,
                             str(expected)], capture_output=True, check=True, timeout=120)
    return [Message(m["partition"], int(m["offset"]), m["key"].encode(), m["value"].encode(),
                    tuple((k, v.encode()) for k, v in m["headers"]), int(m["timestamp"]))
            for m in json.loads(result.stdout)]


# -- Sarama (Go, its own protocol code; Debian's golang-github-shopify-sarama-dev) -------------

@functools.cache
def go_program(name: str) -> str:
    """The Go program tests/go/NAME built once per test process (GOPATH mode: Debian ships the
    libraries and their dependencies as source under /usr/share/gocode)."""
    binary = os.path.join(tempfile.mkdtemp(prefix=f"weir-{name}-"), f"{name}-client")
    env = {**os.environ, "GOPATH": "/usr/share/gocode", "GO111MODULE": "off"}
    env.setdefault("GOCACHE", os.path.join(tempfile.gettempdir(), "weir-test-gocache"))
    subprocess.run(["go", "build", "-o", binary, "."], cwd=GO_CLIENTS / name, env=env, check=True,
                   capture_output=True, timeout=300)
    return binary


def sarama_produce(bootstrap, topic, messages, compression="none"):
    """An idempotent async producer, acks=all, Sarama speaking Kafka 2.1's protocol versions.
    Keys, values and headers must be text."""
    payload = [{"partition": partition, "key": key.decode(), "value": value.decode(), "timestamp": ts,
                "headers": [(k, v.decode()) for k, v in headers]} for partition, key, value, headers, ts in messages]
    subprocess.run([go_program("sarama"), "produce", bootstrap, topic, compression], input=json.dumps(payload).encode(),
                   check=True, timeout=120)


def sarama_group_consume(bootstrap, topic, group, expected):
    """Joins `group`, reads `expected` messages from the oldest offsets and commits them."""
    result = subprocess.run([go_program("sarama"), "consume", bootstrap, topic, group, str(expected)],
                            capture_output=True, check=True, timeout=120)
    return [Message(m["partition"], m["offset"], m["key"].encode(), m["value"].encode(),
                    tuple((k, v.encode()) for k, v in m.get("headers") or ()), m["timestamp"])
            for m in json.loads(result.stdout)]


# -- kcat --------------------------------------------------------------------

def kcat_produce(bootstrap, topic, messages, compression="none", acks="all"):
    # kcat reads one message per line; -K sets the key delimiter. Headers are per run (-H),
    # timestamps are assigned at produce time, so kcat runs send per partition.
    by_partition: dict[int, list] = {}
    for m in messages:
        by_partition.setdefault(m[0], []).append(m)
    for partition, msgs in by_partition.items():
        lines = b"".join(key + b"\t" + value + b"\n" for _, key, value, _, _ in msgs)
        subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", str(partition), "-K", "\t",
                        "-z", compression, "-X", f"acks={acks}", "-H", "kind=test"],
                       input=lines, check=True, timeout=120)


def kcat_consume(bootstrap, topic, partitions, expected):
    out = []
    fmt = "%p\t%o\t%T\t%k\t%s\t%h\n"
    for partition in range(partitions):
        result = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", str(partition), "-o", "beginning",
                                 "-e", "-f", fmt, "-q"], capture_output=True, check=True, timeout=120)
        for line in result.stdout.decode().splitlines():
            p, o, ts, key, value, headers = line.split("\t")
            parsed = tuple((k, v.encode()) for k, v in (h.split("=", 1) for h in headers.split(",") if h))
            out.append(Message(int(p), int(o), key.encode(), value.encode(), parsed, int(ts)))
    assert len(out) == expected, f"kcat read {len(out)} of {expected}"
    return out
