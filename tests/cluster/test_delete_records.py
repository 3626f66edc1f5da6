"""DeleteRecords with real brokers and two admin clients: the low watermark moves on every replica,
consumers start there, and a follower that was down while the records went catches up from the
leader's log start (Kafka's truncateFullyAndStartAt)."""

import pytest
from cluster_tools import admin, create_topic, partition_metadata, wait_until
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPythonTopicPartition
from waiting import watermarks

OFFSET_OUT_OF_RANGE = 1
POLICY_VIOLATION = 44


def produce(bootstrap: str, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failed = []
    for v in values:
        producer.produce(topic, b"%d" % v, partition=0, on_delivery=lambda err, msg: err and failed.append(err))
    assert producer.flush(60) == 0 and not failed, failed


def delete_records(bootstrap: str, topic: str, offset: int):
    client = admin(bootstrap)  # must outlive the future
    (future,) = client.delete_records([TopicPartition(topic, 0, offset)], operation_timeout=30).values()
    return future.result(60)


def first_value_from_the_beginning(bootstrap: str, topic: str) -> bytes:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "from-the-start", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        while True:
            msg = consumer.poll(30)
            assert msg is not None, "nothing to read"
            if msg.error() is None:
                return msg.value()
    finally:
        consumer.close()


def test_confluent_kafka_deletes_records_on_every_replica(cluster):
    create_topic(cluster.bootstrap, "trimmed", 1, 3, **{"min.insync.replicas": "2"})
    produce(cluster.bootstrap, "trimmed", range(100))

    assert delete_records(cluster.bootstrap, "trimmed", 40).low_watermark == 40
    assert watermarks(cluster.bootstrap, "trimmed") == (40, 100)
    assert first_value_from_the_beginning(cluster.bootstrap, "trimmed") == b"40"

    with pytest.raises(KafkaException) as refused:  # beyond the high watermark
        delete_records(cluster.bootstrap, "trimmed", 101)
    assert refused.value.args[0].code() == OFFSET_OUT_OF_RANGE

    leader = partition_metadata(cluster.bootstrap, "trimmed")[0][0]
    cluster.brokers[leader].kill()
    wait_until(lambda: partition_metadata(cluster.bootstrap, "trimmed")[0][0] not in (-1, leader), "a new leader")
    assert watermarks(cluster.bootstrap, "trimmed") == (40, 100), "the new leader's log starts at 40 too"


def test_kafka_python_deletes_up_to_the_high_watermark(cluster):
    create_topic(cluster.bootstrap, "emptied", 1, 3)
    produce(cluster.bootstrap, "emptied", range(30))
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        result = client.delete_records({KafkaPythonTopicPartition("emptied", 0): -1}, timeout_ms=30000)
    finally:
        client.close()
    (answer,) = result.values()
    assert answer["low_watermark"] == 30 and answer["error_code"] == 0, answer
    assert watermarks(cluster.bootstrap, "emptied") == (30, 30)
    produce(cluster.bootstrap, "emptied", range(30, 35))
    assert first_value_from_the_beginning(cluster.bootstrap, "emptied") == b"30"


def test_a_follower_down_while_its_records_were_deleted_starts_again_from_the_leaders_log_start(cluster):
    create_topic(cluster.bootstrap, "moved-on", 1, 3, **{"min.insync.replicas": "2"})
    produce(cluster.bootstrap, "moved-on", range(100))
    leader, replicas, _ = partition_metadata(cluster.bootstrap, "moved-on")[0]
    behind, other = [r for r in replicas if r != leader]
    cluster.brokers[behind].stop()
    wait_until(lambda: behind not in partition_metadata(cluster.bootstrap, "moved-on")[0][2], "the ISR without it")
    produce(cluster.bootstrap, "moved-on", range(100, 200))
    assert delete_records(cluster.bootstrap, "moved-on", 150).low_watermark == 150  # the live replicas have it

    cluster.brokers[behind].start()  # its log ends at 100, below the leader's start
    wait_until(lambda: behind in partition_metadata(cluster.bootstrap, "moved-on")[0][2], "it back in the ISR")
    cluster.brokers[leader].kill()
    cluster.brokers[other].kill()
    wait_until(lambda: partition_metadata(cluster.bootstrap, "moved-on")[0][0] == behind, "it leading")
    assert watermarks(cluster.bootstrap, "moved-on") == (150, 200)
    assert first_value_from_the_beginning(cluster.bootstrap, "moved-on") == b"150"
