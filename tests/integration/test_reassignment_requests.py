"""AlterPartitionReassignments on a running broker, spoken by hand for what clients do not send."""

import datetime

import pytest
from kio.schema.alter_partition_reassignments.v0.request import (AlterPartitionReassignmentsRequest,
                                                                 ReassignablePartition, ReassignableTopic)
from kio.static.primitive import i32Timedelta
from raw_protocol import NONE, RawClient, assert_healthy, create_topic

ALTER_PARTITION_REASSIGNMENTS = 45
INVALID_REPLICA_ASSIGNMENT = 39


@pytest.mark.parametrize("targets, error", [([(7,), (0,)], NONE), ([(0,), (7,)], INVALID_REPLICA_ASSIGNMENT)])
def test_a_partition_named_twice_takes_the_last_target_and_is_answered_once(broker, targets, error):
    """Kafka's handleAlterPartitionReassignmentsRequest makes the request a map by topic-partition
    (the last entry wins) and answers that map: one answer per partition, the last target's."""
    with RawClient(broker.port) as client:
        create_topic(client, "t")
        response = client.call(ALTER_PARTITION_REASSIGNMENTS, 0, AlterPartitionReassignmentsRequest(
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            topics=tuple(ReassignableTopic(name="t", partitions=(ReassignablePartition(partition_index=0, replicas=r),))
                         for r in targets)))
        assert response.error_code == NONE
        answers = [(t.name, p.partition_index, p.error_code) for t in response.responses for p in t.partitions]
        assert answers == [("t", 0, error)]  # broker 7 does not exist
    assert_healthy(broker)
