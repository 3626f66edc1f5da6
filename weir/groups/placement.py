"""Which `__consumer_offsets` partition holds a group: Kafka's rule, bit for bit.

Kafka places group `g` in partition `Utils.abs(g.hashCode()) % partitions`, with Java's
`String.hashCode` (over UTF-16 code units, 32-bit wrap-around) and Kafka's `Utils.abs`
(Integer.MIN_VALUE maps to 0). Matching it means a group lands where a Kafka cluster with the
same partition count would put it, which tools that compute coordinators themselves rely on.
"""

OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hash(text: str) -> int:
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(group_id: str, partitions: int) -> int:
    assert partitions > 0
    return kafka_abs(java_string_hash(group_id)) % partitions
