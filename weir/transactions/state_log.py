"""What the transaction coordinator keeps in `__transaction_state`: Kafka's own record formats.

Rules this module owns (Kafka's `TransactionLog`, `TransactionLogKey.json`,
`TransactionLogValue.json`; KIP-98, KIP-915 for the flexible value version):

- One record per transactional id and change. The key and the value each start with an int16
  schema version. A null value is a tombstone: the transactional id expired
  (transactional.id.expiration.ms) and is forgotten; compaction removes its records.
- Key version 0: transactional_id string (int16-length-prefixed UTF-8). The only version.
- Value version 0 (not flexible), what Kafka 0.11-3.x writes, and what we write by default:

      producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
      transaction_status int8, transaction_partitions [topic string, partition_ids [int32]] (nullable),
      transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms int64

  Arrays are int32-count-prefixed (-1: null).
- Value version 1 (flexible; Kafka writes it once transaction.version >= 1, KIP-890): the same
  fields with compact strings and arrays (unsigned varint length + 1; 0: null), a tagged-field
  section after each partitions entry and after the value, and three tagged fields written only
  when they differ from their default: previous_producer_id int64 (tag 0, default -1),
  next_producer_id int64 (tag 1, default -1), client_transaction_version int16 (tag 2,
  default 0). Tagged fields we do not know (later Kafkas add some) are kept as raw bytes, so a
  value read and written again is unchanged.
- transaction_status is Kafka's `TransactionState` id (`TransactionState` below). An Empty
  transaction is written with null partitions; every other state with the partitions grouped by
  topic (we write topics and partition ids sorted: Kafka's order is a hash set's, readers must
  not depend on it). PrepareEpochFence and Dead are never written: the first is only ever a
  pending state, the second becomes a tombstone.

Reading ignores bytes after the last field, as Kafka's generated readers do.

The records travel in ordinary uncompressed magic-v2 batches with no producer id, as the group
coordinator's do (`weir.groups.records.encode_batch` / `decode_batches`, re-exported here).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from weir.groups.records import decode_batches, encode_batch
from weir.protocol.varint import VarintError, read_uvarint, write_uvarint

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "RecordFormatError",
    "TransactionState",
    "TxnLogValue",
    "UnknownKeyVersion",
    "decode_batches",
    "encode_batch",
    "key_bytes",
    "read_key",
    "read_value",
    "value_bytes",
]

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSIONS = (0, 1)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

TAG_PREVIOUS_PRODUCER_ID = 0
TAG_NEXT_PRODUCER_ID = 1
TAG_CLIENT_TRANSACTION_VERSION = 2


class TransactionState(enum.IntEnum):
    """Kafka's TransactionState and its ids in transaction_status."""
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use ("PrepareCommit", ...)."""
        return "".join(word.capitalize() for word in self.name.split("_"))


class RecordFormatError(ValueError):
    pass


class UnknownKeyVersion(RecordFormatError):
    """A key version this coordinator does not know: Kafka's loader skips such records with a
    warning (a left-over of an aborted upgrade)."""

    def __init__(self, version: int) -> None:
        super().__init__(f"unknown __transaction_state key version {version}")
        self.version = version


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: TransactionState
    # ((topic, (partition, ...)), ...); None only for Empty (Kafka writes null there)
    transaction_partitions: tuple[tuple[str, tuple[int, ...]], ...] | None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    previous_producer_id: int = NO_PRODUCER_ID  # tagged, v1+
    next_producer_id: int = NO_PRODUCER_ID  # tagged, v1+
    client_transaction_version: int = 0  # tagged, v1+
    unknown_tagged_fields: tuple[tuple[int, bytes], ...] = ()  # v1+: kept as read

    def partitions(self) -> frozenset[tuple[str, int]]:
        return frozenset((topic, p) for topic, ids in self.transaction_partitions or () for p in ids)


def grouped_partitions(partitions) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Topic partitions as transaction_partitions: grouped by topic, sorted."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return tuple((topic, tuple(sorted(by_topic[topic]))) for topic in sorted(by_topic))


# -- writing -----------------------------------------------------------------------------

def _legacy_string(value: str) -> bytes:
    raw = value.encode()
    assert len(raw) <= 0x7FFF, "string too long for an int16 length"
    return struct.pack(">h", len(raw)) + raw


def _compact_string(value: str) -> bytes:
    raw = value.encode()
    return write_uvarint(len(raw) + 1) + raw


def key_bytes(transactional_id: str) -> bytes:
    """TransactionLogKey v0, version-prefixed, as Kafka's `TransactionLog.keyToBytes`."""
    return struct.pack(">h", KEY_VERSION) + _legacy_string(transactional_id)


def value_bytes(value: TxnLogValue | None, version: int = 0) -> bytes | None:
    """TransactionLogValue `version`, version-prefixed (None: the tombstone, None)."""
    if value is None:
        return None
    assert version in VALUE_VERSIONS, version
    status = TransactionState(value.transaction_status)
    assert status not in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE), \
        f"{status.kafka_name} is never written to the transaction log"
    assert status != TransactionState.EMPTY or not value.transaction_partitions, \
        "an Empty transaction has no partitions"
    flexible = version >= 1
    out = [struct.pack(">hqhib", version, value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
                       int(status))]
    partitions = value.transaction_partitions
    if partitions is None:
        out.append(write_uvarint(0) if flexible else struct.pack(">i", -1))
    else:
        out.append(write_uvarint(len(partitions) + 1) if flexible else struct.pack(">i", len(partitions)))
        for topic, ids in partitions:
            if flexible:
                out += [_compact_string(topic), write_uvarint(len(ids) + 1), struct.pack(f">{len(ids)}i", *ids),
                        write_uvarint(0)]
            else:
                out += [_legacy_string(topic), struct.pack(f">i{len(ids)}i", len(ids), *ids)]
    out.append(struct.pack(">qq", value.transaction_last_update_timestamp_ms, value.transaction_start_timestamp_ms))
    if flexible:
        out.append(_tagged_fields(value))
    else:
        assert not value.unknown_tagged_fields, "tagged fields need value version 1"
    return b"".join(out)


def _tagged_fields(value: TxnLogValue) -> bytes:
    fields: dict[int, bytes] = dict(value.unknown_tagged_fields)
    if value.previous_producer_id != NO_PRODUCER_ID:
        fields[TAG_PREVIOUS_PRODUCER_ID] = struct.pack(">q", value.previous_producer_id)
    if value.next_producer_id != NO_PRODUCER_ID:
        fields[TAG_NEXT_PRODUCER_ID] = struct.pack(">q", value.next_producer_id)
    if value.client_transaction_version != 0:
        fields[TAG_CLIENT_TRANSACTION_VERSION] = struct.pack(">h", value.client_transaction_version)
    out = [write_uvarint(len(fields))]
    for tag in sorted(fields):  # Kafka writes tagged fields in ascending tag order
        out += [write_uvarint(tag), write_uvarint(len(fields[tag])), fields[tag]]
    return b"".join(out)


# -- reading -----------------------------------------------------------------------------

class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def unpack(self, fmt: str):
        try:
            values = struct.unpack_from(fmt, self.buf, self.pos)
        except struct.error as e:
            raise RecordFormatError(f"truncated record: {e}") from None
        self.pos += struct.calcsize(fmt)
        return values if len(values) > 1 else values[0]

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise RecordFormatError("truncated record")
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.buf, self.pos)
        except VarintError as e:
            raise RecordFormatError(str(e)) from None
        return value

    def legacy_string(self) -> str:
        n = self.unpack(">h")
        if n < 0:
            raise RecordFormatError("null string in a non-nullable field")
        return self.raw(n).decode()

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise RecordFormatError("null string in a non-nullable field")
        return self.raw(n).decode()

    def array_length(self, flexible: bool) -> int:
        """-1: null."""
        return self.uvarint() - 1 if flexible else self.unpack(">i")

    def tagged_fields(self) -> dict[int, bytes]:
        fields = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self.raw(self.uvarint())
        return fields


def read_key(raw: bytes) -> str:
    """The transactional id of a TransactionLogKey; UnknownKeyVersion for other versions."""
    r = _Reader(raw)
    version = r.unpack(">h")
    if version != KEY_VERSION:
        raise UnknownKeyVersion(version)
    return r.legacy_string()


def read_value(raw: bytes | None) -> TxnLogValue | None:
    """A TransactionLogValue v0 or v1; None for a tombstone."""
    if raw is None:
        return None
    r = _Reader(raw)
    version = r.unpack(">h")
    if version not in VALUE_VERSIONS:
        raise RecordFormatError(f"unknown __transaction_state value version {version}")
    flexible = version >= 1
    producer_id, producer_epoch, timeout_ms, status_id = r.unpack(">qhib")
    try:
        status = TransactionState(status_id)
    except ValueError:
        raise RecordFormatError(f"unknown transaction state id {status_id}") from None
    count = r.array_length(flexible)
    partitions = None
    if count >= 0:
        entries = []
        for _ in range(count):
            topic = r.compact_string() if flexible else r.legacy_string()
            n = r.array_length(flexible)
            if n < 0:
                raise RecordFormatError("null partition_ids")
            ids = r.unpack(f">{n}i") if n else ()
            ids = (ids,) if isinstance(ids, int) else tuple(ids)
            if flexible:
                r.tagged_fields()  # PartitionsSchema has no tagged fields of its own yet
            entries.append((topic, ids))
        partitions = tuple(entries)
    last_update, start = r.unpack(">qq")
    previous_pid = next_pid = NO_PRODUCER_ID
    client_version = 0
    unknown: tuple[tuple[int, bytes], ...] = ()
    if flexible:
        fields = r.tagged_fields()
        if TAG_PREVIOUS_PRODUCER_ID in fields:
            previous_pid = _tagged(fields.pop(TAG_PREVIOUS_PRODUCER_ID), ">q")
        if TAG_NEXT_PRODUCER_ID in fields:
            next_pid = _tagged(fields.pop(TAG_NEXT_PRODUCER_ID), ">q")
        if TAG_CLIENT_TRANSACTION_VERSION in fields:
            client_version = _tagged(fields.pop(TAG_CLIENT_TRANSACTION_VERSION), ">h")
        unknown = tuple(sorted(fields.items()))
    return TxnLogValue(producer_id, producer_epoch, timeout_ms, status, partitions, last_update, start,
                       previous_pid, next_pid, client_version, unknown)


def _tagged(raw: bytes, fmt: str) -> int:
    if len(raw) != struct.calcsize(fmt):
        raise RecordFormatError(f"tagged field of {len(raw)} bytes, expected {struct.calcsize(fmt)}")
    return struct.unpack(fmt, raw)[0]
