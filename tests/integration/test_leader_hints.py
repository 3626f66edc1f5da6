"""KIP-951: a NOT_LEADER_OR_FOLLOWER answer to Produce (v10+) and Fetch (v16+) names the leader
this broker knows (CurrentLeader) and where to reach it (NodeEndpoints), and librdkafka follows
it."""

import datetime

from confluent_kafka import ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.alter_partition_reassignments.v0.request import (AlterPartitionReassignmentsRequest,
                                                                 ReassignablePartition, ReassignableTopic)
from kio.schema.fetch.v16.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.produce.v10.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import i32Timedelta
from raw_protocol import NONE, RawClient, metadata
from waiting import wait_until

NOT_LEADER_OR_FOLLOWER = 6
PRODUCE, FETCH, ALTER_PARTITION_REASSIGNMENTS = 0, 1, 45


NOT_CONTROLLER = 41


def leader_seen_by(broker, topic: str) -> tuple[int, int]:
    with RawClient(broker.port) as client:
        [partition] = metadata(client, [topic], auto_create=False).topics[0].partitions
        return partition.leader_id, partition.leader_epoch


def test_produce_and_fetch_to_a_replica_that_does_not_lead_name_the_leader(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("hinted", num_partitions=1, replica_assignment=[[0, 1]])])["hinted"].result(30)
    leader = cluster.brokers[0]
    for broker in cluster.brokers:
        wait_until(lambda b=broker: leader_seen_by(b, "hinted")[0] == 0, f"broker {broker.broker_id} sees leader 0")
    epoch = leader_seen_by(cluster.brokers[1], "hinted")[1]
    for broker in cluster.brokers[1:]:  # the follower, and a broker that hosts no replica
        with RawClient(broker.port) as client:
            produced = client.call(PRODUCE, 10, ProduceRequest(
                transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
                topic_data=(TopicProduceData(name="hinted", partition_data=(
                    PartitionProduceData(index=0, records=None),)),)))
            [partition] = produced.responses[0].partition_responses
            assert partition.error_code == NOT_LEADER_OR_FOLLOWER
            assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (0, epoch)
            assert [(n.node_id, n.host, n.port) for n in produced.node_endpoints] == [(0, "127.0.0.1", leader.port)]
            fetched = client.call(FETCH, 16, FetchRequest(
                max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                topics=(FetchTopic(topic_id=leader_topic_id(cluster), partitions=(
                    FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),)),),
                forgotten_topics_data=(), rack_id=""))
            assert fetched.error_code == NONE
            [partition] = fetched.responses[0].partitions
            assert partition.error_code == NOT_LEADER_OR_FOLLOWER
            assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (0, epoch)
            assert [(n.node_id, n.port) for n in fetched.node_endpoints] == [(0, leader.port)]


def leader_topic_id(cluster):
    with RawClient(cluster.brokers[0].port) as client:
        return metadata(client, ["hinted"], auto_create=False).topics[0].topic_id


def test_librdkafka_follows_the_leader_a_produce_answer_names(cluster):
    """The leadership moves (a reassignment reordering the replicas, then a preferred election);
    the producer, whose metadata still says broker 0, is told the new leader by broker 0's
    answer and delivers there without asking for Metadata again."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("moving", num_partitions=1, replica_assignment=[[0, 1]])])["moving"].result(30)
    lines = []

    class Log:
        def log(self, level, message, *args):
            lines.append(message % args if args else message)

    producer = Producer({"bootstrap.servers": cluster.brokers[0].bootstrap, "acks": "all", "debug": "protocol,metadata",
                         "topic.metadata.refresh.interval.ms": 600_000, "linger.ms": 0}, logger=Log())
    delivered = []
    producer.produce("moving", b"before", partition=0, on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(30)
    assert delivered == [None]

    def reassigned() -> bool:
        """Asked of the controller; NOT_CONTROLLER (the metadata named one that no longer is) asks again, as
        Kafka's admin client does."""
        controller = admin.list_topics(timeout=30).controller_id
        with RawClient(cluster.brokers[controller].port) as client:
            response = client.call(ALTER_PARTITION_REASSIGNMENTS, 0, AlterPartitionReassignmentsRequest(
                timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)), topics=(ReassignableTopic(
                    name="moving", partitions=(ReassignablePartition(partition_index=0, replicas=(1, 0)),)),)))
        assert response.error_code in (NONE, NOT_CONTROLLER), response
        return response.error_code == NONE
    wait_until(reassigned, "the reassignment taken by the controller")
    wait_until(lambda: admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("moving", 0)]).result(30)
               and leader_seen_by(cluster.brokers[0], "moving")[0] == 1, "broker 1 leads, as broker 0 knows")
    lines.clear()
    producer.produce("moving", b"after", partition=0, on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(30)
    assert delivered == [None, None]
    sent = [line for line in lines if "Sent " in line]
    assert any("ProduceRequest" in line and "127.0.0.1:%d" % cluster.brokers[1].port in line for line in sent), lines
    assert not any("MetadataRequest" in line for line in sent), sent
