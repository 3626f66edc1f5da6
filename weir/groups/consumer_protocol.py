"""What the broker reads of the consumer protocol's opaque member bytes (Kafka's
ConsumerProtocolSubscription and ConsumerProtocolAssignment): both start with a version (int16)
and then their topics, in every version; anything after the topics is left alone.

A subscription is read as Kafka's coordinator reads it, as version 0 whatever its version (topics,
then user data: every later version has that prefix). One it cannot read leaves the group's
subscribed topics unknown (None) - and Kafka then counts every topic as subscribed
(GroupMetadata.isSubscribedToTopic, computeSubscribedTopics). An assignment that cannot be read
gives no partitions."""

from __future__ import annotations

import struct


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """The topics of a member's subscription; None if it is not a readable v0 prefix."""
    try:
        topics, position = _topics(subscription, with_partitions=False)
        (length,) = struct.unpack_from(">i", subscription, position)  # user data (nullable bytes)
        if length > len(subscription) - position - 4:
            return None
        return {topic for topic, _ in topics}
    except (struct.error, UnicodeDecodeError, ValueError):
        return None


def assigned_partitions(assignment: bytes) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of a member's assignment."""
    try:
        return [(topic, p) for topic, partitions in _topics(assignment, with_partitions=True)[0] for p in partitions]
    except (struct.error, UnicodeDecodeError, ValueError):
        return []


def _topics(data: bytes, *, with_partitions: bool) -> tuple[list[tuple[str, tuple[int, ...]]], int]:
    """The topics and where the bytes after them start. Raises struct.error, ValueError or
    UnicodeDecodeError on bytes that are not a topic array (Kafka: a SchemaException)."""
    (count,), position, out = struct.unpack_from(">i", data, 2), 6, []
    if count < 0:
        raise ValueError("null topics")
    for _ in range(count):
        (length,) = struct.unpack_from(">h", data, position)
        if length < 0 or position + 2 + length > len(data):
            raise ValueError("null or truncated topic name")
        topic = data[position + 2:position + 2 + length].decode()
        position += 2 + length
        partitions: tuple[int, ...] = ()
        if with_partitions:
            (n,) = struct.unpack_from(">i", data, position)
            partitions = struct.unpack_from(f">{n}i", data, position + 4)
            position += 4 + 4 * n
        out.append((topic, partitions))
    return out, position
