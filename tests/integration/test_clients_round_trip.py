"""Real clients produce 100k keyed records with headers and read them back, per codec."""

import pytest
from clients import (confluent_consume, confluent_produce, kafka_python_consume, kafka_python_produce, kcat_consume,
                     kcat_produce, make_messages, platformatic_group_consume, platformatic_produce,
                     sarama_group_consume, sarama_produce)

PARTITIONS = 3
COUNT = 100_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CLIENTS = {
    "confluent-kafka": (confluent_produce, confluent_consume),
    "kafka-python": (kafka_python_produce, kafka_python_consume),
    "kcat": (kcat_produce, kcat_consume),
}


def create_topic(bootstrap, topic, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_round_trip_in_order_per_partition(broker, client, codec):
    produce, consume = CLIENTS[client]
    topic = f"round-trip-{client}-{codec}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    messages = make_messages(COUNT, PARTITIONS)
    produce(broker.bootstrap, topic, messages, compression=codec)
    received = consume(broker.bootstrap, topic, PARTITIONS, COUNT)
    assert_received_in_order(messages, received, stamped_by_client=client != "kcat")


GROUP_CLIENTS = {  # more independent protocol implementations, consuming as group members
    "platformatic": (platformatic_produce, platformatic_group_consume),  # pure JavaScript
    "sarama": (sarama_produce, sarama_group_consume),  # Go
}


@pytest.mark.parametrize("client, codec", [(client, codec) for client in GROUP_CLIENTS for codec in CODECS
                                           if (client, codec) != ("platformatic", "zstd")])  # Node 20: no zstd
def test_round_trip_through_a_consumer_group(broker, client, codec):
    """An idempotent acks=all producer, then a consumer group member that reads everything and
    commits; the group's committed offsets are each partition's end."""
    from confluent_kafka import Consumer, TopicPartition
    produce, group_consume = GROUP_CLIENTS[client]
    topic, group, count = f"round-trip-{client}-{codec}", f"{client}-{codec}", 20_000
    create_topic(broker.bootstrap, topic, PARTITIONS)
    messages = make_messages(count, PARTITIONS)
    produce(broker.bootstrap, topic, messages, compression=codec)
    received = group_consume(broker.bootstrap, topic, group, count)
    assert_received_in_order(messages, received, stamped_by_client=True)
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        reader.close()
    assert [tp.offset for tp in committed] == [len([m for m in messages if m[0] == p]) for p in range(PARTITIONS)]


def assert_received_in_order(messages, received, *, stamped_by_client):
    """Every message once, each partition's in the order sent at dense offsets from 0, with its key
    and value; its headers and timestamp too, unless the client (kcat) sends one header for a whole
    run and stamps the time itself."""
    assert len(received) == len(messages)
    for partition in range(PARTITIONS):
        sent = [m for m in messages if m[0] == partition]
        got = [m for m in received if m.partition == partition]
        assert [m.offset for m in got] == list(range(len(sent))), "offsets are dense from 0, in order"
        assert [(m.key, m.value) for m in got] == [(k, v) for _, k, v, _, _ in sent]
        if stamped_by_client:
            assert [m.headers for m in got] == [h for _, _, _, h, _ in sent]
            assert [m.timestamp for m in got] == [ts for _, _, _, _, ts in sent]
        else:
            assert all(m.headers == (("kind", b"test"),) for m in got)
            assert all(m.timestamp > 0 for m in got)
