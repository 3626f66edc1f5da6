"""Log compaction's rewriting of batches, on bytes: which records a cleaned log keeps.

Kafka's rules (LogCleaner), for a compacted topic:
- The offset map holds, for each key, the offset of its latest record in the dirty part of the
  log. A record stays if no later record of its key is in the map; a record without a key goes.
- A tombstone (a record whose value is null) stays delete.retention.ms after the first cleaning
  that kept it, so that consumers reading the log's head see the delete; then a cleaning removes
  it. KIP-534, as Kafka's MemoryRecords.filterTo: that cleaning stamps the batch with its delete
  horizon (now + delete.retention.ms, written as the batch's base timestamp with attributes bit
  6 set, the records' timestamp deltas rewritten so their timestamps do not change); a tombstone
  goes at a cleaning at or after its batch's horizon. When its segment was written does not count.
- Offsets never change: a batch keeps its base offset, its lastOffsetDelta (so the offsets after
  it still follow on, and its producer's sequence numbers stay what they were) and its producer
  fields; only the records it holds, their count, its length and its CRC change. A batch that
  keeps no record stays as an empty header, as Kafka keeps the last batch of each producer:
  Weir keeps every one, so the log's batches stay contiguous (followers, recovery and the
  segment indexes rely on it) and producer state rebuilds from the headers alone.
- Control batches stay whole. A compressed batch keeps its codec: the records it keeps are
  compressed again (Kafka's MemoryRecords.filterTo does the same); one that keeps none becomes an
  empty header without a codec (as Kafka's writeEmptyHeader).
- Transactions (KIP-98), as Kafka's CleanedTransactionMetadata: the records of an ABORTED
  transaction (a transactional batch of its producer between its first offset and its ABORT
  marker, from the aborted transaction index) all go and never enter the offset map; a committed
  transaction's records are compacted as any. A marker (COMMIT or ABORT) goes once a cleaning
  finds none of its transaction's batches still holding a record before it (`MarkerRetention`,
  reading the log in order from its start), after a delete horizon as for tombstones: the first
  cleaning that finds it removable stamps its batch, a cleaning at or after the horizon empties
  it (Kafka's Cleaner.cleanInto); the aborted index entry of an ABORT marker goes first. The
  marker's batch stays as an empty header, which ends nothing (weir.transactions.partition_txns).
"""

from __future__ import annotations

import struct
from typing import Iterable

from crc32c import crc32c

from weir.protocol.compression import compress
from weir.protocol.record_batch import (CODEC_MASK, CONTROL_BIT, CRC_START, HEADER_SIZE, TRANSACTIONAL_BIT,
                                        read_batch_header, records_section)
from weir.protocol.records import zigzag_varint
from weir.protocol.varint import read_uvarint, read_varlong

_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_COUNT = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
LENGTH_AT, CRC_AT, ATTRIBUTES_AT, BASE_TIMESTAMP_AT, COUNT_AT = 8, 17, 21, 27, 57
DELETE_HORIZON_BIT = 0x40  # attributes bit 6: the base timestamp is the batch's delete horizon (KIP-534)
NO_KEY = None


def _varint(buf, offset: int) -> tuple[int, int]:
    raw, offset = read_uvarint(buf, offset)
    return (raw >> 1) ^ -(raw & 1), offset


def records_of(batch, data: memoryview | None = None) -> list[tuple[int, int, int, bytes | None, bool]]:
    """(start, end, offset delta, key, is a tombstone) of each record of a batch, positions in its
    records section `data` (records_section(batch) if not given)."""
    header = read_batch_header(batch)
    data = records_section(batch) if data is None else data
    out = []
    position = 0
    for _ in range(header.record_count):
        length, body = _varint(data, position)
        end = body + length
        _, cursor = data[body], body + 1  # attributes
        _, cursor = read_varlong(data, cursor)  # timestamp delta: a varlong
        offset_delta, cursor = _varint(data, cursor)
        key_length, cursor = _varint(data, cursor)
        key = None if key_length < 0 else bytes(data[cursor:cursor + key_length])
        cursor += max(key_length, 0)
        value_length, cursor = _varint(data, cursor)
        out.append((position, end, offset_delta, key, value_length < 0))
        position = end
    return out


def batches_in(data) -> Iterable[memoryview]:
    """Each whole batch of a segment's bytes."""
    view = memoryview(data)
    position = 0
    while position + HEADER_SIZE <= len(view):
        header = read_batch_header(view, position)
        yield view[position:position + header.length]
        position += header.length


def aborted_spans(aborted: Iterable) -> dict[int, list[tuple[int, int]]]:
    """Each producer's aborted transactions as (first offset, marker offset), from the aborted
    transaction index's entries (weir.transactions.txn_index.AbortedTxn)."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for txn in aborted:
        spans.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return spans


def is_aborted(header, spans: dict | None) -> bool:
    """Whether a data batch belongs to an aborted transaction."""
    if not spans or header.attributes & (TRANSACTIONAL_BIT | CONTROL_BIT) != TRANSACTIONAL_BIT:
        return False
    return any(first <= header.base_offset <= last for first, last in spans.get(header.producer_id, ()))


def latest_offsets(segments: Iterable[bytes], offset_map: dict | None = None, aborted: dict | None = None) -> dict:
    """The offset map: each key's latest offset in `segments` (in log order), aborted
    transactions' records apart (`aborted`: aborted_spans)."""
    offset_map = {} if offset_map is None else offset_map
    for data in segments:
        for batch in batches_in(data):
            header = read_batch_header(batch)
            if header.attributes & CONTROL_BIT or is_aborted(header, aborted):
                continue
            for _, _, offset_delta, key, _ in records_of(batch):
                if key is not NO_KEY:
                    offset_map[key] = header.base_offset + offset_delta
    return offset_map


class MarkerRetention:
    """Which markers a cleaning may remove: read every batch of the log in order, from its start
    (Kafka's CleanedTransactionMetadata, on headers: a batch holds records or not)."""

    def __init__(self) -> None:
        self._holds_records: dict[int, bool] = {}  # producer id -> its current transaction has records

    def removable(self, data) -> set[int]:
        """The offsets of the markers in a segment's bytes (read before it is cleaned) whose
        transactions hold no record any more."""
        out = set()
        for batch in batches_in(data):
            header = read_batch_header(batch)
            if header.producer_id < 0 or not header.attributes & TRANSACTIONAL_BIT:
                continue
            if header.attributes & CONTROL_BIT:
                if header.record_count and not self._holds_records.get(header.producer_id):
                    out.add(header.base_offset)
                self._holds_records[header.producer_id] = False
            elif header.record_count:
                self._holds_records[header.producer_id] = True
        return out


def delete_horizon(header) -> int | None:
    """The delete horizon a cleaning stamped the batch with (KIP-534), or None."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None


def _past_horizon(header, now_ms: int) -> bool:
    """Whether a cleaning at `now_ms` removes what the batch's delete horizon protected."""
    horizon = delete_horizon(header)
    return horizon is not None and horizon <= now_ms


def expired_markers(data, removable: set[int], now_ms: int) -> set[int]:
    """Of the `removable` markers of a segment's bytes, those a cleaning at `now_ms` removes: the
    ones whose batch carries a delete horizon that has passed."""
    return {header.base_offset for header in map(read_batch_header, batches_in(data))
            if header.attributes & CONTROL_BIT and header.base_offset in removable and _past_horizon(header, now_ms)}


def clean_batch(batch, offset_map: dict, now_ms: int, delete_retention_ms: int, aborted: dict | None = None,
                removable: set[int] | frozenset = frozenset()) -> bytes:
    """The batch as a cleaning at `now_ms` leaves it (see the module's rules); `removable`: the
    offsets of the markers whose transactions hold no record any more (MarkerRetention)."""
    header = read_batch_header(batch)
    if header.record_count == 0:
        return bytes(batch)
    horizon, new_horizon = delete_horizon(header), now_ms + delete_retention_ms
    if header.attributes & CONTROL_BIT:
        if header.base_offset not in removable:
            return bytes(batch)
        if horizon is None:  # removable: kept delete.retention.ms from now
            section = records_section(batch)
            return _with_records(batch, header, _rebased(section, [(0, len(section))], header.base_timestamp,
                                                         new_horizon), 1, new_horizon)
        return _with_records(batch, header, b"", 0) if _past_horizon(header, now_ms) else bytes(batch)
    section = records_section(batch)
    records = records_of(batch, section)
    deletes = _past_horizon(header, now_ms)
    kept = [] if is_aborted(header, aborted) else [
        (start, end, tombstone) for start, end, delta, key, tombstone in records
        if key is not NO_KEY and offset_map.get(key, -1) <= header.base_offset + delta
        and not (tombstone and deletes)]
    stamp = horizon is None and any(tombstone for _, _, tombstone in kept)
    if len(kept) == len(records) and not stamp:
        return bytes(batch)
    spans = [(start, end) for start, end, _ in kept]
    if stamp:
        return _with_records(batch, header, _rebased(section, spans, header.base_timestamp, new_horizon), len(kept),
                             new_horizon)
    return _with_records(batch, header, b"".join(bytes(section[start:end]) for start, end in spans), len(kept))


def _rebased(section, spans: list[tuple[int, int]], old_base: int, new_base: int) -> bytes:
    """The records at `spans` of a records section, their timestamp deltas made relative to
    `new_base` instead of `old_base` (each record's timestamp unchanged)."""
    out = bytearray()
    for start, end in spans:
        _, body = _varint(section, start)  # the record's length
        timestamp_delta, rest = read_varlong(section, body + 1)  # after the attributes
        record = bytes(section[body:body + 1]) + zigzag_varint(timestamp_delta + old_base - new_base) \
            + bytes(section[rest:end])
        out += zigzag_varint(len(record)) + record
    return bytes(out)


def _with_records(batch, header, body: bytes, count: int, horizon: int | None = None) -> bytes:
    """The batch holding `count` records, `body` (uncompressed), in its codec; stamped with the
    delete `horizon` if given (`body`'s timestamp deltas are then relative to it). Holding none,
    it has no codec either (Kafka's DefaultRecordBatch.writeEmptyHeader: an empty snappy or lz4
    payload is not even valid)."""
    codec = header.attributes & CODEC_MASK
    out = bytearray(batch[:HEADER_SIZE]) + (compress(codec, body) if codec and body else body)
    attributes = header.attributes if body else header.attributes & ~CODEC_MASK
    if horizon is not None:
        attributes |= DELETE_HORIZON_BIT
        _TIMESTAMP.pack_into(out, BASE_TIMESTAMP_AT, horizon)
    _ATTRIBUTES.pack_into(out, ATTRIBUTES_AT, attributes)
    _LENGTH.pack_into(out, LENGTH_AT, len(out) - 12)
    _COUNT.pack_into(out, COUNT_AT, count)
    _CRC.pack_into(out, CRC_AT, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def clean_segment(data, offset_map: dict, now_ms: int, delete_retention_ms: int, aborted: dict | None = None,
                  removable: set[int] | frozenset = frozenset()) -> bytes | None:
    """A segment's bytes as a cleaning at `now_ms` leaves them; None if it changes nothing."""
    out = b"".join(clean_batch(batch, offset_map, now_ms, delete_retention_ms, aborted, removable)
                   for batch in batches_in(data))
    return None if out == data else out  # not the lengths: a batch compressed again may be as long
