"""DescribeProducers (KIP-664) on a real cluster: each partition's idempotent producers as a replica's
producer table holds them (id, epoch, last sequence, the max timestamp of its last batch; no
transactions, so coordinator epoch and transaction start -1), from the leader or a follower, kept
across a restart; NOT_LEADER_OR_FOLLOWER from a broker that hosts no replica, as Kafka's; asked by
hand and through kafka-python's admin client."""

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import NotLeaderForPartitionError  # NOT_LEADER_OR_FOLLOWER
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from raw_protocol import NONE, UNKNOWN_TOPIC_OR_PARTITION, RawClient
from waiting import wait_until

DESCRIBE_PRODUCERS = 61
NOT_LEADER_OR_FOLLOWER = 6
T0 = 1_700_000_000_000


def produce(bootstrap: str, count: int, first_ts: int) -> None:
    """One idempotent producer (its own producer id) writes `count` records to pids-0."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(count):
        producer.produce("pids", b"v%d" % i, b"k", partition=0, timestamp=first_ts + i)
    assert producer.flush(30) == 0


def describe(port: int, *topics: tuple[str, tuple[int, ...]]):
    with RawClient(port) as client:
        request = DescribeProducersRequest(topics=tuple(TopicRequest(name=name, partition_indexes=indexes)
                                                        for name, indexes in topics))
        return client.call(DESCRIBE_PRODUCERS, 0, request)


def states(partition) -> set[tuple]:
    """(epoch, last sequence, last timestamp, coordinator epoch, txn start) of each producer, ids apart."""
    assert partition.error_code == NONE, partition
    ids = [p.producer_id for p in partition.active_producers]
    assert len(set(ids)) == len(ids) and all(i >= 0 for i in ids)
    return {(p.producer_epoch, p.last_sequence, p.last_timestamp, p.coordinator_epoch, p.current_txn_start_offset)
            for p in partition.active_producers}


def test_describe_producers_lists_a_partitions_idempotent_producers(start_cluster):
    cluster = start_cluster()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # pids-0 on brokers 0 (leader) and 1; broker 2 hosts no replica of it
    admin.create_topics([NewTopic("pids", 2, replica_assignment=[[0, 1], [1, 2]])])["pids"].result(30)
    produce(cluster.bootstrap, 10, T0)
    produce(cluster.bootstrap, 5, T0 + 1000)  # acks=all: broker 1 has both producers' batches too
    expected = {(0, 9, T0 + 9, -1, -1), (0, 4, T0 + 1004, -1, -1)}
    leader, follower, elsewhere = cluster.brokers

    response = describe(leader.port, ("pids", (0, 7)), ("nope", (0,)))
    [pids, nope] = response.topics
    assert [p.partition_index for p in pids.partitions] == [0, 7]
    assert states(pids.partitions[0]) == expected
    assert pids.partitions[1].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert [p.error_code for p in nope.partitions] == [UNKNOWN_TOPIC_OR_PARTITION]

    [topic] = describe(follower.port, ("pids", (0, 1))).topics
    assert states(topic.partitions[0]) == expected, "a follower answers from its own table"
    assert topic.partitions[1].error_code == NONE and topic.partitions[1].active_producers == ()
    [topic] = describe(elsewhere.port, ("pids", (0,))).topics
    assert topic.partitions[0].error_code == NOT_LEADER_OR_FOLLOWER

    follower.stop(timeout_s=20)  # a clean stop: the table comes back from its snapshot
    assert follower.proc.returncode == 0, "stopped cleanly, not killed after the timeout"
    follower.start()
    hosted = wait_until(lambda: next((p for p in describe(follower.port, ("pids", (0,))).topics[0].partitions
                                      if p.error_code == NONE), None), "pids-0 hosted again by broker 1")
    assert states(hosted) == expected

    python_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        [(tp, state)] = python_admin.describe_producers([TopicPartition("pids", 0)]).items()
        assert tp == TopicPartition("pids", 0)
        assert {tuple(p)[1:] for p in state.active_producers} == expected
        with pytest.raises(NotLeaderForPartitionError):
            python_admin.describe_producers([TopicPartition("pids", 0)], broker_id=elsewhere.broker_id)
    finally:
        python_admin.close()


def test_an_idle_producer_is_forgotten_after_the_expiration_and_goes_on_writing_where_it_stood(start_broker):
    """producer.id.expiration.ms: the partition forgets a producer idle that long (Kafka's
    removeExpiredProducers), so its table does not grow with every producer that ever wrote. The
    producer, still running, sends its next sequence number to a partition with no state of it:
    taken, as Kafka takes it (KIP-360), not refused with OUT_OF_ORDER_SEQUENCE_NUMBER, which
    librdkafka treats as fatal."""
    broker = start_broker(0, producer_id_expiration_ms="1500", log_retention_check_interval_ms="200")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # must outlive the future
    admin.create_topics([NewTopic("pids", 1, 1)])["pids"].result(30)
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5,
                         "error_cb": errors.append})

    def write(first: int) -> None:
        for i in range(first, first + 3):
            producer.produce("pids", b"v%d" % i, partition=0, on_delivery=lambda err, _: err and errors.append(err))
        assert producer.flush(30) == 0

    write(0)
    [before] = describe(broker.port, ("pids", (0,))).topics[0].partitions
    assert [p.last_sequence for p in before.active_producers] == [2]
    wait_until(lambda: not describe(broker.port, ("pids", (0,))).topics[0].partitions[0].active_producers,
               "the idle producer to be forgotten")
    write(3)
    assert errors == []
    [after] = describe(broker.port, ("pids", (0,))).topics[0].partitions
    assert [(p.producer_id, p.last_sequence) for p in after.active_producers] == [
        (before.active_producers[0].producer_id, 5)]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False})
    consumer.assign([ConfluentPartition("pids", 0, 0)])
    values = [m.value() for m in consumer.consume(6, timeout=10)]
    consumer.close()
    assert values == [b"v%d" % i for i in range(6)]
