"""ListOffsets' special timestamps on a real broker, through confluent-kafka's AdminClient.list_offsets,
checked against what Kafka answers (core/src/test/scala/integration/kafka/admin/ListOffsetsIntegrationTest.scala)."""

import time

from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from waiting import wait_until

from weir.verify.workload import retriable_offset_error


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


def test_the_leader_epoch_answered_is_the_epoch_of_the_offset_found(broker):
    """Kafka answers the epoch of the record found (UnifiedLog.fetchOffsetByTimestamp: the earliest
    epoch entry for EARLIEST, the batch's partitionLeaderEpoch for a time, the leader's for
    LATEST, none when no record is found); Weir answered the current leader epoch for all."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("epochs", 1, 1)])["epochs"].result(30)
    start = now_ms() - 60_000
    _produce_one_batch(broker.bootstrap, "epochs", [start + 100])
    first_epoch = _list_offset(admin, "epochs", OffsetSpec.latest()).leader_epoch
    broker.kill()
    broker.start()

    def latest():
        # A fresh client each time: one that learned the old epoch before the controller's new
        # state is answered FENCED_LEADER_EPOCH, which librdkafka's list_offsets gives back.
        client = AdminClient({"bootstrap.servers": broker.bootstrap})
        try:
            found = _list_offset(client, "epochs", OffsetSpec.latest())
        except KafkaException as e:
            if retriable_offset_error(e):
                return None
            raise
        return (client, found.leader_epoch) if found.leader_epoch > first_epoch else None
    admin, new_epoch = wait_until(latest, "a new leader epoch after the restart")
    _produce_one_batch(broker.bootstrap, "epochs", [start + 200])

    earliest = _list_offset(admin, "epochs", OffsetSpec.earliest())
    assert (earliest.offset, earliest.leader_epoch) == (0, first_epoch)
    by_time = _list_offset(admin, "epochs", OffsetSpec.for_timestamp(start + 50))
    assert (by_time.offset, by_time.timestamp, by_time.leader_epoch) == (0, start + 100, first_epoch)
    newest = _list_offset(admin, "epochs", OffsetSpec.max_timestamp())
    assert (newest.offset, newest.timestamp, newest.leader_epoch) == (1, start + 200, new_epoch)
    latest_now = _list_offset(admin, "epochs", OffsetSpec.latest())
    assert (latest_now.offset, latest_now.leader_epoch) == (2, new_epoch)
    none = _list_offset(admin, "epochs", OffsetSpec.for_timestamp(start + 300))
    assert (none.offset, none.leader_epoch) == (-1, None)  # confluent-kafka: None for -1


def test_a_partition_named_twice_and_timestamps_the_version_lacks_are_refused_as_kafka(broker):
    """Kafka's handleListOffsetRequestV1AndAbove answers each occurrence of a partition named twice
    INVALID_REQUEST (ListOffsetsRequest.duplicatePartitions), and a negative timestamp the request's
    version does not have (MAX_TIMESTAMP before v7, EARLIEST_LOCAL before v8, LATEST_TIERED -5
    before v9, any other) UNSUPPORTED_VERSION. Weir answered both copies, MAX_TIMESTAMP at v1, and
    INVALID_REQUEST for an unknown timestamp."""
    from kio.schema.list_offsets.v1.request import ListOffsetsPartition as V1Partition
    from kio.schema.list_offsets.v1.request import ListOffsetsRequest as V1Request
    from kio.schema.list_offsets.v1.request import ListOffsetsTopic as V1Topic
    from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
    from raw_protocol import LIST_OFFSETS, RawClient, create_topic

    def answers(version: int, client: RawClient, *timestamps: tuple[str, int, int]):
        topics = {}
        for name, index, timestamp in timestamps:
            topics.setdefault(name, []).append((index, timestamp))
        if version == 1:
            request = V1Request(replica_id=-1, topics=tuple(
                V1Topic(name=n, partitions=tuple(V1Partition(partition_index=i, timestamp=ts) for i, ts in ps))
                for n, ps in topics.items()))
        else:
            request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=tuple(
                ListOffsetsTopic(name=n, partitions=tuple(
                    ListOffsetsPartition(partition_index=i, timestamp=ts) for i, ts in ps))
                for n, ps in topics.items()))
        response = client.call(LIST_OFFSETS, version, request)
        return [(t.name, p.partition_index, p.error_code, p.offset) for t in response.topics for p in t.partitions]

    with RawClient(broker.port) as client:
        create_topic(client, "twice", partitions=2)
        assert answers(7, client, ("twice", 0, -1), ("twice", 1, -1), ("twice", 0, -2)) == [
            ("twice", 0, 42, -1), ("twice", 1, 0, 0), ("twice", 0, 42, -1)]
        assert answers(7, client, ("twice", 0, -4), ("twice", 1, -5)) == [("twice", 0, 35, -1), ("twice", 1, 35, -1)]
        assert answers(7, client, ("twice", 0, -7), ("twice", 1, -3)) == [("twice", 0, 35, -1), ("twice", 1, 0, -1)]
        assert answers(1, client, ("twice", 0, -3), ("twice", 1, -2)) == [("twice", 0, 35, -1), ("twice", 1, 0, 0)]
