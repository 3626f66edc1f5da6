"""A fetch's max_bytes and partition_max_bytes as Kafka applies them (KIP-74, ReplicaManager.readFromLog):
the first partition with records gives at least one whole batch whatever the limits, 0 included;
the partitions after it keep to what is left."""

import datetime
import time

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonTopicPartition
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from log.batches import make_batch, record_values
from raw_protocol import FETCH, FETCH_V, NONE, RawClient, create_topic, produce


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.mark.parametrize("limit", ["fetch_max_bytes", "max_partition_fetch_bytes"])
def test_a_consumer_with_a_zero_fetch_limit_still_reads_one_batch_at_a_time(broker, limit):
    """Kafka's consumer configs allow 0 for both; Kafka's broker answers the first batch anyway
    (LogSegment.read with minOneMessage), Weir answered nothing and the consumer read nothing, ever."""
    with RawClient(broker.port) as client:
        create_topic(client, "zero")
        for i in range(3):
            assert produce(client, "zero", make_batch([b"v%d" % i], timestamp=now_ms())).error_code == NONE
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=10_000, fetch_max_wait_ms=100,
                             **{limit: 0})
    try:
        consumer.assign([KafkaPythonTopicPartition("zero", 0)])
        consumer.seek_to_beginning()
        values = []
        for message in consumer:
            values.append(message.value)
            if len(values) == 3:
                break
    finally:
        consumer.close()
    assert values == [b"v0", b"v1", b"v2"]


def test_only_the_first_partition_with_records_goes_past_the_limits(broker):
    with RawClient(broker.port) as client:
        create_topic(client, "two", partitions=2)
        for partition in (0, 1):
            for i in range(2):
                produce(client, "two", make_batch([b"p%d-%d" % (partition, i) + b"x" * 100], timestamp=now_ms()),
                        partition=partition)

        def fetch_both(max_bytes: int, partition_max_bytes: int) -> list[list[bytes]]:
            response = client.call(FETCH, FETCH_V, FetchRequest(
                max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=max_bytes,
                topics=(FetchTopic(topic="two", partitions=tuple(
                    FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=partition_max_bytes)
                    for p in (0, 1))),), forgotten_topics_data=(), rack_id=""))
            return [[value[:4] for _, value in record_values(p.records or b"")]
                    for p in response.responses[0].partitions]

        assert fetch_both(0, 0) == [[b"p0-0"], []]
        assert fetch_both(10 << 20, 0) == [[b"p0-0"], []]
        assert fetch_both(1, 1 << 20) == [[b"p0-0"], []]  # the second partition's batch is past what is left
        assert fetch_both(10 << 20, 1 << 20) == [[b"p0-0", b"p0-1"], [b"p1-0", b"p1-1"]]
