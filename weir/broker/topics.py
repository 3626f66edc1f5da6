"""Topic names: what is legal. (Topic configs: weir.broker.topic_configs.)"""

import re

from ..protocol.errors import ErrorCode, KafkaError

# written by the group and transaction coordinators alone
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
MAX_NAME_LENGTH = 249


def validate_topic_name(name: str | None) -> None:
    if not name or name in (".", "..") or len(name) > MAX_NAME_LENGTH or not _LEGAL_NAME.fullmatch(name):
        raise KafkaError(ErrorCode.invalid_topic_exception,
                         f"illegal topic name {name!r}: use 1-249 of [a-zA-Z0-9._-], not '.' or '..'")

