"""Topic configs without a broker: Kafka 3.9's list, its validators and messages, the values a
topic gets (override, broker properties, default), DescribeConfigs' sources and synonyms, and what
the broker makes of them (log settings, produce validation)."""

import uuid

import pytest

from weir.broker.replica_manager import ReplicaManager
from weir.config import topic_configs
from weir.config.broker_config import BrokerConfig
from weir.config.settings import DEFAULT_CONFIG, STATIC_BROKER_CONFIG, ConfigError
from weir.config.topic_configs import (DYNAMIC_TOPIC_CONFIG, ConfigType, Synonym, describe, timestamp_bounds,
                                       validate_topic_configs)
from weir.protocol.compression import CODEC_GZIP, CODEC_ZSTD
from weir.protocol.errors import ErrorCode, KafkaError
from weir.zk.model import ClusterView, TopicAssignment

# Kafka 3.9's LogConfig, with the broker setting each one overrides (ServerTopicConfigSynonyms).
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy": "log.cleanup.policy", "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level", "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level", "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms", "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms", "follower.replication.throttled.replicas": None,
    "index.interval.bytes": "log.index.interval.bytes", "leader.replication.throttled.replicas": None,
    "local.retention.bytes": "log.local.retention.bytes", "local.retention.ms": "log.local.retention.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms", "max.message.bytes": "message.max.bytes",
    "message.downconversion.enable": "log.message.downconversion.enable",
    "message.format.version": "log.message.format.version",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms", "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate", "remote.log.copy.disable": None, "remote.log.delete.on.disable": None,
    "remote.storage.enable": None, "retention.bytes": "log.retention.bytes", "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes", "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms", "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}
BROKER = BrokerConfig()


def refusal(configs: dict, broker=BROKER) -> str:
    with pytest.raises(KafkaError) as refused:
        validate_topic_configs(configs, broker)
    assert refused.value.code == ErrorCode.invalid_config
    return refused.value.message


def test_every_kafka_topic_config_with_its_broker_synonym():
    assert {d.name: d.synonym for d in topic_configs.TOPIC_CONFIG_DEFS.values()} == KAFKA_TOPIC_CONFIGS


def test_every_legal_value_is_accepted():
    validate_topic_configs({
        "cleanup.policy": "compact, delete", "compression.type": "zstd", "compression.gzip.level": "-1",
        "compression.lz4.level": "17", "compression.zstd.level": "-131072", "delete.retention.ms": "0",
        "file.delete.delay.ms": "0", "flush.messages": "1", "flush.ms": "0", "follower.replication.throttled.replicas":
        "0:1, 1:2", "leader.replication.throttled.replicas": "*", "index.interval.bytes": "0",
        "local.retention.bytes": "-2", "local.retention.ms": "-2", "max.compaction.lag.ms": "1",
        "max.message.bytes": "0", "message.downconversion.enable": "FALSE", "message.format.version": "2.8.1",
        "message.timestamp.after.max.ms": "0", "message.timestamp.before.max.ms": "9223372036854775807",
        "message.timestamp.difference.max.ms": "0", "message.timestamp.type": "LogAppendTime",
        "min.cleanable.dirty.ratio": "1", "min.compaction.lag.ms": "0", "min.insync.replicas": "1",
        "preallocate": "true", "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false",
        "remote.storage.enable": "false", "retention.bytes": "-5", "retention.ms": "-1", "segment.bytes": "14",
        "segment.index.bytes": "4", "segment.jitter.ms": "0", "segment.ms": "1",
        "unclean.leader.election.enable": "true"}, BROKER)


@pytest.mark.parametrize("name, value, message", [
    ("no.such.config", "1", "Unknown topic config name: no.such.config"),
    ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ("retention.ms", "1h", "Invalid value 1h for configuration retention.ms: Not a number of type LONG"),
    ("segment.bytes", "13", "Value must be at least 14"),
    ("segment.bytes", "2147483648", "Not a number of type INT"),
    ("segment.ms", "0", "Value must be at least 1"),
    ("segment.index.bytes", "3", "Value must be at least 4"),
    ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "half", "Not a number of type DOUBLE"),
    ("cleanup.policy", "compact,remove", "String must be one of: compact, delete"),
    ("compression.type", "brotli", "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"),
    ("compression.lz4.level", "18", "Value must be no more than 17"),
    ("compression.zstd.level", "23", "Value must be no more than 22"),
    ("message.timestamp.type", "createtime", "String must be one of: CreateTime, LogAppendTime"),
    ("message.downconversion.enable", "yes", "Expected value to be either true or false"),
    ("message.format.version", "3.10", "Version 3.10 is not a valid version"),
    ("leader.replication.throttled.replicas", "0-1", "leader.replication.throttled.replicas must be the "
     "literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."),
    ("follower.replication.throttled.replicas", "*,0:1", "must be the literal '*'"),
    ("local.retention.ms", "-3", "Value must be at least -2"),
    ("max.compaction.lag.ms", "0", "Value must be at least 1"),
    ("min.insync.replicas", "0", "Value must be at least 1"),
    ("flush.messages", "0", "Value must be at least 1"),
    ("remote.storage.enable", "true", "Tiered Storage functionality is disabled in the broker. Topic cannot be "
                                      "configured with remote log storage."),
    ("remote.log.copy.disable", "true", "under Zookeeper's mode"),
    ("remote.log.delete.on.disable", "true", "under Zookeeper's mode"),
])
def test_a_bad_value_is_refused_with_kafkas_message(name, value, message):
    assert message in refusal({name: value})


def test_a_null_value_is_refused():
    assert "Invalid value null for configuration retention.ms" in refusal({"retention.ms": None})


def test_compaction_lags_are_checked_against_each_other_and_the_brokers():
    assert refusal({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}) == (
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)")
    broker = BrokerConfig({"log.cleaner.max.compaction.lag.ms": "1000"})
    assert "(2000) > max.compaction.lag.ms (1000)" in refusal({"min.compaction.lag.ms": "2000"}, broker)
    validate_topic_configs({"min.compaction.lag.ms": "2000", "max.compaction.lag.ms": "2000"}, broker)


def test_broker_synonyms_are_checked_as_the_topic_configs_are():
    with pytest.raises(ConfigError, match="Invalid value fast for configuration compression.type"):
        BrokerConfig({"compression.type": "fast"})
    with pytest.raises(ConfigError, match="log.roll.ms: Value must be at least 1"):
        BrokerConfig({"log.roll.ms": "0"})
    assert BrokerConfig({"log.cleanup.policy": "compact , delete"})["log.cleanup.policy"] == "compact,delete"


def test_describe_gives_each_configs_value_source_and_synonyms_in_kafkas_order():
    broker = BrokerConfig({"log.retention.ms": "1000", "log.segment.bytes": "1073741824"})  # the second: its default
    entries = {e.name: e for e in describe({"retention.ms": "5", "cleanup.policy": "compact, delete"}, broker)}
    assert list(entries) == sorted(KAFKA_TOPIC_CONFIGS)

    assert entries["retention.ms"].value == "5" and entries["retention.ms"].source == DYNAMIC_TOPIC_CONFIG
    assert entries["retention.ms"].synonyms == [Synonym("retention.ms", "5", DYNAMIC_TOPIC_CONFIG),
                                                Synonym("log.retention.ms", "1000", STATIC_BROKER_CONFIG),
                                                Synonym("log.retention.ms", "604800000", DEFAULT_CONFIG)]
    assert entries["cleanup.policy"].value == "compact,delete" and entries["cleanup.policy"].type == ConfigType.LIST

    segment = entries["segment.bytes"]  # set in the properties to its default: still the broker's
    assert (segment.value, segment.source) == ("1073741824", STATIC_BROKER_CONFIG)
    assert [s.source for s in segment.synonyms] == [STATIC_BROKER_CONFIG, DEFAULT_CONFIG]

    ratio = entries["min.cleanable.dirty.ratio"]
    assert (ratio.value, ratio.source, ratio.type) == ("0.5", DEFAULT_CONFIG, ConfigType.DOUBLE)
    assert ratio.synonyms == [Synonym("log.cleaner.min.cleanable.ratio", "0.5", DEFAULT_CONFIG)]
    assert (entries["compression.type"].value, entries["preallocate"].value) == ("producer", "false")
    assert entries["segment.ms"].type == ConfigType.LONG and entries["segment.bytes"].type == ConfigType.INT
    assert entries["unclean.leader.election.enable"].type == ConfigType.BOOLEAN

    throttled = entries["leader.replication.throttled.replicas"]  # no broker synonym: a fixed default
    assert (throttled.value, throttled.source, throttled.synonyms) == ("", DEFAULT_CONFIG, [])
    assert entries["remote.storage.enable"].value == "false"
    assert "no effect" in entries["preallocate"].documentation
    assert "no effect" not in entries["segment.ms"].documentation
    assert all(e.documentation for e in entries.values())


def test_timestamp_bounds_fall_back_to_the_deprecated_difference_when_not_set():
    assert timestamp_bounds({}, BROKER) == (2**63 - 1, 3_600_000)
    assert timestamp_bounds({"message.timestamp.difference.max.ms": "60000"}, BROKER) == (60_000, 60_000)
    assert timestamp_bounds({"message.timestamp.difference.max.ms": "60000",
                             "message.timestamp.after.max.ms": "5"}, BROKER) == (60_000, 5)
    broker = BrokerConfig({"log.message.timestamp.difference.max.ms": "7000",
                           "log.message.timestamp.before.max.ms": "9000"})
    assert timestamp_bounds({}, broker) == (9_000, 7_000)


def replica_manager(tmp_path, configs: dict, **settings) -> ReplicaManager:
    manager = ReplicaManager(BrokerConfig({"log.dirs": str(tmp_path), **settings}), 0)
    manager.view = ClusterView(topic_configs={"t": configs})
    return manager


def test_the_broker_applies_a_topics_log_settings(tmp_path):
    manager = replica_manager(tmp_path, {"segment.index.bytes": "4096", "segment.jitter.ms": "100",
                                         "file.delete.delay.ms": "0", "retention.bytes": "77"},
                              **{"log.roll.ms": "5000"})
    config = manager.log_config("t")
    assert (config.segment_index_bytes, config.segment_jitter_ms, config.file_delete_delay_ms) == (4096, 100, 0)
    assert (config.retention_bytes, config.segment_ms) == (77, 5000)
    assert manager.log_config("other").file_delete_delay_ms == 60_000


def test_a_compacted_log_rolls_by_max_compaction_lag(tmp_path):
    manager = replica_manager(tmp_path, {"cleanup.policy": "compact", "max.compaction.lag.ms": "3000",
                                         "segment.ms": "9000"})
    assert manager.log_config("t").segment_ms == 3000
    manager.view = ClusterView(topic_configs={"t": {"cleanup.policy": "delete", "max.compaction.lag.ms": "3000"}})
    assert manager.log_config("t").segment_ms == 604_800_000


def test_produce_validation_takes_compression_and_timestamp_bounds(tmp_path):
    manager = replica_manager(tmp_path, {"compression.type": "zstd", "compression.zstd.level": "7",
                                         "message.timestamp.difference.max.ms": "1000"},
                              **{"compression.type": "gzip"})
    config = manager.validation_config("t")
    assert (config.compression, config.compression_level) == (CODEC_ZSTD, 7)
    assert (config.timestamp_before_max_ms, config.timestamp_after_max_ms) == (1000, 1000)
    other = manager.validation_config("other")  # the broker's compression.type
    assert (other.compression, other.compression_level) == (CODEC_GZIP, -1)
    manager.view = ClusterView(topic_configs={"t": {"compression.type": "producer"}})
    assert manager.validation_config("t").compression is None


def test_a_deleted_topics_settings_are_forgotten(tmp_path):
    """A broker whose topics come and go keeps the settings of the live ones only."""
    manager = replica_manager(tmp_path, {"max.message.bytes": "2000"})
    manager.apply_view(ClusterView(topics={"t": TopicAssignment("t", uuid.uuid4(), {0: (7,)})},
                                   topic_configs={"t": {"max.message.bytes": "2000"}}), 0)
    assert manager.validation_config("t").max_message_bytes == 2000
    manager.apply_view(ClusterView(), 0)
    assert not manager._topic_settings and not manager._validation_configs
