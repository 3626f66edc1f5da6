"""Partition reassignment (KIP-455) on a real cluster under acks=all load, driven by two
independent admin clients (kafka-python; kafkajs): the new replica catches up before the old one
leaves, leadership moves to the target, no acknowledged record is lost, and the replica that left
deletes its copy. (confluent-kafka's admin client has no reassignment API; it produces and reads.)"""

import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPythonTopicPartition

from cluster_tools import SteadyProducer, admin, partition_metadata, read_all, wait_until

JS_CLIENTS = Path(__file__).parent.parent / "js"


def reassign_with_kafka_python(bootstrap: str, topic: str, replicas: list[int]) -> None:
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        tp = KafkaPythonTopicPartition(topic, 0)
        assert client.alter_partition_reassignments({tp: replicas}) == {tp: None}
        wait_until(lambda: client.list_partition_reassignments() == {}, "the reassignment to finish")
    finally:
        client.close()


def reassign_with_kafkajs(bootstrap: str, topic: str, replicas: list[int]) -> None:
    subprocess.run(["node", str(JS_CLIENTS / "reassign.js"), bootstrap, topic, "0",
                    ",".join(map(str, replicas))], check=True, timeout=90)


@pytest.mark.parametrize("reassign", [reassign_with_kafka_python, reassign_with_kafkajs])
def test_a_partition_moves_from_0_1_to_1_2_under_load_losing_nothing(cluster, reassign):
    client = admin(cluster.bootstrap)
    client.create_topics([NewTopic("moving", 1, replica_assignment=[[0, 1]])])["moving"].result(30)
    wait_until(lambda: partition_metadata(cluster.bootstrap, "moving")[0][0] == 0, "broker 0 to lead")
    producer = SteadyProducer(cluster.bootstrap, "moving", 1).start()
    producer.wait_acked(500)

    reassign(cluster.bootstrap, "moving", [1, 2])
    assert partition_metadata(cluster.bootstrap, "moving")[0] == (1, [1, 2], [1, 2])
    acked_before = len(producer.acked)
    producer.wait_acked(acked_before + 500)  # the new leader takes writes
    producer.stop()

    assert not producer.errors
    stored = read_all(cluster.bootstrap, "moving", 1)[0]
    assert producer.acked <= set(stored) and len(stored) == len(set(stored))
    gone = cluster.brokers[0].data_dir / "moving-0"
    wait_until(lambda: not gone.exists(), "broker 0 to delete the replica it no longer holds")
