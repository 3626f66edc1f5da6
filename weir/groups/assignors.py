"""The server-side assignors of the consumer group protocol (KIP-848), pure: `uniform` and
`range`, the names `group.consumer.assignors` lists (Kafka's UniformAssignor, RangeAssignor).

An assignor sees each member's subscribed topics (by topic id), each topic's partition count and
the group's previous target assignment, and returns the new target: every partition of a
subscribed topic goes to exactly one member subscribed to it, none to a member that is not.

- uniform: as balanced as the subscriptions allow (no two subscribers of a topic differ by more
  than one partition when they could), and sticky: a partition stays with its previous owner
  unless balance needs it elsewhere, so a rebalance moves few partitions.
- range: per topic, its subscribers in member id order take contiguous ranges, the first
  `partitions % subscribers` one partition more (Kafka's range, co-partitioning topics of the
  same size).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True)
class AssignmentSpec:
    subscriptions: dict[str, frozenset[uuid.UUID]]  # member id → subscribed topic ids
    partitions: dict[uuid.UUID, int]  # topic id → partition count (only topics that exist)
    previous: dict[str, Assignment]  # the previous target assignment, for stickiness


def _as_assignment(owned: dict[str, set[tuple[uuid.UUID, int]]]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {}
    for member, pairs in owned.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic, partition in pairs:
            by_topic.setdefault(topic, set()).add(partition)
        out[member] = {topic: frozenset(ps) for topic, ps in by_topic.items()}
    return out


def uniform(spec: AssignmentSpec) -> dict[str, Assignment]:
    members = sorted(spec.subscriptions)
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
    subscribers = {topic: [m for m in members if topic in spec.subscriptions[m]] for topic in spec.partitions}
    # keep what the previous target gave, where still valid
    placed: set[tuple[uuid.UUID, int]] = set()
    for member in members:
        for topic, partitions in spec.previous.get(member, {}).items():
            if topic in spec.subscriptions[member]:
                for p in partitions:
                    if p < spec.partitions.get(topic, 0):
                        owned[member].add((topic, p))
                        placed.add((topic, p))
    # the rest to the least loaded subscriber, topics with the fewest subscribers first
    for topic in sorted(spec.partitions, key=lambda t: (len(subscribers[t]), str(t))):
        if not subscribers[topic]:
            continue
        for p in range(spec.partitions[topic]):
            if (topic, p) not in placed:
                target = min(subscribers[topic], key=lambda m: (len(owned[m]), m))
                owned[target].add((topic, p))
    # balance: move a partition from a member to a subscriber of its topic holding two fewer.
    # Each move lowers the sum of squared loads, so this ends; the bound is a backstop.
    for _ in range(sum(spec.partitions.values()) * max(len(members), 1) + 1):
        move = _unbalanced_move(owned, subscribers)
        if move is None:
            break
        source, destination, pair = move
        owned[source].remove(pair)
        owned[destination].add(pair)
    return _as_assignment(owned)


def _unbalanced_move(owned, subscribers):
    for source in sorted(owned, key=lambda m: (-len(owned[m]), m)):
        for pair in sorted(owned[source], key=lambda tp: (str(tp[0]), tp[1])):
            for destination in subscribers[pair[0]]:
                if len(owned[destination]) + 2 <= len(owned[source]):
                    return source, destination, pair
    return None


def range_(spec: AssignmentSpec) -> dict[str, Assignment]:
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in spec.subscriptions}
    for topic, count in spec.partitions.items():
        subscribers = sorted(m for m, topics in spec.subscriptions.items() if topic in topics)
        if not subscribers:
            continue
        quota, extra = divmod(count, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            size = quota + (1 if i < extra else 0)
            owned[member].update((topic, p) for p in range(start, start + size))
            start += size
    return _as_assignment(owned)


ASSIGNORS = {"uniform": uniform, "range": range_}
