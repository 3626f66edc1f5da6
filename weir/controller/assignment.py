"""Where a topic's replicas go: replica assignment at CreateTopics and CreatePartitions.

Rules owned here (Kafka's AdminUtils.assignReplicasToBrokers, the ZooKeeper-mode default, and
AdminZkClient's checks of a manual assignment):

- SPREAD. Brokers are sorted by id. A random start index picks partition 0's first replica, and
  partition p's first (preferred-leader) replica is brokers[(start + p) % n], so preferred leaders
  go round-robin. Followers sit at a "replica shift" from the first replica:
  follower j of a partition is brokers[(first + 1 + (shift + j) % (n - 1)) % n]. The shift starts
  at a second random number and goes up by one every n partitions (when p > 0 and p % n == 0), so
  the replicas of a broker's partitions do not all land on the same neighbours.
- RACKS. If every broker has a rack, the broker list is first rearranged to alternate racks
  (racks sorted, each rack's brokers sorted, one broker of each rack in turn), the same formula
  walks that list with the shift multiplied by the number of racks, and a candidate follower is
  skipped while its rack already holds a replica and some rack holds none, or while it already
  holds a replica and some broker holds none. Some brokers with a rack and some without is an
  error (RackAwareMode.ENFORCED, Kafka's default); SAFE falls back to rack-unaware assignment and
  DISABLED ignores racks altogether.
- LIMITS. partitions <= 0 → INVALID_PARTITIONS; replication factor <= 0 or > brokers →
  INVALID_REPLICATION_FACTOR.
- ADDED PARTITIONS (CreatePartitions) continue the pattern: the start index is the position of
  the first broker whose id >= partition 0's first replica, the shift starts at that same index,
  partition numbering continues after the existing partitions, and the replication factor is
  partition 0's.
- MANUAL ASSIGNMENT. Partitions numbered consecutively (from 0, or after the existing ones), no
  empty replica list, no broker twice in one partition, the same replication factor everywhere
  (and equal to the existing one when adding), every broker registered →
  else INVALID_REPLICA_ASSIGNMENT.

Theory of operation: pure functions from the registered brokers (BrokerInfo, with racks) and the
request to a `{partition: replicas}` map, preferred leader first. Randomness comes in as a
`random.Random`, so one seed gives one assignment. Errors are raised as `AssignmentError`, which
carries the Kafka error code and message to answer the request with.

One departure: Kafka's ZooKeeper mode answers mixed rack information with an AdminOperationException
that reaches the client as UNKNOWN_SERVER_ERROR; we answer INVALID_REPLICA_ASSIGNMENT with Kafka's
message, a code a client can act on.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Collection, Iterable, Mapping, Sequence

from kio.schema.errors import ErrorCode

from weir.zk.model import BrokerInfo


class RackAwareMode(enum.Enum):
    ENFORCED = "enforced"  # racks on all brokers or none; a mix is an error (Kafka's default)
    SAFE = "safe"  # use racks only if every broker has one
    DISABLED = "disabled"  # ignore racks


class AssignmentError(Exception):
    """A CreateTopics / CreatePartitions request the assignment rules refuse."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


Assignment = dict[int, tuple[int, ...]]


def assign_replicas(brokers: Iterable[BrokerInfo], partitions: int, replication_factor: int,
                    rng: random.Random | None, *, start_partition: int = 0, fixed_start_index: int = -1,
                    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED) -> Assignment:
    """Kafka's assignReplicasToBrokers. `fixed_start_index` >= 0 replaces both random numbers
    (CreatePartitions uses it); otherwise `rng` must be given. Returns partitions
    start_partition .. start_partition + partitions - 1."""
    if partitions <= 0:
        raise AssignmentError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError(ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0.")
    ordered = sorted(brokers, key=lambda b: b.broker_id)
    assert len({b.broker_id for b in ordered}) == len(ordered), "broker ids are unique"
    if replication_factor > len(ordered):
        raise AssignmentError(ErrorCode.invalid_replication_factor,
                              f"Replication factor: {replication_factor} larger than available brokers: "
                              f"{len(ordered)}.")
    assert fixed_start_index >= 0 or rng is not None, "a random source is needed without a fixed start index"

    with_rack = [b for b in ordered if b.rack is not None]
    use_racks = bool(with_rack) and rack_aware_mode is not RackAwareMode.DISABLED
    if use_racks and len(with_rack) < len(ordered):
        if rack_aware_mode is RackAwareMode.ENFORCED:
            raise AssignmentError(ErrorCode.invalid_replica_assignment,
                                  "Not all brokers have rack information for replica rack aware assignment.")
        use_racks = False

    if use_racks:
        result = _assign_rack_aware(ordered, partitions, replication_factor, rng, fixed_start_index,
                                    start_partition)
    else:
        result = _assign_rack_unaware([b.broker_id for b in ordered], partitions, replication_factor, rng,
                                      fixed_start_index, start_partition)
    for replicas in result.values():
        assert len(replicas) == replication_factor and len(set(replicas)) == replication_factor, replicas
    return result


def _start_and_shift(n: int, rng: random.Random | None, fixed_start_index: int) -> tuple[int, int]:
    """Kafka draws the start index first, then the initial replica shift, each in [0, n)."""
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    assert rng is not None
    start = rng.randrange(n)
    shift = rng.randrange(n)
    return start, shift


def _walk(n: int, start: int, shift: int, start_partition: int, partitions: int):
    """Kafka's walk over partitions: (partition, index of its first replica, replica shift);
    the shift goes up by one every n partitions."""
    for p in range(max(0, start_partition), max(0, start_partition) + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        yield p, (p + start) % n, shift


def _follower_index(first_index: int, shift: int, j: int, n: int) -> int:
    """Kafka's replicaIndex: never the first replica's own slot (the shift is 1 .. n-1)."""
    return (first_index + 1 + (shift + j) % (n - 1)) % n


def _assign_rack_unaware(broker_ids: list[int], partitions: int, replication_factor: int,
                         rng: random.Random | None, fixed_start_index: int, start_partition: int) -> Assignment:
    n = len(broker_ids)
    result: Assignment = {}
    for p, first, shift in _walk(n, *_start_and_shift(n, rng, fixed_start_index), start_partition, partitions):
        followers = [broker_ids[_follower_index(first, shift, j, n)] for j in range(replication_factor - 1)]
        result[p] = (broker_ids[first], *followers)
    return result


def rack_alternated_brokers(brokers: Iterable[BrokerInfo]) -> list[int]:
    """Kafka's getRackAlternatedBrokerList: racks in sorted order, each rack's brokers in id order,
    taking one broker from each rack in turn until all are taken."""
    by_rack: dict[str, list[int]] = {}
    for b in brokers:
        assert b.rack is not None
        by_rack.setdefault(b.rack, []).append(b.broker_id)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    total = sum(len(q) for q in queues)
    result: list[int] = []
    position = [0] * len(queues)
    rack = 0
    while len(result) < total:
        if position[rack] < len(queues[rack]):
            result.append(queues[rack][position[rack]])
            position[rack] += 1
        rack = (rack + 1) % len(queues)
    return result


def _assign_rack_aware(brokers: list[BrokerInfo], partitions: int, replication_factor: int,
                       rng: random.Random | None, fixed_start_index: int, start_partition: int) -> Assignment:
    rack_of = {b.broker_id: b.rack for b in brokers}
    rack_count = len(set(rack_of.values()))
    arranged = rack_alternated_brokers(brokers)
    n = len(arranged)
    result: Assignment = {}
    for p, first, shift in _walk(n, *_start_and_shift(n, rng, fixed_start_index), start_partition, partitions):
        leader = arranged[first]
        replicas = [leader]
        racks_used = {rack_of[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                # Bounded: k walks every other slot of the list within n - 1 steps, and an unused
                # broker always exists (replication factor <= n).
                assert k < replication_factor * n, "rack-aware placement found no broker"
                candidate = arranged[_follower_index(first, shift * rack_count, k, n)]
                k += 1
                rack = rack_of[candidate]
                if ((rack not in racks_used or len(racks_used) == rack_count)
                        and (candidate not in brokers_used or len(brokers_used) == n)):
                    replicas.append(candidate)
                    racks_used.add(rack)
                    brokers_used.add(candidate)
                    break
        result[p] = tuple(replicas)
    return result


def assign_added_partitions(brokers: Iterable[BrokerInfo], existing: Mapping[int, Sequence[int]],
                            total_partitions: int, manual: Mapping[int, Sequence[int]] | None = None, *,
                            rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED) -> Assignment:
    """CreatePartitions: replicas of partitions len(existing) .. total_partitions - 1. With a manual
    assignment (`manual`, keyed by the new partition numbers), it is checked instead."""
    current = len(existing)
    assert current > 0 and set(existing) == set(range(current)), "an existing topic has partitions 0 .. n-1"
    if total_partitions < current:
        raise AssignmentError(ErrorCode.invalid_partitions,
                              f"Topic currently has {current} partitions, which is higher than the requested "
                              f"{total_partitions}.")
    if total_partitions == current:
        raise AssignmentError(ErrorCode.invalid_partitions, f"Topic already has {current} partitions.")
    brokers = sorted(brokers, key=lambda b: b.broker_id)
    replication_factor = len(existing[0])
    if manual is not None:
        if len(manual) != total_partitions - current:
            raise AssignmentError(ErrorCode.invalid_replica_assignment,
                                  f"Increasing the number of partitions by {total_partitions - current} but "
                                  f"{len(manual)} assignments provided.")
        return validate_manual_assignment(manual, [b.broker_id for b in brokers], first_partition=current,
                                          replication_factor=replication_factor)
    first_of_partition_0 = existing[0][0]
    start_index = next((i for i, b in enumerate(brokers) if b.broker_id >= first_of_partition_0), 0)
    return assign_replicas(brokers, total_partitions - current, replication_factor, None,
                           start_partition=current, fixed_start_index=start_index, rack_aware_mode=rack_aware_mode)


def validate_manual_assignment(assignment: Mapping[int, Sequence[int]], registered_brokers: Collection[int], *,
                               first_partition: int = 0, replication_factor: int | None = None) -> Assignment:
    """A CreateTopics / CreatePartitions assignment given by the client. Returns it as tuples."""
    if not assignment:
        raise AssignmentError(ErrorCode.invalid_replica_assignment, "The replica assignment is empty.")
    expected = set(range(first_partition, first_partition + len(assignment)))
    if set(assignment) != expected:
        raise AssignmentError(ErrorCode.invalid_replica_assignment,
                              f"Partitions should be a consecutive integer sequence starting at {first_partition}.")
    result: Assignment = {}
    for p in sorted(assignment):
        replicas = tuple(assignment[p])
        if not replicas:
            raise AssignmentError(ErrorCode.invalid_replica_assignment,
                                  f"The manual partition assignment includes an empty replica list (partition {p}).")
        if len(set(replicas)) != len(replicas):
            raise AssignmentError(ErrorCode.invalid_replica_assignment,
                                  f"Duplicate replica assignment found for partition {p}: {list(replicas)}.")
        result[p] = replicas
    sizes = {len(r) for r in result.values()}
    if replication_factor is not None and sizes != {replication_factor}:
        raise AssignmentError(ErrorCode.invalid_replica_assignment,
                              f"Inconsistent replication factor between partitions: the topic has "
                              f"{replication_factor}, the assignment has {sorted(sizes)}.")
    if len(sizes) != 1:
        raise AssignmentError(ErrorCode.invalid_replica_assignment,
                              "All partitions should have the same number of replicas.")
    unknown = sorted({b for r in result.values() for b in r} - set(registered_brokers))
    if unknown:
        raise AssignmentError(ErrorCode.invalid_replica_assignment,
                              f"Unknown broker(s) in replica assignment: {unknown}.")
    return result
