"""A consumer-protocol group's records in `__consumer_offsets`: Kafka's coordinator records
(group-coordinator/src/main/resources/common/message/ConsumerGroup*.json), bit for bit.

A key is an int16 version that names the record type, then its fields (not flexible); a value is
int16 version 0, then its fields in the flexible encoding (compact strings and arrays, uuids,
an empty tagged-field section per struct). A null value is a tombstone.

    key 3 ConsumerGroupMetadata (group)                   value: Epoch int32
    key 4 ConsumerGroupPartitionMetadata (group)          value: Topics [TopicId, TopicName,
                                                                 NumPartitions, PartitionMetadata []]
    key 5 ConsumerGroupMemberMetadata (group, member)     value: InstanceId?, RackId?, ClientId,
                                                                 ClientHost, SubscribedTopicNames [],
                                                                 SubscribedTopicRegex?, RebalanceTimeoutMs,
                                                                 ServerAssignor?
    key 6 ConsumerGroupTargetAssignmentMetadata (group)   value: AssignmentEpoch int32
    key 7 ConsumerGroupTargetAssignmentMember (g, member) value: TopicPartitions [TopicId, Partitions []]
    key 8 ConsumerGroupCurrentMemberAssignment (g, member) value: MemberEpoch, PreviousMemberEpoch,
                                                                 State int8, AssignedPartitions [],
                                                                 PartitionsPendingRevocation []

`group_records` gives a group's whole state as these records (key bytes → value bytes): the
coordinator writes those that changed and tombstones for the keys gone, so compaction keeps
exactly the live ones. `rebuild` makes the group again from the last value of each key.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from weir.groups.consumer_group import ConsumerGroup, ConsumerGroupConfig, ConsumerMember, MemberState, normalized
from weir.groups.records import RecordFormatError, _Reader, _string
from weir.groups.records import read_key as read_classic_key
from weir.protocol.varint import VarintError, read_uvarint, write_uvarint

METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = range(3, 9)
GROUP_KEYS = (METADATA, PARTITION_METADATA, TARGET_METADATA)
MEMBER_KEYS = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """A key of one of the records above; `member_id` is None for a group-wide one."""
    kind: int
    group: str
    member_id: str | None = None


def consumer_key(kind: int, group: str, member_id: str | None = None) -> bytes:
    assert (member_id is not None) == (kind in MEMBER_KEYS), (kind, member_id)
    return struct.pack(">h", kind) + _string(group) + (_string(member_id) if member_id is not None else b"")


def read_key(raw: bytes):
    """An OffsetKey, a GroupKey (classic) or a ConsumerGroupKey."""
    if len(raw) >= 2 and struct.unpack_from(">h", raw)[0] in GROUP_KEYS + MEMBER_KEYS:
        r = _Reader(raw)
        kind = r.int16()
        group = r.string()
        return ConsumerGroupKey(kind, group, r.string() if kind in MEMBER_KEYS else None)
    return read_classic_key(raw)


# -- the flexible encoding ---------------------------------------------------------------------

def _cstr(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    return write_uvarint(len(raw) + 1) + raw


def _carray(items: list[bytes]) -> bytes:
    return write_uvarint(len(items) + 1) + b"".join(items)


NO_TAGS = b"\x00"


def _partitions(assignment) -> bytes:
    return _carray([t.bytes + _carray([struct.pack(">i", p) for p in sorted(ps)]) + NO_TAGS
                    for t, ps in sorted(assignment.items())])


class _Flexible:
    def __init__(self, raw: bytes) -> None:
        self.raw, self.pos = raw, 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.raw):
            raise RecordFormatError("truncated record")
        out = self.raw[self.pos:self.pos + n]
        self.pos += n
        return out

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.raw, self.pos)
        except VarintError:
            raise RecordFormatError("truncated varint") from None
        return value

    def int8(self) -> int:
        return struct.unpack(">b", self._take(1))[0]

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._take(n - 1).decode()

    def array(self, read_item) -> list:
        n = self.uvarint()
        return [] if n == 0 else [read_item() for _ in range(n - 1)]

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())

    def partitions(self) -> dict:
        def topic():
            topic_id, parts = self.uuid(), self.array(self.int32)
            self.tags()
            return topic_id, parts
        return normalized(dict(self.array(topic)))


def _value(body: bytes) -> bytes:
    return struct.pack(">h", 0) + body + NO_TAGS


# -- a group as records ----------------------------------------------------------------------------

def group_records(group: ConsumerGroup) -> dict[bytes, bytes]:
    """The group's whole state, as Kafka's coordinator records it."""
    gid = group.group_id
    out = {consumer_key(METADATA, gid): _value(struct.pack(">i", group.group_epoch)),
           consumer_key(PARTITION_METADATA, gid): _value(_carray([
               topic_id.bytes + _cstr(name) + struct.pack(">i", count) + _carray([]) + NO_TAGS
               for name, (topic_id, count) in sorted(group.metadata.items())])),
           consumer_key(TARGET_METADATA, gid): _value(struct.pack(">i", group.target_epoch))}
    for m in group.members.values():
        out[consumer_key(MEMBER_METADATA, gid, m.member_id)] = _value(
            _cstr(m.instance_id) + _cstr(m.rack_id) + _cstr(m.client_id) + _cstr(m.client_host)
            + _carray([_cstr(t) for t in m.subscribed_topic_names]) + _cstr(m.subscribed_topic_regex)
            + struct.pack(">i", m.rebalance_timeout_ms) + _cstr(m.server_assignor))
        out[consumer_key(TARGET_MEMBER, gid, m.member_id)] = _value(_partitions(group.target.get(m.member_id, {})))
        out[consumer_key(CURRENT_ASSIGNMENT, gid, m.member_id)] = _value(
            struct.pack(">iib", m.member_epoch, m.previous_member_epoch, int(m.state))
            + _partitions(m.assigned) + _partitions(m.pending_revocation))
    return out


def rebuild(group_id: str, values: dict[ConsumerGroupKey, bytes], config: ConsumerGroupConfig, partition: int,
            now_ms: int) -> tuple[ConsumerGroup | None, list[str]]:
    """The group as its last records describe it (None without a metadata record), and what
    could not be taken (unreadable records, a partition claimed twice). Sessions start now."""
    problems: list[str] = []
    metadata = values.get(ConsumerGroupKey(METADATA, group_id))
    if metadata is None:
        return None, problems
    group = ConsumerGroup(group_id, config, partition)
    try:
        group.group_epoch = _read(metadata, lambda r: r.int32())
        partitions_value = values.get(ConsumerGroupKey(PARTITION_METADATA, group_id))
        if partitions_value is not None:
            group.metadata = dict(_read(partitions_value, lambda r: r.array(lambda: _topic_metadata(r))))
        target_value = values.get(ConsumerGroupKey(TARGET_METADATA, group_id))
        group.target_epoch = _read(target_value, lambda r: r.int32()) if target_value is not None else 0
    except (RecordFormatError, UnicodeDecodeError, struct.error) as e:
        return None, [f"group {group_id}: unreadable metadata: {e}"]
    member_ids = {k.member_id for k in values if k.kind == MEMBER_METADATA}
    for member_id in sorted(member_ids):
        try:
            member = _member(member_id, values[ConsumerGroupKey(MEMBER_METADATA, group_id, member_id)])
            target = values.get(ConsumerGroupKey(TARGET_MEMBER, group_id, member_id))
            current = values.get(ConsumerGroupKey(CURRENT_ASSIGNMENT, group_id, member_id))
            assigned, pending = {}, {}
            if current is not None:
                member.member_epoch, member.previous_member_epoch, state, assigned, pending = _read(
                    current, lambda r: (r.int32(), r.int32(), r.int8(), r.partitions(), r.partitions()))
                member.state = MemberState(state) if state in MemberState._value2member_map_ else MemberState.UNKNOWN
        except (RecordFormatError, UnicodeDecodeError, struct.error, KeyError) as e:
            problems.append(f"group {group_id}: member {member_id} unreadable: {e}")
            continue
        claimed = {(t, p) for a in (assigned, pending) for t, ps in a.items() for p in ps}
        taken = claimed & set(group.owners)
        if taken:
            problems.append(f"group {group_id}: member {member_id} claims partitions another member holds: {taken}")
            assigned, pending = {}, {}
        group.members[member_id] = member
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member_id
        group.target[member_id] = _read(target, lambda r: r.partitions()) if target is not None else {}
        group._set_member_assignment(member, assigned, pending)
        member.session_deadline = now_ms + config.session_timeout_ms
    return group, problems


def _read(raw: bytes, read):
    r = _Flexible(raw)
    version = r.int16()
    if version != 0:
        raise RecordFormatError(f"unknown value version {version}")
    value = read(r)
    r.tags()
    return value


def _topic_metadata(r: _Flexible):
    topic_id, name, count = r.uuid(), r.string(), r.int32()

    def partition_racks():
        r.int32()
        r.array(r.string)
        r.tags()
    r.array(partition_racks)
    r.tags()
    return name, (topic_id, count)


def _member(member_id: str, raw: bytes) -> ConsumerMember:
    def read(r: _Flexible) -> ConsumerMember:
        return ConsumerMember(member_id, instance_id=r.string(), rack_id=r.string(), client_id=r.string() or "",
                              client_host=r.string() or "",
                              subscribed_topic_names=tuple(r.array(r.string)), subscribed_topic_regex=r.string(),
                              rebalance_timeout_ms=r.int32(), server_assignor=r.string())
    return _read(raw, read)
