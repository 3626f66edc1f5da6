"""What the broker reads of the consumer protocol's opaque member bytes (Kafka's
ConsumerProtocolSubscription and ConsumerProtocolAssignment): both start with a version (int16)
and then their topics, in every version; anything after the topics is left alone. Bytes that
cannot be read give nothing, as Kafka treats them."""

from __future__ import annotations

import struct


def subscribed_topics(subscription: bytes) -> set[str]:
    """The topics of a member's subscription."""
    try:
        return {topic for topic, _ in _topics(subscription, with_partitions=False)}
    except (struct.error, UnicodeDecodeError):
        return set()


def assigned_partitions(assignment: bytes) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of a member's assignment."""
    try:
        return [(topic, p) for topic, partitions in _topics(assignment, with_partitions=True) for p in partitions]
    except (struct.error, UnicodeDecodeError):
        return []


def _topics(data: bytes, *, with_partitions: bool) -> list[tuple[str, tuple[int, ...]]]:
    (count,), position, out = struct.unpack_from(">i", data, 2), 6, []
    for _ in range(count):
        (length,) = struct.unpack_from(">h", data, position)
        topic = data[position + 2:position + 2 + length].decode()
        position += 2 + length
        partitions: tuple[int, ...] = ()
        if with_partitions:
            (n,) = struct.unpack_from(">i", data, position)
            partitions = struct.unpack_from(f">{n}i", data, position + 4)
            position += 4 + 4 * n
        out.append((topic, partitions))
    return out
