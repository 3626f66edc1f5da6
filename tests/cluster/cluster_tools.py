"""What the replication tests need to look at a running cluster: metadata, waits, a steady producer."""

import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import WAIT_S, wait_until  # noqa: F401 (tests import it from here)


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int, replication: int, **config) -> None:
    client = admin(bootstrap)  # must outlive the future
    client.create_topics([NewTopic(name, partitions, replication, config=config)])[name].result(30)


def partition_metadata(bootstrap: str, topic: str) -> dict:
    """partition → (leader, replicas, isr), fresh from a broker."""
    client = admin(bootstrap)
    metadata = client.list_topics(topic, timeout=10)
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in metadata.topics[topic].partitions.values()}


def read_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """Every committed record of every partition, in offset order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    deadline = time.monotonic() + WAIT_S
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1):
                if msg.error() is None:
                    out[msg.partition()].append(msg.value())
                    at_end.discard(msg.partition())
                elif msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
    finally:
        consumer.close()
    assert len(at_end) == partitions, "could not read every partition to its end"
    return out


class SteadyProducer:
    """Produces unique values with acks=all from a thread; records which were acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, **config) -> None:
        self.topic = topic
        self.partitions = partitions
        self.acked: set[bytes] = set()
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                   "message.timeout.ms": 30000, "retries": 1000, "retry.backoff.ms": 100, **config})
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "SteadyProducer":
        self._thread.start()
        return self

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.add(msg.value())
        else:
            self.errors.append(err.name())

    def _run(self) -> None:
        while not self._stop.is_set():
            value = f"v{self.sent}".encode()
            try:
                self._producer.produce(self.topic, value, partition=self.sent % self.partitions,
                                       on_delivery=self._delivered)
                self.sent += 1
            except BufferError:
                pass
            self._producer.poll(0.001)

    def wait_acked(self, count: int) -> None:
        wait_until(lambda: len(self.acked) >= count, f"{count} acknowledged records")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._producer.flush(60)
