"""What the Spark tests share: topics, producing with confluent-kafka, and reading back."""

import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_until  # noqa: F401 (tests import it from here)

# Record timestamps: recent (old ones would fall to time-based retention), fixed per test run.
BASE_TS = int(time.time()) * 1000 - 3_600_000


def create_topic(bootstrap: str, name: str, partitions: int = 1, replication: int = 1, **config) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication, config=config)])[name].result(30)


def produce(bootstrap: str, topic: str, values, *, partitions: int = 1, compression: str = "none",
            headers: bool = False, start: int = 0) -> list[tuple[int, bytes, bytes]]:
    """Produce `values` round-robin over the partitions with acks=all; (partition, key, value) each."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "compression.type": compression, "enable.idempotence": False})
    errors = []
    out = []
    for i, value in enumerate(values, start):
        key = f"k{i}".encode()
        p = i % partitions
        kwargs = {"headers": [("seq", str(i).encode()), ("h", b"x")]} if headers else {}
        while True:
            try:
                producer.produce(topic, value, key, partition=p, timestamp=BASE_TS + i,
                                 on_delivery=lambda err, msg: err and errors.append(err), **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        out.append((p, key, value))
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    return out


def values(n: int, prefix: str = "v", start: int = 0) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(start, start + n)]


