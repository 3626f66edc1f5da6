"""Produce and Fetch responses, encoded by hand into lists of buffers; the Fetch answers a
follower or a reader (weir.spark) gets, decoded by hand.

kio's generic encoder costs tens of microseconds a response, and its decoder copies the
records of every Fetch answer; these are on the hot path, so they are written with
struct. Field layouts follow Kafka's
ProduceResponse.json (v0-v13) and FetchResponse.json (v0-v17): flexible from
Produce v9 / Fetch v12 (compact arrays and strings, tagged sections), topic ids
instead of names from Produce v13 / Fetch v13, KIP-951's CurrentLeader and NodeEndpoints as
tagged fields from Produce v10 / Fetch v16. Fetch record data is not copied:
a `FileRegion` in the buffer list stands for bytes the transport sends from a
segment file.
"""

import struct
import uuid
from dataclasses import dataclass

from weir.protocol.errors import wire_message
from weir.protocol.hot_requests import BodyReader, Malformed
from weir.protocol.varint import write_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PRODUCE_PARTITION = struct.Struct(">ihqqq")  # index, error, base offset, append time, log start
_FETCH_PARTITION_V0 = struct.Struct(">ihq")  # index, error, hw
_FETCH_PARTITION_V4 = struct.Struct(">ihqq")  # index, error, hw, last stable offset
_FETCH_PARTITION = struct.Struct(">ihqqq")  # the same and the log start (v5+), written and read
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_LEADER_AND_EPOCH = struct.Struct(">ii")
_FETCH_TOP = struct.Struct(">ihi")  # throttle, error, session id
_ZERO_UUID = bytes(16)
NO_TAGS = b"\x00"


@dataclass(frozen=True, slots=True)
class FileRegion:
    """`size` bytes at `position` of an open file, sent with sendfile when possible.

    `fd` is an int file descriptor, or an object that is one and keeps it open."""
    fd: int
    position: int
    size: int


@dataclass(slots=True)
class ProducePartitionResult:
    index: int
    error_code: int = 0
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: tuple | list = ()  # (batch index, message) of each refused record (v8+)
    current_leader: tuple[int, int] | None = None  # KIP-951 (v10+): (leader id, leader epoch)


@dataclass(slots=True)
class FetchPartitionResult:
    index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: list = None  # bytes and FileRegion items; None for no data
    aborted_transactions: list | None = None  # (producer id, first offset); None: null (READ_UNCOMMITTED)
    current_leader: tuple[int, int] | None = None  # KIP-951 (v16+): (leader id, leader epoch)


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    """A broker as KIP-951's NodeEndpoints name it, on the client's listener."""
    node_id: int
    host: str
    port: int
    rack: str | None


def _array_len(n: int, flexible: bool) -> bytes:
    return write_uvarint(n + 1) if flexible else _I32.pack(n)


def _string(s: str, flexible: bool) -> bytes:
    raw = s.encode()
    return (write_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def _nullable_string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    return _string(s, flexible)


def _topic_key(name: str, topic_id: uuid.UUID | None, by_id: bool, flexible: bool) -> bytes:
    if not by_id:
        return _string(name, flexible)
    return _ZERO_UUID if topic_id is None else topic_id.bytes  # None: the request's zero UUID


def _current_leader_tag(tag: int, current_leader: tuple[int, int] | None) -> bytes:
    """A partition's tagged section: empty, or the one field CurrentLeader (KIP-951)."""
    if current_leader is None:
        return NO_TAGS
    return b"\x01" + write_uvarint(tag) + b"\x09" + _LEADER_AND_EPOCH.pack(*current_leader) + NO_TAGS


def _node_endpoints_tag(endpoints: list[NodeEndpoint]) -> bytes:
    """The response's tagged section: empty, or NodeEndpoints (tag 0, KIP-951)."""
    if not endpoints:
        return NO_TAGS
    body = [_array_len(len(endpoints), True)]
    for e in endpoints:
        body += [_I32.pack(e.node_id), _string(e.host, True), _I32.pack(e.port), _nullable_string(e.rack, True), NO_TAGS]
    payload = b"".join(body)
    return b"\x01\x00" + write_uvarint(len(payload)) + payload


def encode_produce_response(version: int, topics: list[tuple[str, uuid.UUID, list[ProducePartitionResult]]],
                            throttle_ms: int = 0, node_endpoints: list[NodeEndpoint] = ()) -> bytes:
    flexible = version >= 9
    by_id = version >= 13
    out = [_array_len(len(topics), flexible)]
    for name, topic_id, partitions in topics:
        out.append(_topic_key(name, topic_id, by_id, flexible))
        out.append(_array_len(len(partitions), flexible))
        for p in partitions:
            packed = _PRODUCE_PARTITION.pack(p.index, p.error_code, p.base_offset, p.log_append_time,
                                             p.log_start_offset)
            out.append(packed if version >= 5 else packed[:-8] if version >= 2 else packed[:-16])
            if version >= 8:
                out.append(_array_len(len(p.record_errors), flexible))
                for batch_index, message in p.record_errors:
                    out.append(_I32.pack(batch_index))
                    out.append(_nullable_string(wire_message(message), flexible))
                    if flexible:
                        out.append(NO_TAGS)
                out.append(_nullable_string(wire_message(p.error_message), flexible))
            if flexible:
                out.append(_current_leader_tag(0, p.current_leader if version >= 10 else None))
        if flexible:
            out.append(NO_TAGS)
    if version >= 1:
        out.append(_I32.pack(throttle_ms))
    if flexible:
        out.append(_node_endpoints_tag(node_endpoints if version >= 10 else ()))
    return b"".join(out)


def _aborted(aborted: list | None, flexible: bool) -> bytes:
    """A partition's aborted transactions (v4+): null (READ_UNCOMMITTED) or (producer id, first offset)s."""
    if aborted is None:
        return b"\x00" if flexible else b"\xff\xff\xff\xff"
    out = [_array_len(len(aborted), flexible)]
    for producer_id, first_offset in aborted:
        out.append(_ABORTED.pack(producer_id, first_offset))
        if flexible:
            out.append(NO_TAGS)
    return b"".join(out)


def encode_fetch_response(version: int, error_code: int, session_id: int,
                          topics: list[tuple[str, uuid.UUID, list[FetchPartitionResult]]], throttle_ms: int = 0,
                          node_endpoints: list[NodeEndpoint] = ()) -> list:
    """The body as a list of bytes and FileRegion items (record data is not copied)."""
    flexible = version >= 12
    by_id = version >= 13
    out: list = []
    head = [_FETCH_TOP.pack(throttle_ms, error_code, session_id) if version >= 7 else _I32.pack(throttle_ms)
            if version >= 1 else b""]
    head.append(_array_len(len(topics), flexible))
    for name, topic_id, partitions in topics:
        head.append(_topic_key(name, topic_id, by_id, flexible))
        head.append(_array_len(len(partitions), flexible))
        for p in partitions:
            if version >= 5:
                head.append(_FETCH_PARTITION.pack(p.index, p.error_code, p.high_watermark, p.last_stable_offset,
                                                  p.log_start_offset))
            elif version == 4:
                head.append(_FETCH_PARTITION_V4.pack(p.index, p.error_code, p.high_watermark, p.last_stable_offset))
            else:  # before v4: no last stable offset, no aborted transactions
                head.append(_FETCH_PARTITION_V0.pack(p.index, p.error_code, p.high_watermark))
            if version >= 4:
                head.append(_aborted(p.aborted_transactions, flexible))
            if version >= 11:
                head.append(b"\xff\xff\xff\xff")  # preferred_read_replica -1
            records = p.records or []
            size = sum(len(r) if isinstance(r, (bytes, bytearray, memoryview)) else r.size for r in records)
            if flexible:
                head.append(write_uvarint(size + 1))
            else:
                head.append(_I32.pack(size))
            if records:
                out.append(b"".join(head))
                out.extend(records)
                head = []
            if flexible:
                head.append(_current_leader_tag(1, p.current_leader if version >= 16 else None))
        if flexible:
            head.append(NO_TAGS)
    if flexible:
        head.append(_node_endpoints_tag(node_endpoints if version >= 16 else ()))
    out.append(b"".join(head))
    return out


def with_throttle_time(api_key: int, version: int, body, throttle_ms: int):
    """A Produce (bytes) or Fetch (buffers) body encoded above, with another throttle_time_ms:
    Produce ends with it (and, flexible, the empty tagged fields), Fetch starts with it."""
    if api_key == 0:
        end = len(body) - (5 if version >= 9 else 4)
        return body[:end] + _I32.pack(throttle_ms) + body[end + 4:]
    assert api_key == 1 and isinstance(body[0], bytes), "a Fetch body starts with its throttle time"
    return [_I32.pack(throttle_ms) + body[0][4:], *body[1:]]


@dataclass(slots=True)
class FetchedPartition:
    partition_index: int
    error_code: int
    high_watermark: int
    log_start_offset: int  # -1 before v5
    records: memoryview | None  # a view of the answer's frame, not a copy
    aborted: list[tuple[int, int]] | None  # (producer id, first offset); None: null (READ_UNCOMMITTED)


@dataclass(slots=True)
class FetchAnswer:
    error_code: int
    session_id: int
    topics: list[tuple[uuid.UUID | str | None, list[FetchedPartition]]]  # by topic id from v13, by name before


def decode_fetch_response(version: int, frame) -> FetchAnswer:
    """A Fetch answer of v4-v17 as a follower or a consumer reads it: its error, session id and
    per topic (its id from v13, its name before) its partitions, their records a view of `frame`.
    `frame` starts at the response header (correlation id, and from v12 a tagged section). The
    last stable offset and preferred read replica are skipped, and so are tagged fields (the
    diverging epoch: Weir's followers truncate by OffsetsForLeaderEpoch). Malformed if the bytes
    are not such an answer."""
    try:
        return _read_fetch_answer(BodyReader(frame, 4, version >= 12), version)
    except (struct.error, IndexError) as e:
        raise Malformed(f"a cut Fetch answer: {e}") from None


def _read_fetch_answer(r: BodyReader, version: int) -> FetchAnswer:
    r.tags()  # response header v1, flexible versions only
    if version >= 7:
        _throttle, error_code, session_id = r.unpack(_FETCH_TOP)
    else:
        r.unpack(_I32)  # throttle
        error_code = session_id = 0
    topics = []
    for _ in range(r.array_len()):
        topic = r.uuid() if version >= 13 else r.string()
        partitions = []
        for _ in range(r.array_len()):
            if version >= 5:
                index, error, high_watermark, _lso, log_start = r.unpack(_FETCH_PARTITION)
            else:
                index, error, high_watermark, _lso = r.unpack(_FETCH_PARTITION_V4)
                log_start = -1
            aborted = None
            count = r.nullable_array_len()
            if count >= 0:
                aborted = []
                for _ in range(count):
                    aborted.append(r.unpack(_ABORTED))
                    r.tags()
            if version >= 11:
                r.unpack(_I32)  # preferred read replica
            partitions.append(FetchedPartition(index, error, high_watermark, log_start, r.nullable_view(), aborted))
            r.tags()
        r.tags()
        topics.append((topic, partitions))
    r.tags()
    if r.pos != len(r.buf):
        raise Malformed(f"{len(r.buf) - r.pos} bytes after the Fetch answer")
    return FetchAnswer(error_code, session_id, topics)
