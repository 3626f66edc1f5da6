"""What the transaction tests with real clients share: topics, and reading read_committed."""

import time

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic


def create_topics(bootstrap: str, *names: str, partitions: int = 2, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, partitions, replication) for n in names]).values():
        future.result(30)


def read_committed(bootstrap: str, topic: str, expected: int, timeout_s: float = 60, group: str = "reader") -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values = []
    deadline = time.monotonic() + timeout_s
    quiet_until = None
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
        if len(values) >= expected:
            quiet_until = quiet_until or time.monotonic() + 2  # and nothing more arrives
            if time.monotonic() > quiet_until:
                break
    consumer.close()
    return values
