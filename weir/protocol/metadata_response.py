"""Metadata responses (v0-v13), encoded by hand, a topic at a time.

A Metadata answer names every partition a client asks for, often all of them: through kio's
generic encoder a cluster of 10,000 partitions took the broker's loop a tenth of a second per
answer. Here a topic's part is bytes of its own, which the broker keeps until that topic (or the
set of live brokers) changes, and an answer is the topics' bytes joined.

Field layouts follow Kafka's MetadataResponse.json: rack and controller id and is_internal from
v1, cluster id from v2, throttle time from v3, offline replicas from v5, leader epoch from v7,
authorized operations from v8 (the cluster's up to v10), flexible (compact arrays and strings,
tagged sections) from v9, topic ids from v10, a nullable topic name from v12, a top-level error
from v13.
"""

from __future__ import annotations

import struct
import uuid
from typing import Iterable, NamedTuple

from weir.protocol.hot_responses import NO_TAGS, _array_len, _nullable_string, _string

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">hii")  # error code, index, leader
FLEXIBLE_FROM = 9


class PartitionEntry(NamedTuple):
    error_code: int
    index: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...] | list[int]
    isr: tuple[int, ...] | list[int]
    offline: tuple[int, ...] | list[int]


class BrokerEntry(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


def _ints(values, flexible: bool) -> bytes:
    return _array_len(len(values), flexible) + b"".join(_I32.pack(v) for v in values)


def encode_topic(version: int, error_code: int, name: str | None, topic_id: uuid.UUID | None, is_internal: bool,
                 partitions: Iterable[PartitionEntry], authorized_operations: int) -> bytes:
    """One entry of the answer's topics array."""
    flexible = version >= FLEXIBLE_FROM
    out = [_I16.pack(error_code),
           _nullable_string(name, flexible) if version >= 12 else _string(name or "", flexible)]
    if version >= 10:
        out.append((topic_id or uuid.UUID(int=0)).bytes)
    if version >= 1:
        out.append(b"\x01" if is_internal else b"\x00")
    partitions = list(partitions)
    out.append(_array_len(len(partitions), flexible))
    for p in partitions:
        out.append(_PARTITION_HEAD.pack(p.error_code, p.index, p.leader))
        if version >= 7:
            out.append(_I32.pack(p.leader_epoch))
        out.append(_ints(p.replicas, flexible))
        out.append(_ints(p.isr, flexible))
        if version >= 5:
            out.append(_ints(p.offline, flexible))
        if flexible:
            out.append(NO_TAGS)
    if version >= 8:
        out.append(_I32.pack(authorized_operations))
    if flexible:
        out.append(NO_TAGS)
    return b"".join(out)


def encode_metadata_response(version: int, brokers: Iterable[BrokerEntry], cluster_id: str | None,
                             controller_id: int, topics: list[bytes], cluster_authorized_operations: int,
                             throttle_time_ms: int = 0, error_code: int = 0) -> bytes:
    """The body of an answer whose topics are `topics` (each `encode_topic`'s, for this version)."""
    flexible = version >= FLEXIBLE_FROM
    out = [_I32.pack(throttle_time_ms)] if version >= 3 else []
    brokers = list(brokers)
    out.append(_array_len(len(brokers), flexible))
    for b in brokers:
        out += [_I32.pack(b.node_id), _string(b.host, flexible), _I32.pack(b.port)]
        if version >= 1:
            out.append(_nullable_string(b.rack, flexible))
        if flexible:
            out.append(NO_TAGS)
    if version >= 2:
        out.append(_nullable_string(cluster_id, flexible))
    if version >= 1:
        out.append(_I32.pack(controller_id))
    out.append(_array_len(len(topics), flexible))
    out += topics
    if 8 <= version <= 10:
        out.append(_I32.pack(cluster_authorized_operations))
    if version >= 13:
        out.append(_I16.pack(error_code))
    if flexible:
        out.append(NO_TAGS)
    return b"".join(out)
