"""Rule 1: replica assignment at CreateTopics and CreatePartitions (Kafka's assignReplicasToBrokers)."""

import random
from collections import Counter

import pytest
from kio.schema.errors import ErrorCode

from weir.controller import (AssignmentError, RackAwareMode, assign_added_partitions, assign_replicas,
                             rack_alternated_brokers, validate_manual_assignment)

from .cluster import brokers


def test_assignment_spreads_leaders_and_followers_like_kafka():
    # Kafka's documented example (AdminUtils): 5 brokers, 10 partitions, 3 replicas, start index 0.
    got = assign_replicas(brokers(0, 1, 2, 3, 4).values(), 10, 3, None, fixed_start_index=0)
    assert got == {0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 4), 3: (3, 4, 0), 4: (4, 0, 1),
                   5: (0, 2, 3), 6: (1, 3, 4), 7: (2, 4, 0), 8: (3, 0, 1), 9: (4, 1, 2)}


def test_assignment_draws_start_index_then_replica_shift_from_the_random_source():
    ids = [10, 11, 12, 13]
    rng = random.Random(7)
    expected_rng = random.Random(7)
    start, shift = expected_rng.randrange(4), expected_rng.randrange(4)
    got = assign_replicas(reversed(list(brokers(*ids).values())), 8, 3, rng)
    for p, replicas in got.items():
        shift_p = shift + p // 4
        first = (start + p) % 4
        assert replicas == (ids[first], *(ids[(first + 1 + (shift_p + j) % 3) % 4] for j in range(2)))


def test_assignment_balances_leaders_and_replicas():
    got = assign_replicas(brokers(*range(6)).values(), 60, 3, random.Random(1))
    leaders = Counter(r[0] for r in got.values())
    replicas = Counter(b for r in got.values() for b in r)
    assert set(leaders.values()) == {10}
    assert set(replicas.values()) == {30}
    assert all(len(set(r)) == 3 for r in got.values())


def test_same_seed_gives_same_assignment():
    bs = brokers(*range(5)).values()
    assert assign_replicas(bs, 7, 2, random.Random(3)) == assign_replicas(bs, 7, 2, random.Random(3))


def test_rack_alternated_broker_list_like_kafka():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(brokers(*racks, racks=racks).values()) == [0, 3, 1, 5, 4, 2]


def test_rack_aware_assignment_like_kafka():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    got = assign_replicas(brokers(*racks, racks=racks).values(), 7, 3, None, fixed_start_index=0)
    assert got == {0: (0, 3, 1), 1: (3, 1, 5), 2: (1, 5, 4), 3: (5, 4, 2), 4: (4, 2, 0), 5: (2, 0, 3),
                   6: (0, 4, 2)}


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_assignment_puts_replicas_on_distinct_racks(seed):
    racks = {1: "a", 2: "a", 3: "a", 4: "b", 5: "b", 6: "c", 7: "c"}
    got = assign_replicas(brokers(*racks, racks=racks).values(), 21, 3, random.Random(seed))
    for replicas in got.values():
        assert len({racks[b] for b in replicas}) == 3, replicas
    # More replicas than racks: every rack holds one before any holds two, brokers never repeat.
    got = assign_replicas(brokers(*racks, racks=racks).values(), 14, 5, random.Random(seed))
    for replicas in got.values():
        assert len(set(replicas)) == 5
        assert len({racks[b] for b in replicas}) == 3


def test_mixed_rack_information_is_refused_unless_racks_are_ignored():
    bs = brokers(1, 2, 3, racks={1: "a", 2: "b"}).values()
    with pytest.raises(AssignmentError) as refused:
        assign_replicas(bs, 3, 2, random.Random(0))
    assert refused.value.code is ErrorCode.invalid_replica_assignment
    assert "rack" in refused.value.message
    for mode in (RackAwareMode.SAFE, RackAwareMode.DISABLED):
        assert assign_replicas(bs, 3, 2, None, fixed_start_index=0, rack_aware_mode=mode) == \
            assign_replicas(brokers(1, 2, 3).values(), 3, 2, None, fixed_start_index=0)


@pytest.mark.parametrize(("partitions", "factor", "code"), [
    (0, 1, ErrorCode.invalid_partitions),
    (-1, 1, ErrorCode.invalid_partitions),
    (3, 0, ErrorCode.invalid_replication_factor),
    (3, 4, ErrorCode.invalid_replication_factor),
])
def test_assignment_refuses_bad_counts(partitions, factor, code):
    with pytest.raises(AssignmentError) as refused:
        assign_replicas(brokers(1, 2, 3).values(), partitions, factor, random.Random(0))
    assert refused.value.code is code


def test_added_partitions_continue_the_pattern():
    bs = brokers(0, 1, 2, 3, 4).values()
    whole = assign_replicas(bs, 10, 3, None, fixed_start_index=0)
    existing = {p: whole[p] for p in range(4)}
    assert assign_added_partitions(bs, existing, 10) == {p: whole[p] for p in range(4, 10)}


def test_added_partitions_start_at_partition_zeros_first_broker():
    bs = brokers(1, 3, 5, 7).values()
    existing = {0: (3, 5), 1: (5, 7)}
    got = assign_added_partitions(bs, existing, 4)
    # start index = position of the first broker with id >= 3, i.e. 1; shift starts there too.
    assert got == assign_replicas(bs, 2, 2, None, start_partition=2, fixed_start_index=1)
    assert set(got) == {2, 3}


def test_added_partitions_must_increase_the_count():
    existing = {0: (1, 2), 1: (2, 1)}
    for total in (1, 2):
        with pytest.raises(AssignmentError) as refused:
            assign_added_partitions(brokers(1, 2).values(), existing, total)
        assert refused.value.code is ErrorCode.invalid_partitions


def test_manual_assignment_for_added_partitions_must_match_count_and_replication_factor():
    existing = {0: (1, 2)}
    bs = brokers(1, 2, 3).values()
    assert assign_added_partitions(bs, existing, 3, {1: [3, 1], 2: [2, 3]}) == {1: (3, 1), 2: (2, 3)}
    for manual in ({1: [3, 1]}, {1: [3], 2: [1]}, {2: [3, 1], 3: [1, 2]}):
        with pytest.raises(AssignmentError) as refused:
            assign_added_partitions(bs, existing, 3, manual)
        assert refused.value.code is ErrorCode.invalid_replica_assignment


def test_manual_assignment_is_validated():
    registered = [1, 2, 3]
    assert validate_manual_assignment({0: [2, 1], 1: [3, 2]}, registered) == {0: (2, 1), 1: (3, 2)}
    bad = [
        {},  # nothing
        {0: [1, 2], 2: [2, 3]},  # not consecutive
        {1: [1, 2]},  # not from 0
        {0: []},  # empty replica list
        {0: [1, 1]},  # a broker twice
        {0: [1, 2], 1: [3]},  # different replication factors
        {0: [1, 4]},  # unknown broker
    ]
    for assignment in bad:
        with pytest.raises(AssignmentError) as refused:
            validate_manual_assignment(assignment, registered)
        assert refused.value.code is ErrorCode.invalid_replica_assignment, assignment
