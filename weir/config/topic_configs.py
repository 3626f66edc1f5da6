"""Every topic config Kafka 3.9 defines (its LogConfig), in one table: the type, the broker
setting it overrides, how a value is checked, and what it means. CreateTopics, AlterConfigs and
IncrementalAlterConfigs check values here; DescribeConfigs describes from here; the broker reads
each topic's settings from here.

Rules, Kafka's:
- A topic config's value is the first of: the topic's override (stored in ZooKeeper); the broker
  setting it overrides, its synonym: this broker's dynamic value (DYNAMIC_BROKER_CONFIG), the
  cluster's (DYNAMIC_DEFAULT_BROKER_CONFIG), the properties' (STATIC_BROKER_CONFIG), its default
  (DEFAULT_CONFIG). A config with no broker synonym (the throttled-replica
  lists, remote.storage.enable, remote.log.*: Kafka's CONFIGS_WITH_NO_SERVER_DEFAULTS) has a
  fixed default instead.
- Values are text parsed by Kafka's ConfigDef types (BOOLEAN, STRING, INT, LONG, DOUBLE, LIST),
  then checked by the config's validator; a bad one is refused with INVALID_CONFIG and Kafka's
  message, "Invalid value V for configuration N: why". Broker synonyms set in the properties are
  checked the same way at start-up.
- Whole-config rules, checked on the topic's overrides over the broker's values:
  min.compaction.lag.ms <= max.compaction.lag.ms; remote.storage.enable=true is refused (Weir has
  no tiered storage, as a Kafka broker without remote log storage refuses it); and, as Kafka in
  ZooKeeper mode, remote.log.copy.disable and remote.log.delete.on.disable may not be true.
- message.timestamp.before.max.ms and message.timestamp.after.max.ms fall back to the deprecated
  message.timestamp.difference.max.ms when they are not set, on the topic or in the broker's
  properties, and it is (KIP-937, Kafka 3.6+).

Configs marked `applied=False` are accepted, checked and described, and change nothing in Weir;
their documentation says so.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from enum import IntEnum
from typing import Callable, Mapping, NamedTuple

from weir.config.settings import DEFAULT_CONFIG, SETTINGS, ConfigError
from weir.protocol.compression import CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD
from weir.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

MAX_INT, MIN_INT = 2**31 - 1, -2**31
MAX_LONG, MIN_LONG = 2**63 - 1, -2**63

# DescribeConfigs' config_source values (KIP-226)
DYNAMIC_TOPIC_CONFIG = 1  # and the broker's sources, weir.config.settings


class ConfigType(IntEnum):
    """Kafka's ConfigDef types, numbered as DescribeConfigs' config_type (KIP-569)."""
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


# -- validators: each returns why a parsed value is wrong, or None ------------------------------------

def at_least(low):
    return lambda value: None if value >= low else f"Value must be at least {low}"


def between(low, high):
    def check(value):
        if value < low:
            return f"Value must be at least {low}"
        if value > high:
            return f"Value must be no more than {high}"
        return None
    return check


def one_of(*choices: str):
    return lambda value: None if value in choices else f"String must be one of: {', '.join(choices)}"


def list_of(*choices: str):
    return lambda value: next((f"String must be one of: {', '.join(choices)}"
                               for item in _items(value) if item not in choices), None)


def _gzip_level(value: int):
    return None if 1 <= value <= 9 or value == -1 else "Value must be between 1 and 9 or equal to -1"


_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled_replicas(name: str):
    def check(value: str):
        items = _items(value)
        if "".join(items) == "*" or all(_REPLICA.fullmatch(item) for item in items):
            return None
        return (f"{name} must be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return check


# Kafka's MetadataVersion strings: each ibpVersion, and each production release (3.9 the latest).
_RELEASES = ["0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "1.0", "1.1", "2.0",
             "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "3.0", "3.1", "3.2", "3.3", "3.4", "3.5",
             "3.6", "3.7", "3.8", "3.9"]
_SUB_VERSIONS = {"0.10.0": 2, "0.10.1": 3, "0.10.2": 1, "0.11.0": 3, "1.0": 1, "1.1": 1, "2.0": 2, "2.1": 3,
                 "2.2": 2, "2.3": 2, "2.4": 2, "2.5": 1, "2.6": 1, "2.7": 3, "2.8": 2, "3.0": 2, "3.1": 1,
                 "3.2": 1, "3.3": 4, "3.4": 1, "3.5": 3, "3.6": 3, "3.7": 5, "3.8": 1, "3.9": 1, "4.0": 2}
METADATA_VERSIONS = frozenset(_RELEASES) | {f"{release}-IV{i}" for release, n in _SUB_VERSIONS.items()
                                             for i in range(n)}


def _metadata_version(value: str):
    """Kafka's MetadataVersion.fromVersionString: 0.x versions keep three parts, others two
    ('2.8.1' is 2.8)."""
    parts = value.split(".")
    keep = 3 if value.startswith("0.") else 2
    key = value if keep >= len(parts) else ".".join(parts[:keep])
    return None if key in METADATA_VERSIONS else f"Version {value} is not a valid version"


def _anything(value):
    return None


# -- the table ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    synonym: str | None  # the broker setting this config overrides (Kafka's first synonym)
    doc: str
    check: Callable[[object], str | None] = _anything
    default: object = None  # the value when there is no synonym
    applied: bool = True  # False: accepted, checked and described, no effect in Weir

    @property
    def documentation(self) -> str:
        return self.doc if self.applied else f"{self.doc} Weir: accepted, no effect."


_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
CODECS = {"uncompressed": CODEC_NONE, "gzip": CODEC_GZIP, "snappy": CODEC_SNAPPY, "lz4": CODEC_LZ4,
          "zstd": CODEC_ZSTD, "producer": None}  # compression.type → the codec batches are stored in

_T = ConfigType
TOPIC_CONFIG_DEFS = {d.name: d for d in [
    TopicConfigDef("cleanup.policy", _T.LIST, "log.cleanup.policy",
                   "What happens to old segments: 'delete' removes them by retention.ms and retention.bytes; "
                   "'compact' keeps the latest record of each key (the log cleaner); both may be given.",
                   list_of("compact", "delete")),
    TopicConfigDef("compression.gzip.level", _T.INT, "compression.gzip.level",
                   "The gzip level the leader compresses with when compression.type is gzip: 1-9, or -1 for "
                   "gzip's default.", _gzip_level),
    TopicConfigDef("compression.lz4.level", _T.INT, "compression.lz4.level",
                   "The lz4 level the leader compresses with when compression.type is lz4: 1-17; 9 is lz4's "
                   "fast mode.", between(1, 17)),
    TopicConfigDef("compression.type", _T.STRING, "compression.type",
                   "The codec batches are stored in: 'producer' keeps the producer's; a codec (uncompressed, "
                   "gzip, snappy, lz4, zstd) makes the leader recompress batches that arrive in another one.",
                   one_of(*_COMPRESSION_TYPES)),
    TopicConfigDef("compression.zstd.level", _T.INT, "compression.zstd.level",
                   "The zstd level the leader compresses with when compression.type is zstd.",
                   between(-131072, 22)),
    TopicConfigDef("delete.retention.ms", _T.LONG, "log.cleaner.delete.retention.ms",
                   "How long a tombstone stays in a compacted log after its segment was last written, so that "
                   "a consumer reading from the start sees the delete.", at_least(0)),
    TopicConfigDef("file.delete.delay.ms", _T.LONG, "log.segment.delete.delay.ms",
                   "How long a segment removed by retention or DeleteRecords stays on disk, renamed *.deleted, "
                   "before its files are deleted.", at_least(0)),
    TopicConfigDef("flush.messages", _T.LONG, "log.flush.interval.messages",
                   "fsync the log once this many records were appended since the last fsync.", at_least(1)),
    TopicConfigDef("flush.ms", _T.LONG, "log.flush.interval.ms",
                   "fsync the log once its unflushed data is this old.", at_least(0)),
    TopicConfigDef("follower.replication.throttled.replicas", _T.LIST, None,
                   "Replicas whose replication is throttled on the follower: '*' or "
                   "[partitionId]:[brokerId],... (replication quotas).",
                   _throttled_replicas("follower.replication.throttled.replicas"), ""),
    TopicConfigDef("index.interval.bytes", _T.INT, "log.index.interval.bytes",
                   "Bytes of log between two entries of a segment's offset index.", at_least(0)),
    TopicConfigDef("leader.replication.throttled.replicas", _T.LIST, None,
                   "Replicas whose replication is throttled on the leader: '*' or "
                   "[partitionId]:[brokerId],... (replication quotas).",
                   _throttled_replicas("leader.replication.throttled.replicas"), ""),
    TopicConfigDef("local.retention.bytes", _T.LONG, "log.local.retention.bytes",
                   "Tiered storage: bytes kept on local disk; -2 means retention.bytes.", at_least(-2),
                   applied=False),
    TopicConfigDef("local.retention.ms", _T.LONG, "log.local.retention.ms",
                   "Tiered storage: how long segments stay on local disk; -2 means retention.ms.", at_least(-2),
                   applied=False),
    TopicConfigDef("max.compaction.lag.ms", _T.LONG, "log.cleaner.max.compaction.lag.ms",
                   "A compacted log whose oldest uncleaned record is older than this is cleaned whatever its "
                   "dirty ratio, and its active segment rolls at this age.", at_least(1)),
    TopicConfigDef("max.message.bytes", _T.INT, "message.max.bytes",
                   "Largest record batch the topic accepts, after the broker's compression.", at_least(0)),
    TopicConfigDef("message.downconversion.enable", _T.BOOLEAN, "log.message.downconversion.enable",
                   "Convert batches to an old message format for old consumers (Fetch v0-v3)."),
    TopicConfigDef("message.format.version", _T.STRING, "log.message.format.version",
                   "Deprecated: the message format of the topic, ignored since inter-broker protocol 3.0.",
                   _metadata_version, applied=False),
    TopicConfigDef("message.timestamp.after.max.ms", _T.LONG, "log.message.timestamp.after.max.ms",
                   "CreateTime: refuse records whose timestamp is further than this ahead of the broker's clock.",
                   at_least(0)),
    TopicConfigDef("message.timestamp.before.max.ms", _T.LONG, "log.message.timestamp.before.max.ms",
                   "CreateTime: refuse records whose timestamp is further than this behind the broker's clock.",
                   at_least(0)),
    TopicConfigDef("message.timestamp.difference.max.ms", _T.LONG, "log.message.timestamp.difference.max.ms",
                   "Deprecated: the bound message.timestamp.before.max.ms and message.timestamp.after.max.ms "
                   "take when they are not set.", at_least(0)),
    TopicConfigDef("message.timestamp.type", _T.STRING, "log.message.timestamp.type",
                   "CreateTime: records keep the producer's timestamps; LogAppendTime: the leader's clock.",
                   one_of("CreateTime", "LogAppendTime")),
    TopicConfigDef("min.cleanable.dirty.ratio", _T.DOUBLE, "log.cleaner.min.cleanable.ratio",
                   "A compacted log is cleaned once this share of its cleanable bytes is new since its last "
                   "cleaning.", between(0, 1)),
    TopicConfigDef("min.compaction.lag.ms", _T.LONG, "log.cleaner.min.compaction.lag.ms",
                   "A record stays uncompacted at least this long: segments holding a newer record are not "
                   "cleaned.", at_least(0)),
    TopicConfigDef("min.insync.replicas", _T.INT, "min.insync.replicas",
                   "Replicas that must be in sync for a produce with acks=all to succeed.", at_least(1)),
    TopicConfigDef("preallocate", _T.BOOLEAN, "log.preallocate",
                   "Create segment files at their full size.", applied=False),
    TopicConfigDef("remote.log.copy.disable", _T.BOOLEAN, None,
                   "Tiered storage: stop copying segments to remote storage.", default=False, applied=False),
    TopicConfigDef("remote.log.delete.on.disable", _T.BOOLEAN, None,
                   "Tiered storage: delete the remote data when remote storage is turned off.", default=False,
                   applied=False),
    TopicConfigDef("remote.storage.enable", _T.BOOLEAN, None,
                   "Tiered storage: copy segments to remote storage. Weir has none: true is refused.",
                   default=False),
    TopicConfigDef("retention.bytes", _T.LONG, "log.retention.bytes",
                   "Delete the oldest segments while a partition is larger than this (-1: no limit)."),
    TopicConfigDef("retention.ms", _T.LONG, "log.retention.ms",
                   "Delete segments whose newest record is older than this (-1: no limit).", at_least(-1)),
    TopicConfigDef("segment.bytes", _T.INT, "log.segment.bytes",
                   "Roll a new segment when the active one would grow past this size.", at_least(14)),
    TopicConfigDef("segment.index.bytes", _T.INT, "log.index.size.max.bytes",
                   "Largest offset index of a segment: a segment whose index is full is rolled.", at_least(4)),
    TopicConfigDef("segment.jitter.ms", _T.LONG, "log.roll.jitter.ms",
                   "A random time up to this, drawn for each segment, is taken off segment.ms, so that "
                   "partitions do not all roll at once.", at_least(0)),
    TopicConfigDef("segment.ms", _T.LONG, "log.roll.ms",
                   "Roll a new segment once the active one's first record is this old.", at_least(1)),
    TopicConfigDef("unclean.leader.election.enable", _T.BOOLEAN, "unclean.leader.election.enable",
                   "Elect a replica that is not in sync when no in-sync replica is left, losing records."),
]}
LIST_CONFIGS = frozenset(name for name, d in TOPIC_CONFIG_DEFS.items() if d.type == ConfigType.LIST)


# -- parsing -------------------------------------------------------------------------------------------

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_COMMA = re.compile(r"\s*,\s*")
_INTEGER_RANGES = {ConfigType.SHORT: (-2**15, 2**15 - 1), ConfigType.INT: (MIN_INT, MAX_INT),
                   ConfigType.LONG: (MIN_LONG, MAX_LONG)}


def _items(value: str) -> list[str]:
    return [] if not value else value.split(",")


def invalid(name: str, raw, why: str) -> ConfigError:
    return ConfigError(f"Invalid value {raw} for configuration {name}: {why}")


def parse_typed(name: str, config_type: ConfigType, raw: str | None, check=_anything):
    """Kafka's ConfigDef.parseType then the validator: text to a bool, int, float or str (a LIST
    becomes its items joined by ',' without spaces); ConfigError with Kafka's message if it is
    not one."""
    if raw is None:
        raise invalid(name, "null", "Value must be non-null")
    text = raw.strip()
    if config_type == ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise invalid(name, raw, "Expected value to be either true or false")
        value = text.lower() == "true"
    elif config_type in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[config_type]
        if not _INTEGER.fullmatch(text) or not low <= int(text) <= high:
            raise invalid(name, raw, f"Not a number of type {config_type.name}")
        value = int(text)
    elif config_type == ConfigType.DOUBLE:
        if not _DECIMAL.fullmatch(text):
            raise invalid(name, raw, "Not a number of type DOUBLE")
        value = float(text)
    elif config_type == ConfigType.LIST:
        value = ",".join(_COMMA.split(text)) if text else ""
    else:
        value = text
    why = check(value)
    if why is not None:
        raise invalid(name, raw, why)
    return value


def parse(name: str, raw: str | None):
    """The value of topic config `name` from its text; ConfigError if it is not a legal one."""
    definition = TOPIC_CONFIG_DEFS.get(name)
    if definition is None:
        raise ConfigError(f"Unknown topic config name: {name}")
    return parse_typed(name, definition.type, raw, definition.check)


def format_value(value) -> str:
    """A value as DescribeConfigs shows it (Kafka's ConfigDef.convertToString)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


BROKER_SYNONYMS = {d.synonym: d for d in TOPIC_CONFIG_DEFS.values() if d.synonym is not None}


def parse_broker_synonym(setting: str, raw: str):
    """A broker setting that a topic config overrides, checked as the topic config is."""
    definition = BROKER_SYNONYMS[setting]
    return parse_typed(setting, definition.type, raw, definition.check)


# -- a topic's values -------------------------------------------------------------------------------

class Resolved(NamedTuple):
    value: object
    source: int  # DYNAMIC_TOPIC_CONFIG, or where the broker setting it falls back to comes from


def resolve(name: str, overrides: Mapping[str, str], broker) -> Resolved:
    """Topic config `name` of a topic with `overrides`, on a broker with config `broker` (a
    BrokerConfig). An override that does not parse (written by another tool) is ignored."""
    definition = TOPIC_CONFIG_DEFS[name]
    raw = overrides.get(name)
    if raw is not None:
        try:
            return Resolved(parse(name, raw), DYNAMIC_TOPIC_CONFIG)
        except ConfigError as e:
            log.warning("ignoring a topic's %s: %s", name, e)
    if definition.synonym is None:
        return Resolved(definition.default, DEFAULT_CONFIG)
    return Resolved(broker[definition.synonym], broker.source(definition.synonym))


def effective(overrides: Mapping[str, str], broker) -> dict[str, object]:
    """Every topic config's value for a topic with `overrides`."""
    return {name: resolve(name, overrides, broker).value for name in TOPIC_CONFIG_DEFS}


def timestamp_bounds(overrides: Mapping[str, str], broker) -> tuple[int, int]:
    """(before, after): message.timestamp.before.max.ms and message.timestamp.after.max.ms, each
    falling back to message.timestamp.difference.max.ms when it is not set and that is (KIP-937)."""
    difference = resolve("message.timestamp.difference.max.ms", overrides, broker)
    bounds = []
    for name in ("message.timestamp.before.max.ms", "message.timestamp.after.max.ms"):
        own = resolve(name, overrides, broker)
        bounds.append(difference.value if own.source == DEFAULT_CONFIG and difference.source != DEFAULT_CONFIG
                      else own.value)
    return bounds[0], bounds[1]


def compression_level(codec: int | None, settings: Mapping[str, object]) -> int | None:
    """The level the leader compresses with in `codec` (compression.<codec>.level), if it has one."""
    name = {CODEC_GZIP: "compression.gzip.level", CODEC_LZ4: "compression.lz4.level",
            CODEC_ZSTD: "compression.zstd.level"}.get(codec)
    return None if name is None else settings[name]


class Synonym(NamedTuple):
    name: str
    value: str
    source: int


def broker_synonyms(setting: str, broker) -> list[Synonym]:
    """Where a broker setting is set, the one that counts first (this broker's dynamic config, the
    cluster's, the properties, the default)."""
    return [Synonym(setting, format_value(value), source) for value, source in broker.layers(setting)]


class ConfigEntry(NamedTuple):
    name: str
    value: str
    source: int
    synonyms: list[Synonym]  # in Kafka's order: the topic's, the broker's properties', the default
    type: ConfigType
    documentation: str


def describe(overrides: Mapping[str, str], broker) -> list[ConfigEntry]:
    """DescribeConfigs of a topic: every topic config, as Kafka's ConfigHelper answers in ZooKeeper
    mode: the topic's override, else the broker's setting (a dynamic broker config, per broker or
    cluster-wide, KIP-226, before server.properties), else the default, with those as synonyms."""
    entries = []
    for name, definition in TOPIC_CONFIG_DEFS.items():
        value, source = resolve(name, overrides, broker)
        synonyms = []
        if source == DYNAMIC_TOPIC_CONFIG:
            synonyms.append(Synonym(name, format_value(value), DYNAMIC_TOPIC_CONFIG))
        if definition.synonym is not None:
            synonyms += broker_synonyms(definition.synonym, broker)
        entries.append(ConfigEntry(name, format_value(value), source, synonyms, definition.type,
                                   definition.documentation))
    return entries


# -- checking a topic's overrides -------------------------------------------------------------------

def validate_topic_configs(overrides: Mapping[str, str], broker=None) -> None:
    """Check a topic's whole set of overrides, as CreateTopics and AlterConfigs must before they are
    stored: names, values, and the rules across configs (checked with the broker's values for what
    the topic does not set, when `broker` is given). KafkaError(INVALID_CONFIG) if one is wrong."""
    try:
        values = {name: parse(name, raw) for name, raw in overrides.items()}
        if broker is not None:
            values = {**effective({}, broker), **values}
        _check_across(values)
    except ConfigError as e:
        raise KafkaError(ErrorCode.invalid_config, str(e)) from None


def _check_across(values: Mapping[str, object]) -> None:
    min_lag, max_lag = values.get("min.compaction.lag.ms"), values.get("max.compaction.lag.ms")
    if min_lag is not None and max_lag is not None and min_lag > max_lag:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
                          f"max.compaction.lag.ms ({max_lag})")
    if values.get("remote.storage.enable"):
        raise ConfigError("Tiered Storage functionality is disabled in the broker. "
                          "Topic cannot be configured with remote log storage.")
    if values.get("remote.log.copy.disable") or values.get("remote.log.delete.on.disable"):
        raise ConfigError("It is invalid to set `remote.log.delete.on.disable` or `remote.log.copy.disable` "
                          "under Zookeeper's mode.")


def _check_table() -> None:
    assert list(TOPIC_CONFIG_DEFS) == sorted(TOPIC_CONFIG_DEFS), "listed by name, as DescribeConfigs answers"
    for definition in TOPIC_CONFIG_DEFS.values():
        if definition.synonym is None:
            assert definition.check(definition.default) is None, definition.name
        else:
            setting = SETTINGS[definition.synonym]  # every synonym is a broker setting
            assert definition.check(setting.default) is None, definition.name


_check_table()
