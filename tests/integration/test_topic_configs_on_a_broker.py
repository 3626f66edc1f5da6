"""Every topic config Kafka defines, on a real broker, through the clients' admin APIs: confluent-kafka
and kafka-python describe all of them with their sources and synonyms; alter_configs and
incremental_alter_configs set one, a bad value refused with INVALID_CONFIG; and compression.type
makes the leader store batches in the topic's codec, whatever the producer sent."""

import struct

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic,
                                   ResourceType)
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonTopicPartition
from kafka.admin import ConfigResource as KafkaPythonConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from waiting import wait_until

KAFKA_TOPIC_CONFIGS = {  # Kafka 3.9's LogConfig
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
    "message.downconversion.enable", "message.format.version", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.difference.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
}
TOPIC, STATIC, DEFAULT = ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG


def test_every_topic_config_is_described_with_its_source_and_altered(start_broker):
    broker = start_broker(0, log_retention_ms="3600000")  # a static broker setting: retention.ms's synonym
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("described", 1, 1, config={"segment.ms": "100000"})])["described"].result(30)
    resource = ConfigResource(ResourceType.TOPIC, "described")

    def described() -> dict:
        return admin.describe_configs([resource])[resource].result(30)

    entries = described()
    assert set(entries) == KAFKA_TOPIC_CONFIGS
    sources = {name: ConfigSource(e.source) for name, e in entries.items()}
    assert sources.pop("segment.ms") == TOPIC and sources.pop("retention.ms") == STATIC
    assert set(sources.values()) == {DEFAULT}
    assert (entries["segment.ms"].value, entries["retention.ms"].value) == ("100000", "3600000")
    assert entries["compression.type"].value == "producer" and entries["min.cleanable.dirty.ratio"].value == "0.5"
    synonyms = {name: [(s.name, s.value, ConfigSource(s.source)) for s in e.synonyms.values()]
                for name, e in entries.items()}
    assert synonyms["segment.ms"] == [("segment.ms", "100000", TOPIC), ("log.roll.ms", "604800000", DEFAULT)]
    # (confluent-kafka keeps one synonym per name: retention.ms's two are checked with kafka-python below)
    assert synonyms["file.delete.delay.ms"] == [("log.segment.delete.delay.ms", "60000", DEFAULT)]
    assert synonyms["leader.replication.throttled.replicas"] == []

    python_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        described_by_python = python_admin.describe_configs(
            [KafkaPythonConfigResource(ConfigResourceType.TOPIC, "described")], include_synonyms=True,
            config_filter="all")["topic"]["described"]
        assert set(described_by_python) == KAFKA_TOPIC_CONFIGS
        retention = described_by_python["retention.ms"]
        assert retention["value"] == "3600000" and retention["config_source"] == "STATIC_BROKER_CONFIG"
        assert [(s["name"], s["value"], s["source"]) for s in retention["synonyms"]] == [
            ("log.retention.ms", "3600000", "STATIC_BROKER_CONFIG"), ("log.retention.ms", "604800000", "DEFAULT_CONFIG")]
        assert retention["config_type"] == "LONG" and described_by_python["cleanup.policy"]["config_type"] == "LIST"
        assert described_by_python["segment.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert {c["config_source"] for name, c in described_by_python.items()
                if name not in ("segment.ms", "retention.ms")} == {"DEFAULT_CONFIG"}

        # AlterConfigs (kafka-python sends the topic's other overrides along: the request replaces them all)
        python_admin.alter_configs([KafkaPythonConfigResource(ConfigResourceType.TOPIC, "described",
                                                              configs={"min.compaction.lag.ms": "5000"})],
                                   incremental=False)
    finally:
        python_admin.close()
    wait_until(lambda: described()["min.compaction.lag.ms"].value == "5000", "min.compaction.lag.ms set")
    assert ConfigSource(described()["segment.ms"].source) == TOPIC

    # IncrementalAlterConfigs (confluent-kafka): one config set, the others kept
    def alter(name, value):
        change = ConfigResource(ResourceType.TOPIC, "described", incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
        return admin.incremental_alter_configs([change])[change].result(30)

    alter("segment.jitter.ms", "2500")
    wait_until(lambda: described()["segment.jitter.ms"].value == "2500", "segment.jitter.ms set")
    assert ConfigSource(described()["min.compaction.lag.ms"].source) == TOPIC

    for name, value in [("segment.jitter.ms", "-1"), ("compression.type", "brotli"),
                        ("max.compaction.lag.ms", "1000"),  # below min.compaction.lag.ms
                        ("remote.storage.enable", "true"), ("leader.replication.throttled.replicas", "0-1")]:
        with pytest.raises(KafkaException) as refused:
            alter(name, value)
        assert refused.value.args[0].name() == "INVALID_CONFIG", name
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic("bad", 1, 1, config={"segment.index.bytes": "2"})])["bad"].result(30)
    assert refused.value.args[0].name() == "INVALID_CONFIG"
    assert "Invalid value 2 for configuration segment.index.bytes" in refused.value.args[0].str()
    assert described()["segment.jitter.ms"].value == "2500", "nothing refused was stored"


CODEC_MASK = 0x07
ZSTD, GZIP, SNAPPY = 4, 1, 2


def stored_codecs(broker, topic: str) -> list[int]:
    """The codec of each batch in the partition's first segment, as the broker wrote it."""
    data = (broker.data_dir / f"{topic}-0" / "00000000000000000000.log").read_bytes()
    codecs, position = [], 0
    while position + 61 <= len(data):
        length, = struct.unpack_from(">i", data, position + 8)
        attributes, = struct.unpack_from(">h", data, position + 21)
        codecs.append(attributes & CODEC_MASK)
        position += 12 + length
    return codecs


def read_values(broker, topic: str, count: int) -> tuple[list[bytes], list[bytes]]:
    """The values of the first `count` records, read by confluent-kafka and by kafka-python."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "r", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    by_confluent = []
    while len(by_confluent) < count:
        msg = consumer.poll(10)
        assert msg is not None and msg.error() is None
        by_confluent.append(msg.value())
    consumer.close()
    python_consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=5000,
                                    auto_offset_reset="earliest")
    python_consumer.assign([KafkaPythonTopicPartition(topic, 0)])
    by_python = [m.value for m in python_consumer]
    python_consumer.close()
    return by_confluent, by_python


def test_compression_type_makes_the_leader_store_the_topics_codec(start_broker):
    broker = start_broker(0)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("squeezed", 1, 1, config={"compression.type": "zstd"})])["squeezed"].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "enable.idempotence": True,
                         "compression.type": "none"})
    for i in range(5):
        producer.produce("squeezed", b"plain-%d" % i * 50)
        producer.flush(30)
    python_producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip", linger_ms=0)
    for i in range(5):
        python_producer.send("squeezed", b"gzip-%d" % i * 50).get(30)
    python_producer.close()
    assert stored_codecs(broker, "squeezed") == [ZSTD] * 10

    change = ConfigResource(ResourceType.TOPIC, "squeezed", incremental_configs=[
        ConfigEntry("compression.type", "producer", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([change])[change].result(30)
    snappy_producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "compression.type": "snappy"})

    def produced_as_sent():
        snappy_producer.produce("squeezed", b"snappy" * 100)  # compressible: librdkafka sends it compressed
        snappy_producer.flush(30)
        return stored_codecs(broker, "squeezed")[-1] == SNAPPY
    wait_until(produced_as_sent, "the broker keeping the producer's codec")

    expected = [b"plain-%d" % i * 50 for i in range(5)] + [b"gzip-%d" % i * 50 for i in range(5)]
    by_confluent, by_python = read_values(broker, "squeezed", 11)
    assert by_confluent[:10] == expected and by_python[:10] == expected
    assert set(by_confluent[10:]) == set(by_python[10:]) == {b"snappy" * 100}


def test_an_altered_log_config_applies_to_the_open_log(start_broker):
    broker = start_broker(0)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("resized", 1, 1)])["resized"].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce("resized", b"x" * 600)
    producer.flush(30)
    change = ConfigResource(ResourceType.TOPIC, "resized", incremental_configs=[
        ConfigEntry("segment.bytes", "1000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([change])[change].result(30)

    def rolled():
        producer.produce("resized", b"x" * 600)
        producer.flush(30)
        return len(list((broker.data_dir / "resized-0").glob("*.log"))) >= 3
    wait_until(rolled, "segments of at most 1000 bytes without a restart")


def test_describing_a_topic_whose_name_is_illegal_is_an_invalid_topic(broker):
    """Kafka's ConfigHelper checks the name first (Topic.validate): INVALID_TOPIC_EXCEPTION, and
    UNKNOWN_TOPIC_OR_PARTITION only for a legal name that no topic has."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for name, error in (("bad name!", KafkaError.TOPIC_EXCEPTION), ("." * 2, KafkaError.TOPIC_EXCEPTION),
                        ("x" * 250, KafkaError.TOPIC_EXCEPTION), ("absent", KafkaError.UNKNOWN_TOPIC_OR_PART)):
        resource = ConfigResource(ResourceType.TOPIC, name)
        with pytest.raises(KafkaException) as refused:
            admin.describe_configs([resource])[resource].result(30)
        assert refused.value.args[0].code() == error, name
