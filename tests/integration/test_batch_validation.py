"""Produced batches are validated and put right before they are written (weir.log.log_validator),
against a real broker, with four independent client stacks and hand-built batches.

The regression: a batch whose header carried max timestamp -1 (a client may leave it for the
broker to fill in, as Kafka's broker does) failed with an internal error after it was written,
left its partition refusing every later append, and stopped the broker from starting again.
"""

import struct
import time

import pytest
from clients import aiokafka_produce, confluent_consume, confluent_produce, kafka_python_produce, kafkajs_produce
from log.batches import make_batch, patched, record_values
from raw_protocol import INVALID_TIMESTAMP, NONE, RawClient, assert_healthy, create_topic, fetch, list_offset, produce
from waiting import wait_until

STACKS = {"confluent-kafka": confluent_produce, "kafka-python": kafka_python_produce,
          "aiokafka": aiokafka_produce, "kafkajs": kafkajs_produce}
TIMESTAMP_LOG_APPEND_TIME = 2  # confluent_kafka's timestamp type constant


def now_ms() -> int:
    return int(time.time() * 1000)


def test_a_batch_without_max_timestamp_is_appended_right_and_survives_a_restart(broker):
    start = now_ms() - 60_000
    timestamps = [start + 100, start + 300, start + 200]
    with RawClient(broker.port) as client:
        create_topic(client, "unset")
        unset = patched(make_batch([b"a", b"b", b"c"], timestamps=timestamps), max_timestamp=-1)
        first, second = produce(client, "unset", unset), produce(client, "unset", unset)
        assert (first.error_code, first.base_offset) == (NONE, 0)
        assert (second.error_code, second.base_offset) == (NONE, 3)  # the partition goes on taking writes
        stored = fetch(client, "unset", 0).records
        assert struct.unpack_from(">q", stored, 35)[0] == start + 300  # the header now says the truth
        assert list_offset(client, "unset", timestamp=start + 250).offset == 1
        assert list_offset(client, "unset", timestamp=start + 301).offset == -1
    assert [m.timestamp for m in confluent_consume(broker.bootstrap, "unset", 1, 6)] == timestamps * 2
    broker.kill()
    broker.start()
    with RawClient(broker.port) as client:
        # ready before the controller's new leader epoch reaches the partition: until then it is offline
        wait_until(lambda: list_offset(client, "unset").error_code == NONE, "the partition led again")
        assert produce(client, "unset", make_batch([b"after"], timestamp=now_ms())).base_offset == 6
        assert [v for _, v in record_values(fetch(client, "unset", 0).records)] == [b"a", b"b", b"c"] * 2 + [b"after"]
    assert_healthy(broker)


@pytest.mark.parametrize("stack", STACKS)
def test_record_timestamps_and_list_offsets_by_time_are_exact_for_every_client(broker, stack):
    start = now_ms() - 60_000
    offsets_of = [1_000, 3_000, 2_000, 5_000, 4_000]  # out of order inside the batch
    messages = [(0, b"k%d" % i, b"v%d" % i, (("n", b"%d" % i),), start + t) for i, t in enumerate(offsets_of)]
    with RawClient(broker.port) as client:
        create_topic(client, stack)
    STACKS[stack](broker.bootstrap, stack, messages)
    consumed = confluent_consume(broker.bootstrap, stack, 1, len(messages))
    assert [(m.value, m.timestamp) for m in consumed] == [(v, ts) for _, _, v, _, ts in messages]
    with RawClient(broker.port) as client:
        assert list_offset(client, stack, timestamp=start + 2_500).offset == 1
        assert list_offset(client, stack, timestamp=start + 4_500).offset == 3
        assert list_offset(client, stack, timestamp=start + 5_001).offset == -1


def test_kafkajs_records_without_a_timestamp_count_in_the_max_timestamp(broker):
    """kafkajs stamps such records with its clock but leaves them out of the header's max."""
    old = now_ms() - 600_000
    with RawClient(broker.port) as client:
        create_topic(client, "mixed")
    before = now_ms()
    kafkajs_produce(broker.bootstrap, "mixed", [(0, b"k", b"old", (), old), (0, b"k", b"now", (), None),
                                                (0, b"k", b"older", (), old - 1)])
    with RawClient(broker.port) as client:
        found = list_offset(client, "mixed", timestamp=before - 1_000)
        assert found.offset == 1 and found.timestamp >= before - 1_000


def test_log_append_time_topics_stamp_the_brokers_clock(broker):
    with RawClient(broker.port) as client:
        create_topic(client, "appended", configs={"message.timestamp.type": "LogAppendTime"})
    before = now_ms()
    confluent_produce(broker.bootstrap, "appended", [(0, b"k", b"v%d" % i, (), 1_000 + i) for i in range(3)])
    after = now_ms()
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition("appended", 0, 0)])
    try:
        messages = consumer.consume(3, timeout=10)
    finally:
        consumer.close()
    assert len(messages) == 3
    for message in messages:
        kind, timestamp = message.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME and before <= timestamp <= after


def test_a_timestamp_too_far_ahead_is_refused_and_the_partition_goes_on(broker):
    from confluent_kafka import KafkaError, Producer
    with RawClient(broker.port) as client:
        create_topic(client, "future")
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "retries": 0})
    producer.produce("future", b"too early", partition=0, timestamp=now_ms() + 7_200_000,
                     on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.INVALID_TIMESTAMP]
    confluent_produce(broker.bootstrap, "future", [(0, b"k", b"on time", (), now_ms())])
    assert [m.value for m in confluent_consume(broker.bootstrap, "future", 1, 1)] == [b"on time"]
    with RawClient(broker.port) as client:
        result = produce(client, "future", make_batch([b"x"], timestamp=now_ms() + 7_200_000))
        assert result.error_code == INVALID_TIMESTAMP
        assert list_offset(client, "future").offset == 1


@pytest.mark.parametrize("stack", STACKS)
def test_a_backfill_of_records_stamped_days_ago_fills_one_segment(broker, stack):
    """log.roll.ms (7 days) counts in the records' time, as Kafka's: records stamped eight days ago
    (CreateTime, a backfill or a mirror) go on filling the active segment. It was the clock: each
    produce request after the first rolled a segment, three more open files each."""
    stamped = now_ms() - 8 * 86_400_000
    with RawClient(broker.port) as client:
        create_topic(client, stack)
    for request in range(5):  # each call flushes: one produce request or more
        records = [(0, b"k", b"v%d-%d" % (request, i), (), stamped + i) for i in range(3)]
        STACKS[stack](broker.bootstrap, stack, records)
    assert sorted(p.name for p in (broker.data_dir / f"{stack}-0").glob("*.log")) == ["00000000000000000000.log"]
    assert [m.timestamp for m in confluent_consume(broker.bootstrap, stack, 1, 15)] == [stamped + i for i in range(3)] * 5


@pytest.mark.parametrize("acks", ["2", "3"])
def test_acks_other_than_minus_one_zero_or_one_is_refused_and_nothing_is_written(broker, acks):
    """librdkafka takes acks up to 1000 (an old Kafka's meaning: that many replicas); Kafka's
    ReplicaManager.isValidRequiredAcks refuses all but -1, 0 and 1 with INVALID_REQUIRED_ACKS, before
    any append. Weir appended and answered as for acks=1: the producer believed two replicas held it."""
    from confluent_kafka import KafkaError, Producer
    with RawClient(broker.port) as client:
        create_topic(client, "acks")
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "retries": 0,
                         "enable.idempotence": False})
    producer.produce("acks", b"refused", partition=0, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert [e.code() if e else None for e in errors] == [KafkaError.INVALID_REQUIRED_ACKS]
    with RawClient(broker.port) as client:
        assert list_offset(client, "acks").offset == 0
    confluent_produce(broker.bootstrap, "acks", [(0, b"k", b"acks=all", (), now_ms())])
    assert [m.value for m in confluent_consume(broker.bootstrap, "acks", 1, 1)] == [b"acks=all"]
