"""A partition replica's transactions (KIP-98): the glue between its log and PartitionTransactions.

Rules this module owns (where Kafka's UnifiedLog calls its ProducerStateManager):

- WHICH BATCHES. A batch concerns the transaction table when it is transactional or a control
  batch, or when its producer is already in the table (a non-transactional batch of a producer
  with an ongoing transaction is refused). Every other batch skips it: idempotent and
  producer-less traffic pays one attribute test and one dict lookup per batch, never a record.
- ORDER. The table checks an append before the log holds it (`check`: origin CLIENT for
  Produce, COORDINATOR for WriteTxnMarkers, REPLICATION for a follower's fetched batches) and
  applies it after (`complete`), so a refused append writes nothing; the aborted transactions an
  ABORT marker completes go to the log's aborted transaction index at once.
- HIGH WATERMARK AND LOG START reach the table before every use (`_sync`): it only ever needs
  them when it is asked something or changed, and both only move forward between truncations.
- TRUNCATION undoes the cut batches exactly while they are above the high watermark; below it
  the table is rebuilt from the producer snapshot and a replay of the log after it, as the
  idempotent producer table is. A replay re-indexes the aborted transactions whose markers the
  index lacks (recovery after a crash between the log write and the index write).
- SNAPSHOT. The table's own snapshot (PartitionTransactions.to_snapshot) rides in the producer
  snapshot beside the idempotent table; a snapshot without it (written before transactions)
  starts an empty table at its offset.

Theory of operation: one `TransactionalAppends` per Partition. It never reads a clock, a file or
a socket itself: what it needs of the log is the ReplicaLog protocol's transaction part
(`batch_at`, `append_aborted_txns`, `collect_aborted_txns`).
"""

from __future__ import annotations

import logging
from typing import Iterable

from weir.protocol.errors import KafkaError
from weir.protocol.record_batch import CONTROL_BIT, TRANSACTIONAL_BIT
from weir.transactions.partition_txns import (SENTINEL, AppendedBatch, AppendOrigin, AppendOutcome,
                                              PartitionTransactions, Refused, TxnAppend, VerificationGuard)
from weir.transactions.txn_index import AbortedTxn

log = logging.getLogger(__name__)
TXN_BITS = TRANSACTIONAL_BIT | CONTROL_BIT
NO_OUTCOME = AppendOutcome([], [])


class TransactionalAppends:
    def __init__(self, log, *, verification_enabled: bool = True) -> None:
        self.log = log
        self.verification_enabled = verification_enabled
        self.table = PartitionTransactions(start_offset=log.log_start_offset,
                                           verification_enabled=verification_enabled)
        self._high_watermark = 0

    # -- which batches -------------------------------------------------------------------

    def concerns(self, header) -> bool:
        """Whether the table must see this batch (see WHICH BATCHES)."""
        return header.producer_id >= 0 and bool(header.attributes & TXN_BITS or header.producer_id in
                                                self.table.producers)

    # -- appends ---------------------------------------------------------------------------

    def check(self, batches: list[AppendedBatch], origin: AppendOrigin, high_watermark: int,
              verification_guard: VerificationGuard = SENTINEL) -> TxnAppend:
        """Check an append whose batches have their offsets (prepare_append); raise KafkaError
        with Kafka's error when the table refuses it."""
        self._sync(high_watermark)
        checked = self.table.prepare_append(batches, origin, verification_guard)
        if isinstance(checked, Refused):
            raise KafkaError(checked.error, checked.message)
        return checked

    def check_produced(self, header, base_offset: int, high_watermark: int,
                       verification_guard: VerificationGuard = SENTINEL,
                       origin: AppendOrigin = AppendOrigin.CLIENT) -> TxnAppend | None:
        """A produced (validated) batch to be appended at `base_offset`: None if the table need
        not see it."""
        if not self.concerns(header):
            return None
        placed = header._replace(base_offset=base_offset)
        return self.check([AppendedBatch(placed)], origin, high_watermark, verification_guard)

    def complete(self, append: TxnAppend | None) -> AppendOutcome:
        """The log holds the checked batches now: apply them, and index the aborted transactions."""
        if append is None:
            return NO_OUTCOME
        outcome = self.table.complete_append(append)
        if outcome.aborted:
            self.log.append_aborted_txns(outcome.aborted)
        return outcome

    def check_replicated(self, records, headers, high_watermark: int) -> TxnAppend | None:
        """A follower is about to append `records` (whole batches with these `headers`): check
        them, origin REPLICATION (Kafka only logs what it would refuse, except a non-transactional
        batch inside a transaction); `complete` the answer once the log holds them. None: the
        table need not see them."""
        if not any(self.concerns(h) for h in headers):
            return None
        positions, position = {}, 0
        for h in headers:
            positions[h.base_offset] = position
            position += h.length
        view = memoryview(records)
        batches = self._select(headers, lambda h: view[positions[h.base_offset]:positions[h.base_offset] + h.length])
        return self.check(batches, AppendOrigin.REPLICATION, high_watermark)

    def _select(self, headers: Iterable, batch_bytes) -> list[AppendedBatch]:
        """The batches the table must see, in order (a producer's batches from its first
        transactional one on); `batch_bytes(header)` reads a control batch's marker."""
        batches, seen = [], set()
        for h in headers:
            if h.producer_id < 0 or not (h.attributes & TXN_BITS or h.producer_id in seen
                                         or h.producer_id in self.table.producers):
                continue
            seen.add(h.producer_id)
            batches.append(AppendedBatch.of(batch_bytes(h)) if h.attributes & CONTROL_BIT else AppendedBatch(h))
        return batches

    def maybe_start_verification(self, producer_id: int, sequence: int, epoch: int, now_ms: int) -> VerificationGuard:
        """KIP-890 part 1 (UnifiedLog.maybeStartTransactionVerification): SENTINEL when no
        verification is needed."""
        if not self.verification_enabled:
            return SENTINEL
        return self.table.maybe_start_transaction_verification(producer_id, sequence, epoch, now_ms)

    # -- reading -----------------------------------------------------------------------

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO (<= the HW); the HW itself while no transaction is undecided."""
        table = self.table
        if not table.ongoing and not table.unreplicated:
            return high_watermark
        self._sync(high_watermark)
        return table.last_stable_offset(high_watermark, self.log.log_start_offset)

    def aborted_transactions(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Kafka's collectAbortedTransactions over the log's per-segment indexes."""
        return self.log.collect_aborted_txns(fetch_offset, upper_bound_offset)

    # -- offsets moving ----------------------------------------------------------------

    def _sync(self, high_watermark: int) -> None:
        if high_watermark > self._high_watermark:
            self._high_watermark = high_watermark
            self.table.on_high_watermark_updated(high_watermark)
        self.table.on_log_start_offset_incremented(self.log.log_start_offset)

    def holds_producer(self, producer_id: int) -> bool:
        return producer_id in self.table.producers

    def remove_expired_producers(self, now_ms: int, expiration_ms: int, high_watermark: int) -> None:
        """producer.id.expiration.ms: idle producers without an ongoing transaction, and
        verifications never used, are forgotten."""
        self._sync(high_watermark)
        self.table.remove_expired_producers(now_ms, expiration_ms)

    def truncate_to(self, offset: int, high_watermark: int, snapshot_text: str | None, snapshot_offset: int) -> None:
        """The log was cut at `offset`: undo exactly, else rebuild (TRUNCATION)."""
        self._sync(high_watermark)
        if self.table.can_truncate_to(offset):
            self.table.truncate_to(offset)
        else:
            self.reload(snapshot_text, snapshot_offset)

    def start_at(self, offset: int) -> None:
        """The log was emptied and goes on from `offset`."""
        self.table.truncate_fully_and_start_at(offset)
        self._high_watermark = 0

    # -- snapshots and replay -------------------------------------------------------------

    def reload(self, snapshot_text: str | None, snapshot_offset: int | None) -> None:
        """Rebuild from a snapshot taken at `snapshot_offset` (None: no snapshot), then the log."""
        start = self.log.log_start_offset
        self.table = PartitionTransactions(start_offset=start, verification_enabled=self.verification_enabled)
        if snapshot_offset is not None and snapshot_offset <= self.log.log_end_offset:
            try:
                self.table = (PartitionTransactions(start_offset=snapshot_offset,
                                                    verification_enabled=self.verification_enabled)
                              if snapshot_text is None else
                              PartitionTransactions.from_snapshot(snapshot_text, snapshot_offset,
                                                                  verification_enabled=self.verification_enabled))
                start = max(snapshot_offset, start)
            except (ValueError, KeyError, TypeError, AssertionError) as e:  # damaged: the log tells all
                log.warning("ignoring a damaged transaction snapshot at %d: %r", snapshot_offset, e)
        self._high_watermark = 0
        self.replay(h for h in self.log.batch_headers(start) if h.base_offset >= start)

    def replay(self, headers: Iterable) -> None:
        batches = self._select(headers, lambda h: self.log.batch_at(h.base_offset))
        if batches:
            outcome = self.table.replay(batches)
            if outcome.aborted:
                self.log.append_aborted_txns(outcome.aborted)  # only those the index lacks are added

    def snapshot(self) -> str:
        return self.table.to_snapshot()

