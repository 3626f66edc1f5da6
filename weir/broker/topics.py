"""The topic table of a broker: names, ids, partition counts and topic configs.

A single broker keeps it in `<log.dirs>/topics.json` (written atomically);
the replicated cluster moves it to ZooKeeper. Topic configs use Kafka's topic
names; each overrides the broker setting it shadows.
"""

import json
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..protocol.errors import ErrorCode, KafkaError

# topic config name → broker setting it overrides
TOPIC_CONFIGS = {
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "max.message.bytes": "message.max.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "cleanup.policy": None,  # only "delete" is implemented
}
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
        if name == "cleanup.policy":
            if value != "delete":
                raise KafkaError(ErrorCode.invalid_config, "cleanup.policy: only 'delete' is supported")
            continue
        try:
            int(value)
        except (TypeError, ValueError):
            raise KafkaError(ErrorCode.invalid_config, f"{name}: {value!r} is not an integer") from None


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


class TopicTable:
    def __init__(self, path: Path) -> None:
        self._path = path
        self.by_name: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        if path.exists():
            for entry in json.loads(path.read_text()):
                self._add(Topic(entry["name"], uuid.UUID(entry["id"]), entry["partitions"], entry["configs"]))

    def _add(self, topic: Topic) -> None:
        self.by_name[topic.name] = topic
        self.by_id[topic.topic_id] = topic

    def create(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        assert name not in self.by_name
        topic = Topic(name, uuid.uuid4(), partitions, dict(configs))
        self._add(topic)
        self._save()
        return topic

    def add_partitions(self, topic: Topic, count: int) -> None:
        assert count > topic.partitions
        topic.partitions = count
        self._save()

    def delete(self, topic: Topic) -> None:
        del self.by_name[topic.name]
        del self.by_id[topic.topic_id]
        self._save()

    def _save(self) -> None:
        entries = [{"name": t.name, "id": str(t.topic_id), "partitions": t.partitions, "configs": t.configs}
                   for t in self.by_name.values()]
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(entries, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
