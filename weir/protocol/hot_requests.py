"""Produce and Fetch requests, decoded by hand; the follower's Fetch request, encoded by hand.

kio's generic path (a schema walk to check the framing, then its reader building frozen
dataclasses) cost more than the handlers themselves on the replication hot path: every
follower fetch and every produce goes through here. The decoded requests have kio's field
names and value types (timedeltas, None for a zero topic id), so the handlers read either.
Record data stays opaque bytes, a Produce's a view of the request's (the validator makes the
one copy the log appends). Field layouts follow Kafka's ProduceRequest.json (v0-v13) and
FetchRequest.json (v0-v17): a transactional id from Produce v3, a response size limit from Fetch
v3 and the isolation level from v4, flexible from Produce v9 / Fetch v12 (compact arrays and strings,
tagged sections), topic ids instead of names from Produce v13 / Fetch v13, the replica's id and
epoch in tagged field 1 from Fetch v15 (KIP-903). Unknown tagged fields are skipped.
"""

import datetime
import functools
import struct
import uuid
from dataclasses import dataclass

from weir.protocol.varint import read_uvarint, write_uvarint

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_REPLICA_STATE = struct.Struct(">iq")
_ACKS_TIMEOUT = struct.Struct(">hi")
_WAIT_MIN_MAX = struct.Struct(">iii")  # max wait ms, min bytes, max bytes
_WAIT_MIN = struct.Struct(">ii")  # before Fetch v3
NO_RESPONSE_LIMIT = 2**31 - 1  # the max bytes of a Fetch before v3 (Kafka: Integer.MAX_VALUE)
_SESSION = struct.Struct(">ii")  # session id, session epoch
_ZERO_UUID = bytes(16)
NO_TAGS = b"\x00"


class Malformed(ValueError):
    """The bytes are not a message of this version (for a request, the codec answers MalformedRequest)."""


@dataclass(frozen=True, slots=True)
class ReplicaState:
    replica_id: int = -1
    replica_epoch: int = -1


NO_REPLICA_STATE = ReplicaState()  # a consumer's (frozen: one object serves every request)


@dataclass(slots=True)
class FetchPartition:
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


@dataclass(slots=True)
class FetchTopic:
    topic: str | None
    topic_id: uuid.UUID | None
    partitions: list[FetchPartition]


@dataclass(slots=True)
class ForgottenTopic:
    topic: str | None
    topic_id: uuid.UUID | None
    partitions: list[int]


@dataclass(slots=True)
class FetchRequest:
    replica_id: int
    max_wait: datetime.timedelta
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: list[FetchTopic]
    forgotten_topics_data: list[ForgottenTopic]
    rack_id: str
    cluster_id: str | None = None
    replica_state: ReplicaState = NO_REPLICA_STATE


@dataclass(slots=True)
class PartitionProduceData:
    index: int
    records: memoryview | None


@dataclass(slots=True)
class TopicProduceData:
    name: str | None
    topic_id: uuid.UUID | None
    partition_data: list[PartitionProduceData]


@dataclass(slots=True)
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout: datetime.timedelta
    topic_data: list[TopicProduceData]


def _fetch_partition_struct(version: int) -> struct.Struct:
    """partition, [current leader epoch v9+], fetch offset, [last fetched epoch v12+],
    [log start offset v5+], partition max bytes."""
    return struct.Struct(">i" + ("i" if version >= 9 else "") + "q" + ("i" if version >= 12 else "")
                         + ("q" if version >= 5 else "") + "i")


_FETCH_PARTITION = {v: _fetch_partition_struct(v) for v in range(0, 18)}


@functools.lru_cache(maxsize=4096)
def _topic_id(raw: bytes) -> uuid.UUID:
    """The same few topic ids arrive in every request: build each UUID once."""
    return uuid.UUID(bytes=raw)


class BodyReader:
    """Reads one message body: flexible versions use compact lengths and tagged sections."""

    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, pos: int, flexible: bool) -> None:
        self.buf, self.pos, self.flexible = buf, pos, flexible

    def unpack(self, fmt: struct.Struct) -> tuple:
        values = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return values

    def i32(self) -> int:
        return self.unpack(_I32)[0]

    def uvarint(self) -> int:
        byte = self.buf[self.pos]
        if byte < 0x80:  # the usual one-byte varint, without the general loop
            self.pos += 1
            return byte
        value, self.pos = read_uvarint(self.buf, self.pos)
        return value

    def _length(self, wide: struct.Struct, units: str) -> int:
        """A length or count of `units` (-1: null), checked against the bytes left (an array's
        every element takes at least one)."""
        n = self.uvarint() - 1 if self.flexible else self.unpack(wide)[0]
        if n < -1 or n > len(self.buf) - self.pos:
            raise Malformed(f"a field at byte {self.pos} claims {n} {units} but only {len(self.buf) - self.pos} "
                            "bytes are left")
        return n

    def array_len(self) -> int:
        n = self.nullable_array_len()
        if n < 0:
            raise Malformed("an array that cannot be null is null")
        return n

    def nullable_array_len(self) -> int:
        """An array's length, -1 if it is null."""
        return self._length(_I32, "elements")

    def raw(self, n: int) -> bytes:
        start = self.pos
        self.pos += n
        return self.buf[start:self.pos]

    def nullable_string(self) -> str | None:
        n = self._length(_I16, "bytes")
        return None if n < 0 else str(self.raw(n), "utf-8")

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise Malformed("a string that cannot be null is null")
        return s

    def nullable_view(self) -> memoryview | None:
        """Nullable bytes, not copied: a view of the message's bytes. A large frame's buffer is
        reused once no view of it is left (weir.transport.frame_receiver): hold the view, not a pointer."""
        n = self._length(_I32, "bytes")
        if n < 0:
            return None
        start = self.pos
        self.pos += n
        return memoryview(self.buf)[start:self.pos]

    def uuid(self) -> uuid.UUID | None:
        raw = self.raw(16)
        if len(raw) < 16:
            raise Malformed("truncated uuid")
        return None if raw == _ZERO_UUID else _topic_id(bytes(raw))

    def tags(self) -> dict[int, bytes]:
        """A tagged section (flexible versions): tag → payload."""
        if not self.flexible:
            return {}
        if self.buf[self.pos] == 0:  # the usual empty section
            self.pos += 1
            return {}
        tags = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            if size > len(self.buf) - self.pos:
                raise Malformed("tagged field runs past the end of the request")
            tags[tag] = self.raw(size)
        return tags


def decode_produce_request(version: int, buf: bytes, offset: int) -> ProduceRequest:
    r = BodyReader(buf, offset, version >= 9)
    by_id = version >= 13
    transactional_id = r.nullable_string() if version >= 3 else None
    acks, timeout_ms = r.unpack(_ACKS_TIMEOUT)
    topics = []
    for _ in range(r.array_len()):
        name, topic_id = (None, r.uuid()) if by_id else (r.string(), None)
        partitions = []
        for _ in range(r.array_len()):
            index = r.i32()
            partitions.append(PartitionProduceData(index, r.nullable_view()))  # the validator copies it once
            r.tags()
        r.tags()
        topics.append(TopicProduceData(name, topic_id, partitions))
    r.tags()
    return ProduceRequest(transactional_id, acks, datetime.timedelta(milliseconds=timeout_ms), topics)



def decode_fetch_request(version: int, buf: bytes, offset: int) -> FetchRequest:
    r = BodyReader(buf, offset, version >= 12)
    by_id = version >= 13
    replica_id = r.i32() if version < 15 else -1
    if version >= 3:
        max_wait_ms, min_bytes, max_bytes = r.unpack(_WAIT_MIN_MAX)
    else:
        (max_wait_ms, min_bytes), max_bytes = r.unpack(_WAIT_MIN), NO_RESPONSE_LIMIT
    isolation_level = r.unpack(_I8)[0] if version >= 4 else 0
    session_id, session_epoch = r.unpack(_SESSION) if version >= 7 else (0, -1)
    partition_struct = _FETCH_PARTITION[version]
    topics = []
    for _ in range(r.array_len()):
        name, topic_id = (None, r.uuid()) if by_id else (r.string(), None)
        partitions = []
        for _ in range(r.array_len()):
            values = r.unpack(partition_struct)
            r.tags()  # replica_directory_id (v17, tag 0): not used
            partitions.append(_fetch_partition(version, values))
        r.tags()
        topics.append(FetchTopic(name, topic_id, partitions))
    forgotten = []
    if version >= 7:
        for _ in range(r.array_len()):
            name, topic_id = (None, r.uuid()) if by_id else (r.string(), None)
            forgotten.append(ForgottenTopic(name, topic_id, [r.i32() for _ in range(r.array_len())]))
            r.tags()
    rack_id = r.string() if version >= 11 else ""
    request = FetchRequest(replica_id, datetime.timedelta(milliseconds=max_wait_ms), min_bytes, max_bytes,
                           isolation_level, session_id, session_epoch, topics, forgotten, rack_id)
    tags = r.tags()
    if 0 in tags:
        request.cluster_id = BodyReader(tags[0], 0, True).nullable_string()
    if 1 in tags and version >= 15:
        if len(tags[1]) < _REPLICA_STATE.size:
            raise Malformed("truncated replica state")
        request.replica_state = ReplicaState(*_REPLICA_STATE.unpack_from(tags[1], 0))
    return request



def _fetch_partition(version: int, values: tuple) -> FetchPartition:
    """The partition fields in FetchRequest.json's order, kio's defaults for the absent ones."""
    if version >= 12:
        return FetchPartition(*values)
    if version >= 9:
        partition, epoch, fetch_offset, log_start, max_bytes = values
        return FetchPartition(partition, epoch, fetch_offset, -1, log_start, max_bytes)
    if version >= 5:
        partition, fetch_offset, log_start, max_bytes = values
        return FetchPartition(partition, -1, fetch_offset, -1, log_start, max_bytes)
    partition, fetch_offset, max_bytes = values
    return FetchPartition(partition, -1, fetch_offset, -1, -1, max_bytes)


def encode_follower_fetch_request(version: int, replica_id: int, replica_epoch: int, max_wait_ms: int,
                                  min_bytes: int, max_bytes: int,
                                  topics: list[tuple[uuid.UUID, list[tuple[int, int, int, int, int]]]],
                                  session_id: int = 0, session_epoch: int = -1,
                                  forgotten: list[tuple[uuid.UUID, list[int]]] = ()) -> bytes:
    """The body of a follower's Fetch (v15-v17: by topic id, the replica state tagged),
    READ_UNCOMMITTED; per topic id its partitions as (partition, current leader epoch, fetch
    offset, log start offset, partition max bytes); in fetch session `session_id` (KIP-227) at
    `session_epoch`, per topic id the partitions it forgets."""
    assert version >= 15, "a follower sends its broker epoch (KIP-903)"
    partition_struct = _FETCH_PARTITION[version]
    out = [_WAIT_MIN_MAX.pack(max_wait_ms, min_bytes, max_bytes), _I8.pack(0), _SESSION.pack(session_id, session_epoch),
           write_uvarint(len(topics) + 1)]
    for topic_id, partitions in topics:
        out.append(topic_id.bytes)
        out.append(write_uvarint(len(partitions) + 1))
        for partition, leader_epoch, fetch_offset, log_start_offset, partition_max_bytes in partitions:
            out.append(partition_struct.pack(partition, leader_epoch, fetch_offset, -1, log_start_offset,
                                             partition_max_bytes))
            out.append(NO_TAGS)
        out.append(NO_TAGS)
    out.append(write_uvarint(len(forgotten) + 1))
    for topic_id, partitions in forgotten:
        out.append(topic_id.bytes)
        out.append(write_uvarint(len(partitions) + 1))
        out.extend(_I32.pack(p) for p in partitions)
        out.append(NO_TAGS)
    out.append(write_uvarint(1))  # rack_id: ""
    state = _REPLICA_STATE.pack(replica_id, replica_epoch) + NO_TAGS
    out.append(b"\x01\x01" + write_uvarint(len(state)) + state)  # one tagged field: 1, replica_state
    return b"".join(out)
