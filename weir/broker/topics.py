"""Topic names: what is legal. (Topic configs: weir.config.topic_configs.)"""

import re
from typing import Iterable

from weir.groups.placement import OFFSETS_TOPIC
from weir.protocol.errors import ErrorCode, KafkaError
from weir.transactions.state_log import TRANSACTION_STATE_TOPIC

# written by the group and transaction coordinators alone
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
MAX_NAME_LENGTH = 249


def validate_topic_name(name: str | None) -> None:
    if not name or name in (".", "..") or len(name) > MAX_NAME_LENGTH or not _LEGAL_NAME.fullmatch(name):
        raise KafkaError(ErrorCode.invalid_topic_exception,
                         f"illegal topic name {name!r}: use 1-249 of [a-zA-Z0-9._-], not '.' or '..'")



def check_no_collision(name: str, existing: Iterable[str]) -> None:
    """Kafka's rule (AdminZkClient.validateTopicCreate, Topic.hasCollision): a name with '.' or '_'
    may not equal an existing topic's once every '.' is read as '_' ('a.b' and 'a_b'), as their
    metric names would be the same; INVALID_TOPIC_EXCEPTION, Kafka's message."""
    if "." not in name and "_" not in name:
        return
    key = name.replace(".", "_")
    colliding = [other for other in existing if other != name and other.replace(".", "_") == key]
    if colliding:
        raise KafkaError(ErrorCode.invalid_topic_exception,
                         f"Topic '{name}' collides with existing topics: {', '.join(sorted(colliding))}")
