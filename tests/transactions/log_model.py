"""Test helpers: real batch bytes, and a log that feeds PartitionTransactions as the broker will."""

from __future__ import annotations

import struct

from crc32c import crc32c

from weir.protocol.record_batch import TRANSACTIONAL_BIT, read_batch_header
from weir.protocol.records import encode_batch
from weir.transactions.markers import ControlRecordType, EndTxnMarker, marker_batch
from weir.transactions.partition_txns import (SENTINEL, AppendedBatch, AppendOrigin, PartitionTransactions, Refused,
                                              VerificationGuard)
from weir.transactions.txn_index import TransactionIndex


def data_batch(values: list[bytes], *, pid: int = -1, epoch: int = -1, seq: int = -1, transactional: bool = False,
               base_offset: int = 0, timestamp: int = 1_000) -> bytes:
    raw = bytearray(encode_batch(values, base_offset=base_offset, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=seq, timestamp=timestamp))
    if transactional:
        struct.pack_into(">h", raw, 21, TRANSACTIONAL_BIT)
        struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


def end_marker(pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0, timestamp: int = 2_000) -> bytes:
    control_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return marker_batch(pid, epoch, EndTxnMarker(control_type, coordinator_epoch), timestamp=timestamp)


def at_offset(batch: bytes, base_offset: int) -> bytes:
    """The batch with its base offset assigned (outside the CRC, as the log patches it)."""
    return struct.pack(">q", base_offset) + batch[8:]


class LogModel:
    """A partition's log, transaction table and aborted index, wired as the broker will wire them."""

    def __init__(self, *, verification_enabled: bool = False) -> None:
        self.batches: list[bytes] = []
        self.txns = PartitionTransactions(verification_enabled=verification_enabled)
        self.index = TransactionIndex()
        self.high_watermark = 0

    @property
    def log_end_offset(self) -> int:
        return read_batch_header(self.batches[-1]).last_offset + 1 if self.batches else 0

    def append(self, *batches: bytes, origin: AppendOrigin = AppendOrigin.CLIENT,
               guard: VerificationGuard = SENTINEL):
        """Assign offsets, check, append, apply; the Refused, or the AppendOutcome."""
        placed, offset = [], self.log_end_offset
        for batch in batches:
            placed.append(at_offset(batch, offset))
            offset = read_batch_header(placed[-1]).last_offset + 1
        checked = self.txns.prepare_append([AppendedBatch.of(b) for b in placed], origin, guard)
        if isinstance(checked, Refused):
            return checked
        self.batches += placed
        outcome = self.txns.complete_append(checked)
        for entry in outcome.aborted:
            self.index.append(entry)
        return outcome

    def advance_high_watermark(self, offset: int | None = None) -> None:
        self.high_watermark = self.log_end_offset if offset is None else offset
        self.txns.on_high_watermark_updated(self.high_watermark)

    @property
    def last_stable_offset(self) -> int:
        return self.txns.last_stable_offset(self.high_watermark)
