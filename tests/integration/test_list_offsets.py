"""ListOffsets' special timestamps on a real broker, through confluent-kafka's AdminClient.list_offsets,
checked against what Kafka answers (core/src/test/scala/integration/kafka/admin/ListOffsetsIntegrationTest.scala)."""

import time

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec


def now_ms() -> int:
    return int(time.time() * 1000)


def _list_offset(admin: AdminClient, topic: str, spec: OffsetSpec):
    [(_, future)] = admin.list_offsets({TopicPartition(topic, 0): spec}).items()
    return future.result(30)


def _produce_one_batch(bootstrap: str, topic: str, timestamps: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 60_000, "acks": "all"})
    for ts in timestamps:
        producer.produce(topic, b"0123456789", partition=0, timestamp=ts)
    assert producer.flush(30) == 0


def test_max_timestamp_answers_the_record_with_the_largest_timestamp_not_its_batchs_last(broker):
    """KIP-734's MAX_TIMESTAMP (-3): the offset of the first record holding the largest timestamp,
    as Kafka since KAFKA-16310 (UnifiedLog.fetchOffsetByTimestamp, RecordBatch.offsetOfMaxTimestamp);
    in one batch stamped 100, 999, 200 ms that is offset 1, not the batch's last offset 2. On a
    LogAppendTime topic every record has the batch's time: the first, offset 0."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = admin.create_topics([NewTopic("create-time", 1, 1),
                                   NewTopic("append-time", 1, 1, config={"message.timestamp.type": "LogAppendTime"})])
    for future in created.values():
        future.result(30)
    start = now_ms() - 60_000
    _produce_one_batch(broker.bootstrap, "create-time", [start + 100, start + 999, start + 200])
    found = _list_offset(admin, "create-time", OffsetSpec.max_timestamp())
    assert (found.offset, found.timestamp) == (1, start + 999)

    before = now_ms()
    _produce_one_batch(broker.bootstrap, "append-time", [start + 100, start + 999, start + 200])
    found = _list_offset(admin, "append-time", OffsetSpec.max_timestamp())
    assert found.offset == 0 and found.timestamp >= before
