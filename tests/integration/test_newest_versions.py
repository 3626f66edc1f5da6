"""The newest versions Weir serves beyond its first ones: Kafka 3.9's maxima (ApiVersions v4,
FindCoordinator v6, ListOffsets v9) and Kafka 4.0's where Weir honours them (ListOffsets v10,
DescribeCluster v2), answered as Kafka answers them without tiered storage, share groups or fenced
brokers."""

import datetime

from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.describe_cluster.v2.request import DescribeClusterRequest
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.list_offsets.v10.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.static.primitive import i32Timedelta
from raw_protocol import NONE, RawClient, assert_healthy, create_topic

from weir.protocol.versions import SUPPORTED_VERSIONS

API_VERSIONS, FIND_COORDINATOR, LIST_OFFSETS, DESCRIBE_CLUSTER = 18, 10, 2, 60
COORDINATOR_NOT_AVAILABLE = 15
EARLIEST, LATEST, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -4, -5
KEY_TYPE_SHARE = 2


def list_offset(client: RawClient, timestamp: int) -> tuple[int, int]:
    response = client.call(LIST_OFFSETS, 10, ListOffsetsRequest(
        replica_id=-1, isolation_level=0, timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        topics=(ListOffsetsTopic(name="newest", partitions=(
            ListOffsetsPartition(partition_index=0, timestamp=timestamp),)),)))
    [partition] = response.topics[0].partitions
    return partition.error_code, partition.offset


def test_newest_versions_are_answered_as_kafka_answers_them(broker):
    from confluent_kafka import Producer
    with RawClient(broker.port) as client:
        versions = client.call(API_VERSIONS, 4, ApiVersionsRequest(client_software_name="weir-test",
                                                                   client_software_version="1"))
        assert versions.error_code == NONE
        assert {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys} == {
            int(k): span for k, span in SUPPORTED_VERSIONS.items()}

        coordinators = client.call(FIND_COORDINATOR, 6, FindCoordinatorRequest(
            key_type=KEY_TYPE_SHARE, coordinator_keys=("a-share-group",)))
        [share] = coordinators.coordinators
        assert (share.key, share.error_code, share.node_id) == ("a-share-group", COORDINATOR_NOT_AVAILABLE, -1)

        create_topic(client, "newest")
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(3):
            producer.produce("newest", b"v%d" % i, partition=0)
        producer.flush(30)
        answers = [list_offset(client, t) for t in (EARLIEST, LATEST, EARLIEST_LOCAL, LATEST_TIERED)]
        assert answers == [(NONE, 0), (NONE, 3), (NONE, 0), (NONE, -1)]  # LATEST_TIERED: nothing is tiered

        cluster = client.call(DESCRIBE_CLUSTER, 2, DescribeClusterRequest(
            include_cluster_authorized_operations=False, include_fenced_brokers=True))
        assert cluster.error_code == NONE
        assert [(b.broker_id, b.port, b.is_fenced) for b in cluster.brokers] == [(0, broker.port, False)]
    assert_healthy(broker)
