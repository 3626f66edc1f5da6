"""Real clients produce 100k keyed records with headers and read them back, per codec."""

import pytest

from clients import (confluent_consume, confluent_produce, kafka_python_consume, kafka_python_produce,
                     kcat_consume, kcat_produce, make_messages)

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
    assert len(received) == COUNT
    for partition in range(PARTITIONS):
        sent = [m for m in messages if m[0] == partition]
        got = [m for m in received if m.partition == partition]
        assert [m.offset for m in got] == list(range(len(sent))), "offsets are dense from 0, in order"
        assert [(m.key, m.value) for m in got] == [(k, v) for _, k, v, _, _ in sent]
        if client == "kcat":  # kcat sends one header for a whole run and stamps the time itself
            assert all(m.headers == (("kind", b"test"),) for m in got)
            assert all(m.timestamp > 0 for m in got)
        else:
            assert [m.headers for m in got] == [h for _, _, _, h, _ in sent]
            assert [m.timestamp for m in got] == [ts for _, _, _, _, ts in sent]
