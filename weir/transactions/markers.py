"""Transaction markers (KIP-98): the control batches that end a transaction on a partition.

Rules this module owns (Kafka's `EndTransactionMarker`, `ControlRecordType` and
`MemoryRecords.writeEndTransactionalMarker`; names are Kafka's):

- A marker is a magic-v2 batch of its own, written by the partition leader when the transaction
  coordinator sends WriteTxnMarkers: attributes CONTROL_BIT | TRANSACTIONAL_BIT (uncompressed,
  CreateTime), the transaction's producer id and producer epoch, base sequence -1 (NO_SEQUENCE),
  base and max timestamp the marker's timestamp, one record (offset delta 0, timestamp delta 0,
  no headers).
- The record's key is the ControlRecordType key: version int16 (0), type int16. ABORT is 0,
  COMMIT is 1 (Kafka 0.11 onwards; KRaft's control types 2.. never appear in a partition's
  data log and are refused here).
- The record's value is the EndTxnMarker: version int16 (0), coordinator_epoch int32. As Kafka,
  reading accepts a newer version (read as version 0: the fields it knows come first) and
  refuses a negative one or a value shorter than 6 bytes.
- A control batch that holds no record was emptied by the log cleaner (the transaction's data is
  gone): it ends nothing (`read_marker` answers None).

Theory of operation: pure byte functions. The coordinator core (`coordinator.MarkersToSend`)
decides which partitions get a marker; the partition leader encodes it with `marker_batch` at its
log end offset, and `partition_txns` reads it back (`read_marker`) from every control batch that
is appended, replicated or replayed.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from crc32c import crc32c

from weir.protocol import varint
from weir.protocol.record_batch import (CONTROL_BIT, CRC_START, MAGIC, TRANSACTIONAL_BIT, read_batch_header,
                                        records_section)
from weir.protocol.records import encode_record

NO_SEQUENCE = -1
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
CONTROL_KEY = struct.Struct(">hh")  # version, type
END_TXN_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator_epoch
MARKER_ATTRIBUTES = CONTROL_BIT | TRANSACTIONAL_BIT


class MarkerFormatError(ValueError):
    """Bytes that are not a transaction marker Kafka would write or read."""


class ControlRecordType(enum.IntEnum):
    """Kafka's ControlRecordType ids; only ABORT and COMMIT end transactions."""
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """Kafka's EndTransactionMarker: the outcome and the coordinator epoch that decided it."""
    control_type: ControlRecordType
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type == ControlRecordType.ABORT


def marker_of(committed: bool, coordinator_epoch: int) -> EndTxnMarker:
    """The marker for WriteTxnMarkers' `committed` (the coordinator's TransactionResult: ABORT 0,
    COMMIT 1, the same ids as ControlRecordType's)."""
    return EndTxnMarker(ControlRecordType.COMMIT if committed else ControlRecordType.ABORT, coordinator_epoch)


def control_key(control_type: ControlRecordType) -> bytes:
    return CONTROL_KEY.pack(CONTROL_KEY_VERSION, control_type)


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return END_TXN_MARKER_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def marker_batch(producer_id: int, producer_epoch: int, marker: EndTxnMarker, *, timestamp: int,
                 base_offset: int = 0, leader_epoch: int = -1) -> bytes:
    """The control batch Kafka's leader appends for WriteTxnMarkers (MemoryRecords.withEndTransactionMarker)."""
    assert producer_id >= 0, "an end transaction marker requires a valid producer id"
    record = encode_record(0, 0, control_key(marker.control_type), end_txn_marker_value(marker.coordinator_epoch))
    after_crc = struct.pack(">hiqqqhii", MARKER_ATTRIBUTES, 0, timestamp, timestamp, producer_id, producer_epoch,
                            NO_SEQUENCE, 1) + record
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, the rest
    return struct.pack(">qiibI", base_offset, batch_length, leader_epoch, MAGIC, crc32c(after_crc)) + after_crc


def parse_control_key(key: bytes | None) -> ControlRecordType:
    """ControlRecordType.parse, for the two types a partition's data log may hold."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise MarkerFormatError(f"a control record key has at least {CONTROL_KEY.size} bytes, got {key!r}")
    version, type_id = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise MarkerFormatError(f"control record key version {version}")
    try:
        return ControlRecordType(type_id)
    except ValueError:
        raise MarkerFormatError(f"control record type {type_id} is no transaction marker") from None


def parse_end_txn_marker(control_type: ControlRecordType, value: bytes | None) -> EndTxnMarker:
    """EndTransactionMarker.deserializeValue: a newer version is read as version 0."""
    if value is None or len(value) < END_TXN_MARKER_VALUE.size:
        raise MarkerFormatError(f"an end transaction marker value has at least {END_TXN_MARKER_VALUE.size} bytes, "
                                f"got {value!r}")
    version, coordinator_epoch = END_TXN_MARKER_VALUE.unpack_from(value)
    if version < 0:
        raise MarkerFormatError(f"end transaction marker version {version}")
    return EndTxnMarker(control_type, coordinator_epoch)


def read_varlong(buf, position: int) -> tuple[int, int]:
    """A zigzag varint of a record (up to 10 bytes: the timestamp delta is a varlong)."""
    try:
        return varint.read_varlong(buf, position)
    except varint.VarintError:
        raise MarkerFormatError("truncated or oversized varint in a record") from None


def read_record(data, position: int) -> tuple[int, int, bytes | None, bytes | None, int]:
    """(timestamp delta, offset delta, key, value, next position) of the record at `position` of
    a batch's (decompressed) records section; headers are skipped."""
    length, body = read_varlong(data, position)
    end = body + length
    if length < 0 or end > len(data):
        raise MarkerFormatError("record past the end of its batch")
    position = body + 1  # attributes
    timestamp_delta, position = read_varlong(data, position)
    offset_delta, position = read_varlong(data, position)
    fields = []
    for _ in range(2):
        size, position = read_varlong(data, position)
        fields.append(None if size < 0 else bytes(data[position:position + size]))
        position += max(size, 0)
    if position > end:
        raise MarkerFormatError("record fields past the record's length")
    return timestamp_delta, offset_delta, fields[0], fields[1], end


def first_record_key_value(batch) -> tuple[bytes | None, bytes | None] | None:
    """The key and value of a batch's first record; None when it holds none."""
    if read_batch_header(batch).record_count == 0:
        return None
    _, _, key, value, _ = read_record(records_section(batch), 0)
    return key, value


def read_marker(batch) -> EndTxnMarker | None:
    """The marker a control batch holds (EndTransactionMarker.deserialize of its first record);
    None for a control batch the cleaner emptied. `batch` must be a control batch."""
    header = read_batch_header(batch)
    if not header.attributes & CONTROL_BIT:
        raise MarkerFormatError(f"the batch at {header.base_offset} is no control batch")
    if header.length > len(batch) or crc32c(memoryview(batch)[CRC_START:header.length]) != header.crc:
        raise MarkerFormatError(f"the control batch at {header.base_offset} is truncated or its CRC does not match")
    record = first_record_key_value(batch)
    if record is None:
        return None
    key, value = record
    return parse_end_txn_marker(parse_control_key(key), value)


__all__ = [
    "ControlRecordType",
    "EndTxnMarker",
    "MARKER_ATTRIBUTES",
    "MarkerFormatError",
    "NO_SEQUENCE",
    "control_key",
    "end_txn_marker_value",
    "first_record_key_value",
    "marker_batch",
    "marker_of",
    "parse_control_key",
    "parse_end_txn_marker",
    "read_marker",
    "read_record",
    "read_varlong",
]
