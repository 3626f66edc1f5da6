"""Waiting on a real cluster: poll a condition (each poll a real round trip), never a bare sleep."""

import time

from confluent_kafka import Consumer, TopicPartition

from weir.verify.workload import watermark_offsets

WAIT_S = 60


def wait_until(condition, what: str, timeout_s: float = WAIT_S, poll_s: float = 0.2):
    """Poll `condition` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll_s)


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """The partition's (low, high) watermarks, asked again while a restart's or failover's leadership
    settles (librdkafka hands back OFFSET_NOT_AVAILABLE, FENCED_LEADER_EPOCH and the like)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return watermark_offsets(consumer, TopicPartition(topic, partition), time.monotonic() + WAIT_S)
    finally:
        consumer.close()
