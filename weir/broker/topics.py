"""Topic names and topic configs: what is legal, and which broker setting each config overrides."""

import re

from ..config import ConfigError, parse_setting
from ..protocol.errors import ErrorCode, KafkaError

# topic config name → broker setting it overrides (Kafka's names)
TOPIC_CONFIGS = {
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "cleanup.policy": "log.cleanup.policy",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
}
INTERNAL_TOPICS = frozenset({"__consumer_offsets"})  # written by the group coordinator alone
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
MAX_NAME_LENGTH = 249


def validate_topic_name(name: str | None) -> None:
    if not name or name in (".", "..") or len(name) > MAX_NAME_LENGTH or not _LEGAL_NAME.fullmatch(name):
        raise KafkaError(ErrorCode.invalid_topic_exception,
                         f"illegal topic name {name!r}: use 1-249 of [a-zA-Z0-9._-], not '.' or '..'")


def validate_topic_configs(configs: dict[str, str]) -> None:
    for name, value in configs.items():
        if name not in TOPIC_CONFIGS:
            raise KafkaError(ErrorCode.invalid_config, f"unknown topic config {name!r}")
        broker_name = TOPIC_CONFIGS[name]
        try:
            parse_setting(broker_name, value or "")
        except ConfigError as e:
            raise KafkaError(ErrorCode.invalid_config, f"{name}: {e}") from None
        if name == "min.cleanable.dirty.ratio" and not 0 <= float(value) <= 1:
            raise KafkaError(ErrorCode.invalid_config, "min.cleanable.dirty.ratio must be between 0 and 1")
        if name == "delete.retention.ms" and int(value) < 0:
            raise KafkaError(ErrorCode.invalid_config, "delete.retention.ms must be at least 0")
        if name == "min.insync.replicas" and int(value) < 1:
            raise KafkaError(ErrorCode.invalid_config, "min.insync.replicas must be at least 1")
        if name.startswith("message.timestamp.") and name.endswith(".max.ms") and int(value) < 0:
            raise KafkaError(ErrorCode.invalid_config, f"{name} must be at least 0")
