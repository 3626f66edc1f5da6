"""Log compaction on a real broker: a compacted topic keeps each key's latest value outside the
active segment, tombstoned keys go after delete.retention.ms, offsets never move, and
confluent-kafka and kafka-python consumers read the cleaned log (its emptied batches included).
delete.retention.ms is 0 here: a tombstone goes at the first cleaning after the one that kept it."""


import os

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonTopicPartition
from waiting import wait_until

KEYS, UPDATES = 100, 100  # 10,000 updates
TOMBSTONED = {b"key-%03d" % k for k in range(0, KEYS, 10)}


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.partition.eof": True,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, "no end of partition"
            if msg.error() is not None:
                return out
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()


def untailed(records):
    return [r for r in records if not r[1].startswith(b"tail")]


def test_a_compacted_topic_keeps_the_latest_value_of_each_key(start_broker):
    broker = start_broker(0, log_cleaner_backoff_ms="200")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("latest", 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "16384", "delete.retention.ms": "0",
        "min.cleanable.dirty.ratio": "0.01"})])["latest"].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "enable.idempotence": True,
                         "batch.size": 4000})
    for update in range(UPDATES):
        for k in range(KEYS):
            producer.produce("latest", b"%d" % update, key=b"key-%03d" % k)
    for key in sorted(TOMBSTONED):
        producer.produce("latest", None, key=key)
    tail = 2000  # enough to close the segments above (16 KiB each): the active segment is never cleaned
    for k in range(tail):
        producer.produce("latest", b"tail", key=b"tail-%d" % (k % 5))
    assert producer.flush(60) == 0
    end = KEYS * UPDATES + len(TOMBSTONED) + tail

    def compacted():
        """Every read, during cleaning or after, sees each key's latest value (a tombstoned key's
        tombstone, until it goes); once cleaned, one record per live key."""
        records = read_all(broker.bootstrap, "latest")
        latest = {key: value for _, key, value in records if not key.startswith(b"tail")}
        assert latest == {**{b"key-%03d" % k: b"%d" % (UPDATES - 1) for k in range(KEYS)
                             if b"key-%03d" % k not in TOMBSTONED},
                          **{key: None for key in TOMBSTONED if key in latest}}
        keys = [key for _, key, _ in records if not key.startswith(b"tail")]
        return records if len(keys) == len(set(keys)) == KEYS - len(TOMBSTONED) else None
    def deduplicated():
        records = read_all(broker.bootstrap, "latest")
        keys = [key for _, key, _ in records if not key.startswith(b"tail")]
        live = {b"key-%03d" % k for k in range(KEYS)} - TOMBSTONED
        return len(keys) == len(set(keys)) and live <= set(keys)
    wait_until(deduplicated, "one record per key, a tombstone for each deleted one while it stays")
    # KIP-534: the cleaning that first keeps a tombstone stamps its delete horizon (now + 0 ms); a
    # later cleaning, once new records made the log dirty again, removes it
    for k in range(tail):
        producer.produce("latest", b"tail", key=b"tail-%d" % (k % 5))
    assert producer.flush(60) == 0
    end += tail
    records = wait_until(compacted, "one record per live key, the tombstones gone", timeout_s=60)
    latest = {key: value for _, key, value in records if not key.startswith(b"tail")}
    assert all(latest[b"key-%03d" % k] == b"%d" % (UPDATES - 1) for k in range(KEYS) if b"key-%03d" % k not in TOMBSTONED)
    assert not TOMBSTONED & set(latest)
    assert [offset for offset, _, _ in records] == sorted(offset for offset, _, _ in records)
    assert records[-1][0] == end - 1, "offsets never move"
    assert Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "w"}).get_watermark_offsets(
        TopicPartition("latest", 0), timeout=10, cached=False) == (0, end)

    settled = untailed(records)  # the tail's keys may be cleaned further; these no longer change
    python_consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=5000,
                                    auto_offset_reset="earliest")
    python_consumer.assign([KafkaPythonTopicPartition("latest", 0)])
    assert untailed([(m.offset, m.key, m.value) for m in python_consumer]) == settled
    python_consumer.close()

    broker.kill()  # a crash: the cleaned segments recover as they are
    broker.start()
    after = read_all(broker.bootstrap, "latest")
    assert untailed(after) == settled and after[-1][0] == end - 1


def test_a_compacted_topic_refuses_records_without_a_key(start_broker):
    broker = start_broker(0)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("keyed", 1, 1, config={"cleanup.policy": "compact"})])["keyed"].result(30)
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    producer.produce("keyed", b"no key", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert errors and errors[0] is not None and errors[0].name() == "INVALID_RECORD", errors


def test_a_replica_that_starts_empty_copies_the_cleaned_log(start_cluster):
    """Every replica cleans its own copy; one that lost its disk fetches the leader's cleaned log,
    emptied batches and all, and holds the same records as the others."""
    import shutil
    cluster = start_cluster(log_cleaner_backoff_ms="200")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("shared", 1, 3, config={
        "cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01",
        "min.insync.replicas": "2"})])["shared"].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "batch.size": 4000})
    for i in range(4000):
        producer.produce("shared", b"%d" % i, key=b"key-%02d" % (i % 50))
    assert producer.flush(60) == 0

    def compacted():
        records = read_all(cluster.bootstrap, "shared")
        return records if len(records) < 4000 else None
    wait_until(compacted, "the leader's log compacted", timeout_s=60)
    metadata = admin.list_topics("shared", timeout=10).topics["shared"].partitions[0]
    fresh = next(r for r in metadata.replicas if r != metadata.leader)
    cluster.brokers[fresh].kill()
    shutil.rmtree(cluster.brokers[fresh].data_dir / "shared-0")
    cluster.brokers[fresh].start()

    def in_sync():
        partition = admin.list_topics("shared", timeout=10).topics["shared"].partitions[0]
        return fresh in partition.isrs
    wait_until(in_sync, "the emptied replica back in the ISR", timeout_s=60)
    expected = read_all(cluster.bootstrap, "shared")
    for other in metadata.replicas:
        if other != fresh:
            cluster.brokers[other].kill()
    wait_until(lambda: admin.list_topics("shared", timeout=10).topics["shared"].partitions[0].leader == fresh,
               "the copied replica leading", timeout_s=60)
    survivor = cluster.brokers[fresh].bootstrap
    copied = read_all(survivor, "shared")
    latest = lambda records: {key: value for _, key, value in records}  # noqa: E731
    assert latest(copied) == latest(expected) and copied[-1][0] == 3999


def test_consumer_offsets_are_compacted_and_reload_after_a_restart(start_broker):
    """__consumer_offsets is compacted: after the cleaner has run over many commits and a deleted
    group's tombstones, a restarted coordinator loads each group's last offsets, and the deleted
    group stays deleted."""
    broker = start_broker(0, offsets_topic_num_partitions="1", offsets_topic_segment_bytes="4096",
                          log_cleaner_backoff_ms="200", group_initial_rebalance_delay_ms="0")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("source", 1, 1)])["source"].result(30)
    for group, commits in (("kept", 400), ("dropped", 50)):
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
        for offset in range(commits):
            consumer.commit(offsets=[TopicPartition("source", 0, offset)], asynchronous=False)
        consumer.close()
    assert admin.delete_consumer_groups(["dropped"])["dropped"].result(30) is None
    wait_until(lambda: any("__consumer_offsets-0: compacted" in line for line in broker.log_lines),
               "the cleaner over __consumer_offsets", timeout_s=60)

    broker.kill()
    broker.start()

    def committed(group):
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        try:
            return consumer.committed([TopicPartition("source", 0)], timeout=30)[0].offset
        finally:
            consumer.close()
    assert committed("kept") == 399
    assert committed("dropped") < 0, "no offset: the group was deleted"


def test_cleanup_policy_is_altered_as_a_list(start_broker):
    """IncrementalAlterConfigs APPEND and SUBTRACT on cleanup.policy (confluent-kafka's admin
    client): a topic goes from delete to delete,compact to compact; other configs are not lists."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    broker = start_broker(0)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("policy", 1, 1)])["policy"].result(30)

    def alter(name, value, operation):
        resource = ConfigResource(ResourceType.TOPIC, "policy", incremental_configs=[
            ConfigEntry(name, value, incremental_operation=operation)])
        return admin.incremental_alter_configs([resource])[resource].result(30)

    def policy():
        resource = ConfigResource(ResourceType.TOPIC, "policy")
        return admin.describe_configs([resource])[resource].result(30)["cleanup.policy"].value

    assert policy() == "delete"
    alter("cleanup.policy", "compact", AlterConfigOpType.APPEND)
    alter("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)  # on the stored value, not a stale view
    wait_until(lambda: policy() == "compact", "the broker's view of the change")
    alter("cleanup.policy", "delete", AlterConfigOpType.APPEND)
    wait_until(lambda: policy() == "compact,delete", "the broker's view of the change")
    with pytest.raises(KafkaException) as refused:
        alter("retention.ms", "1000", AlterConfigOpType.APPEND)
    assert refused.value.args[0].name() == "INVALID_CONFIG"


def test_compressed_batches_emptied_by_the_cleaner_are_read_by_every_client(start_broker):
    """Batches whose every record is stale (each codec, from librdkafka's producer) become empty
    headers without a codec, as Kafka's writeEmptyHeader: the cleaner goes on (an empty snappy or
    lz4 payload had made every cleaning pass fail) and confluent-kafka and kafka-python read past
    them."""
    broker = start_broker(0, log_cleaner_backoff_ms="200")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    codecs = ("gzip", "snappy", "lz4", "zstd")
    for future in admin.create_topics([NewTopic(codec, 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"})
            for codec in codecs]).values():
        future.result(30)
    for codec in codecs:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5})
        for round_ in range(40):
            for k in range(10):
                producer.produce(codec, b"v%d" % round_, key=b"k%d" % k)
            producer.flush(10)  # a batch of ten each round: all stale but the last
        for _ in range(16):
            for _ in range(5):
                producer.produce(codec, os.urandom(200), key=b"tail")  # incompressible
            assert producer.flush(10) == 0  # enough to close the segments above
    for codec in codecs:
        def compacted():
            records = read_all(broker.bootstrap, codec)
            return records if len(untailed(records)) == 10 else None
        records = wait_until(compacted, f"{codec}: one record per key", timeout_s=60)
        assert untailed(records) == [(390 + k, b"k%d" % k, b"v39") for k in range(10)]
        python_consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=5000,
                                        auto_offset_reset="earliest")
        python_consumer.assign([KafkaPythonTopicPartition(codec, 0)])
        assert untailed([(m.offset, m.key, m.value) for m in python_consumer]) == untailed(records)
        python_consumer.close()
