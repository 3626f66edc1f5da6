"""What the group coordinator keeps in `__consumer_offsets`: Kafka's own record formats.

Every record is a key and a value, each starting with an int16 schema version; strings are
int16-length-prefixed UTF-8 (-1: null), bytes int32-length-prefixed. A null value is a tombstone:
the key's offset or group is gone. The formats are Kafka's (`GroupMetadataManager`), so Kafka's
tools can read a Weir offsets topic, and the versions we write are the ones every Kafka since 2.3
reads:

    offset commit key   v1: group string, topic string, partition int32
    offset commit value v3: offset int64, leader_epoch int32, metadata string, commit_timestamp int64
    group metadata key  v2: group string
    group metadata value v3: protocol_type string, generation int32, protocol string?, leader string?,
                            current_state_timestamp int64, members [member_id string,
                            group_instance_id string?, client_id string, client_host string,
                            rebalance_timeout int32, session_timeout int32, subscription bytes,
                            assignment bytes]

Reading also accepts offset values v0-v2 and group values v0-v2 (older Kafkas wrote them).

The records travel in ordinary magic-v2 record batches, uncompressed, with no producer id
(`encode_batch`); `decode_batches` reads back (offset, key, value) from the bytes of a log
read, skipping batches it cannot read (compressed, or a control batch) with a count the caller
logs.

Transactional offset commits (TxnOffsetCommit, KIP-98) travel as Kafka writes them: a batch
with the TRANSACTIONAL attribute, the producer's id and epoch and base sequence 0 (the
coordinator's appends are not sequence-checked), completed later by the transaction marker the
coordinator of the transaction has the leader append (a control batch). `read_offsets_log` reads
both back in log order, for the loader to replay.
"""

import struct
from dataclasses import dataclass

from crc32c import crc32c

from weir.protocol.record_batch import (CODEC_MASK, CONTROL_BIT, CRC_START, HEADER_SIZE, LOG_OVERHEAD,
                                        TRANSACTIONAL_BIT, read_batch_header)
from weir.protocol.records import encode_batch as encode_batch_of
from weir.protocol.varint import VarintError, read_varlong

OFFSET_KEY_VERSION = 1
OFFSET_VALUE_VERSION = 3
GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3


class RecordFormatError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # only in value v1, which older clients' retention_time produced


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberRecord, ...]


# -- primitive writers and a reader ---------------------------------------------------

def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _bytes(value: bytes | None) -> bytes:
    if value is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(value)) + bytes(value)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _unpack(self, fmt: str):
        try:
            values = struct.unpack_from(fmt, self.buf, self.pos)
        except struct.error as e:
            raise RecordFormatError(f"truncated record: {e}") from None
        self.pos += struct.calcsize(fmt)
        return values[0]

    def int16(self) -> int:
        return self._unpack(">h")

    def int32(self) -> int:
        return self._unpack(">i")

    def int64(self) -> int:
        return self._unpack(">q")

    def _raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise RecordFormatError("truncated record")
        raw = self.buf[self.pos:self.pos + n]
        self.pos += n
        return bytes(raw)

    def string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self._raw(n).decode()

    def bytes(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else self._raw(n)


# -- keys and values -----------------------------------------------------------------

def offset_key(group: str, topic: str, partition: int) -> bytes:
    return struct.pack(">h", OFFSET_KEY_VERSION) + _string(group) + _string(topic) + struct.pack(">i", partition)


def offset_value(value: OffsetValue) -> bytes:
    """Value v3; v1 for an offset with its own expire timestamp, the only version that holds one
    (Kafka's GroupMetadataManager.offsetCommitValue drops the leader epoch the same way)."""
    if value.expire_timestamp != -1:
        return (struct.pack(">hq", 1, value.offset) + _string(value.metadata)
                + struct.pack(">qq", value.commit_timestamp, value.expire_timestamp))
    return (struct.pack(">hqi", OFFSET_VALUE_VERSION, value.offset, value.leader_epoch) + _string(value.metadata)
            + struct.pack(">q", value.commit_timestamp))


def group_key(group: str) -> bytes:
    return struct.pack(">h", GROUP_KEY_VERSION) + _string(group)


def group_value(value: GroupValue) -> bytes:
    out = [struct.pack(">h", GROUP_VALUE_VERSION), _string(value.protocol_type), struct.pack(">i", value.generation),
           _string(value.protocol), _string(value.leader), struct.pack(">q", value.current_state_timestamp),
           struct.pack(">i", len(value.members))]
    for m in value.members:
        out += [_string(m.member_id), _string(m.group_instance_id), _string(m.client_id), _string(m.client_host),
                struct.pack(">ii", m.rebalance_timeout_ms, m.session_timeout_ms), _bytes(m.subscription),
                _bytes(m.assignment)]
    return b"".join(out)


def read_key(raw: bytes) -> OffsetKey | GroupKey:
    r = _Reader(raw)
    version = r.int16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.int32())
    if version == 2:
        return GroupKey(r.string())
    raise RecordFormatError(f"unknown key version {version}")


def read_offset_value(raw: bytes) -> OffsetValue:
    r = _Reader(raw)
    version = r.int16()
    if version in (0, 1):
        offset, metadata, commit_ts = r.int64(), r.string(), r.int64()
        expire = r.int64() if version == 1 else -1
        return OffsetValue(offset, -1, metadata or "", commit_ts, expire)
    if version in (2, 3):
        offset = r.int64()
        epoch = r.int32() if version == 3 else -1
        return OffsetValue(offset, epoch, r.string() or "", r.int64())
    raise RecordFormatError(f"unknown offset value version {version}")


def read_group_value(raw: bytes) -> GroupValue:
    r = _Reader(raw)
    version = r.int16()
    if version > 3 or version < 0:
        raise RecordFormatError(f"unknown group value version {version}")
    protocol_type, generation, protocol, leader = r.string() or "", r.int32(), r.string(), r.string()
    state_ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.int32()):
        member_id = r.string()
        instance_id = r.string() if version >= 3 else None
        client_id, client_host = r.string(), r.string()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(MemberRecord(member_id, instance_id, client_id or "", client_host or "", rebalance_timeout,
                                    session_timeout, r.bytes() or b"", r.bytes() or b""))
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


# -- record batches ----------------------------------------------------------------------

def _read_varint(buf, pos: int) -> tuple[int, int]:
    try:
        return read_varlong(buf, pos)
    except VarintError:
        raise RecordFormatError("truncated varint") from None


ATTRIBUTES_AT = 21
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")
CRC_AT = 17


def encode_batch(records: list[tuple[bytes, bytes | None]], timestamp_ms: int) -> bytes:
    """One uncompressed magic-v2 batch of (key, value) records, base offset 0 (the log assigns it)."""
    return encode_batch_of([value for _, value in records], keys=[key for key, _ in records], timestamp=timestamp_ms)


def encode_transactional_batch(records: list[tuple[bytes, bytes | None]], timestamp_ms: int, producer_id: int,
                               producer_epoch: int) -> bytes:
    """A TxnOffsetCommit's batch as Kafka's GroupMetadataManager writes it: TRANSACTIONAL, the
    producer's id and epoch, base sequence 0."""
    assert producer_id >= 0 and producer_epoch >= 0, (producer_id, producer_epoch)
    batch = bytearray(encode_batch_of([value for _, value in records], keys=[key for key, _ in records],
                                      timestamp=timestamp_ms, producer_id=producer_id, producer_epoch=producer_epoch,
                                      base_sequence=0))
    _ATTRIBUTES.pack_into(batch, ATTRIBUTES_AT, TRANSACTIONAL_BIT)
    _CRC.pack_into(batch, CRC_AT, crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


@dataclass(frozen=True)
class LoggedRecord:
    """A record of `__consumer_offsets`; `producer_id` is set for a transactional one."""
    offset: int
    key: bytes
    value: bytes | None
    producer_id: int | None = None


@dataclass(frozen=True)
class LoggedMarker:
    """A transaction marker: the producer's pending transactional records are committed or dropped."""
    offset: int
    producer_id: int
    committed: bool


def read_offsets_log(data: bytes) -> tuple[list[LoggedRecord | LoggedMarker], int, int]:
    """Every record and transaction marker of the whole batches at the start of `data`, in log
    order; also the offset after the last whole batch (-1 if none) and how many batches were
    skipped (compressed: the coordinators never write those; a control batch the cleaner emptied)."""
    from weir.transactions.markers import MarkerFormatError, read_marker  # groups sit below transactions
    out: list[LoggedRecord | LoggedMarker] = []
    pos = 0
    next_offset = -1
    skipped = 0
    while len(data) - pos >= HEADER_SIZE:
        header = read_batch_header(data, pos)
        end = pos + header.length
        if header.length < HEADER_SIZE or end > len(data):
            break
        next_offset = header.last_offset + 1
        if header.attributes & CONTROL_BIT:
            try:
                marker = read_marker(memoryview(data)[pos:end])
            except MarkerFormatError:
                marker = None
            if marker is None:
                skipped += 1
            else:
                out.append(LoggedMarker(header.base_offset, header.producer_id, not marker.is_abort))
        elif header.attributes & CODEC_MASK:
            skipped += 1
        else:
            records, _, _ = decode_batches(data[pos:end])
            producer_id = header.producer_id if header.attributes & TRANSACTIONAL_BIT else None
            out.extend(LoggedRecord(offset, key, value, producer_id) for offset, key, value in records)
        pos = end
    return out, next_offset, skipped


def decode_batches(data: bytes) -> tuple[list[tuple[int, bytes, bytes | None]], int, int]:
    """(offset, key, value) of every record in whole batches at the start of `data`; also the
    offset after the last whole batch read (-1 if none) and how many batches were skipped."""
    out = []
    pos = 0
    next_offset = -1
    skipped = 0
    while len(data) - pos >= HEADER_SIZE:
        base, length = struct.unpack_from(">qi", data, pos)
        end = pos + LOG_OVERHEAD + length
        if end > len(data):
            break
        attributes, last_delta = struct.unpack_from(">hi", data, pos + 21)
        count, = struct.unpack_from(">i", data, pos + 57)
        next_offset = base + last_delta + 1
        if attributes & (CODEC_MASK | CONTROL_BIT):
            skipped += 1
            pos = end
            continue
        rpos = pos + HEADER_SIZE
        for _ in range(count):
            size, rpos = _read_varint(data, rpos)
            record_end = rpos + size
            rpos += 1  # attributes
            _ts, rpos = _read_varint(data, rpos)
            delta, rpos = _read_varint(data, rpos)
            key_len, rpos = _read_varint(data, rpos)
            key = bytes(data[rpos:rpos + key_len]) if key_len >= 0 else b""
            rpos += max(key_len, 0)
            value_len, rpos = _read_varint(data, rpos)
            value = bytes(data[rpos:rpos + value_len]) if value_len >= 0 else None
            rpos = record_end
            out.append((base + delta, key, value))
        pos = end
    return out, next_offset, skipped
