"""Transactions on one partition (KIP-98, the partition leader's and follower's side): pure.

Rules this module owns (Kafka 3.x's `ProducerStateManager`, `ProducerAppendInfo`,
`ProducerStateEntry`, `TxnMetadata`, `CompletedTxn`, `VerificationStateEntry` and the producer
state part of `UnifiedLog.append` / `analyzeAndValidateProducerState`; names are Kafka's; the
classic protocol, transaction versions 0 and 1, with KIP-890 part 1's verification):

- FIRST OFFSET. A transactional data batch (TRANSACTIONAL_BIT, not CONTROL_BIT) of a producer
  with no ongoing transaction starts one at the batch's base offset (`currentTxnFirstOffset`);
  later batches of the producer join it.
- COMPLETION. A control batch holding a COMMIT or ABORT marker ends its producer's ongoing
  transaction: a `CompletedTxn` (producer id, first offset, last offset = the marker's offset,
  aborted?). A marker with no ongoing transaction completes nothing (a retry, or the coordinator
  ending a transaction that never wrote here), but still updates the producer's epoch and
  coordinator epoch. A control batch the cleaner emptied ends nothing and changes nothing; nor
  does a transactional data batch it emptied start a transaction (Weir's cleaner keeps the
  header of every batch; it empties only decided transactions' batches, and a marker only once
  its transaction's batches are all empty, so a replay finds no transaction without its end).
- LAST STABLE OFFSET. The first unstable offset is the first offset of the earliest transaction
  that is ongoing, or completed with its marker not yet below the high watermark (Kafka's
  `unreplicatedTxns`: until its marker is replicated, a leader change could still lose it). LSO =
  that offset (raised to the log start offset) when below the HW, else the HW: LSO <= HW.
  READ_COMMITTED consumers read below the LSO only.
- ABORTED INDEX. Each aborted transaction gets an `AbortedTxn` entry (txn_index) when its
  marker is appended, with the last stable offset at that time (`lastStableOffset(completedTxn)`:
  the first offset of the earliest ongoing transaction of ANOTHER producer, else the marker's
  offset + 1), computed after the append's new transactions are registered and after the
  append's earlier completions, in Kafka's order.
- VALIDATION, in Kafka's order, with the errors Kafka answers (origins CLIENT: Produce,
  COORDINATOR: WriteTxnMarkers; REPLICATION: a follower's appends and replays, which Kafka only
  logs, except the last rule):
  1. KIP-890 part 1 (transaction.partition.verification.enable): a transactional data batch of a
     producer with no ongoing transaction here must carry the `VerificationGuard` this partition
     handed out (`maybe_start_transaction_verification`) before asking the coordinator, still
     current: INVALID_TXN_STATE otherwise. A unique guard defeats the ABA race (verified, then
     aborted, then a new transaction unaware of this partition). Appending a transactional batch
     or marker retires the producer's guard, as Kafka does while checking the append, so a second
     transactional batch of the same producer in one append (clients never send one) is refused.
  2. EPOCH (ProducerAppendInfo.checkProducerEpoch): a data batch or marker whose producer epoch
     is below the producer's last seen epoch is INVALID_PRODUCER_EPOCH. Kafka answered
     PRODUCER_FENCED here before 2.7 (KIP-588 made it the abortable INVALID_PRODUCER_EPOCH);
     PRODUCER_FENCED still comes from the coordinator, and a PRODUCER_FENCED answer to the
     verification is turned into INVALID_PRODUCER_EPOCH for the producer
     (`produce_error_for_verification`, AddPartitionsToTxnManager). A marker of the same epoch
     passes (transaction versions 0/1 write markers with the transaction's epoch; the
     coordinator's fencing abort writes them with the bumped epoch).
  3. VERIFICATION SEQUENCE (CLIENT only; ProducerAppendInfo.checkSequence): while a producer's
     verification is pending, a batch whose first sequence is above the lowest sequence that
     asked for verification is OUT_OF_ORDER_SEQUENCE_NUMBER. (Every other sequence rule is the
     idempotent producer table's, weir.replication.producer_state.)
  4. COORDINATOR EPOCH (appendEndTxnMarker): a marker whose coordinator epoch is below the last
     one this producer's markers carried is from a deposed coordinator:
     TRANSACTION_COORDINATOR_FENCED.
  5. A non-transactional data batch of a producer with an ongoing transaction is
     INVALID_TXN_STATE, from every origin (Kafka throws it for replication too).
  All of an append's batches are checked before anything changes: `prepare_append` returns the
  checked change or the refusal, `complete_append` applies it once the log holds the batches.
- TRUNCATION (a follower truncating; Kafka's truncateAndReload): what stays is what replaying
  the log below the truncation offset leaves. Transactions started at or above it are gone; those
  whose marker is at or above it are ongoing again; producers' epochs and coordinator epochs are
  those of before the cut batches. `truncate_to` undoes the cut batches exactly while they are
  above the high watermark; below it (unclean election, recovery) rebuild: `from_snapshot` and
  `replay` of the log after the snapshot (Weir's Partition.load_producers does the same for the
  idempotent table).
- SNAPSHOT. Each producer's epoch, coordinator epoch, current transaction's first offset and
  last timestamp (Kafka's producer snapshot entries); loading one makes every recorded first
  offset an ongoing transaction. Completed transactions above the HW are not in it (Kafka
  neither: a snapshot is taken at or below the HW it is reloaded with).
- EXPIRATION (producer.id.expiration.ms): a producer with no ongoing transaction whose last
  timestamp is that old is forgotten; so is a verification state that old.

Theory of operation: one `PartitionTransactions` per partition replica, on leaders and followers
alike, beside the idempotent producer table. It is fed the headers of the batches the log
appends, in offset order, with offsets assigned (`AppendedBatch`: a header and, for a control
batch, its marker): the leader checks a produced batch (`prepare_append`, origin CLIENT) or a
WriteTxnMarkers marker (origin COORDINATOR) before the log append and applies it after
(`complete_append`), which answers the completed transactions and the aborted index entries to
write; a follower does the same with origin REPLICATION. The shell tells it the high watermark
(`on_high_watermark_updated`) and the log start (`on_log_start_offset_incremented`), and asks
for the LSO. No clocks, files or sockets: `now` comes in with the calls that need it.
"""

from __future__ import annotations

import enum
import json
from collections import deque
from dataclasses import dataclass
from typing import Iterable

from kio.schema.errors import ErrorCode

from weir.protocol.record_batch import CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader, read_batch_header
from weir.transactions.markers import EndTxnMarker, read_marker
from weir.transactions.txn_index import AbortedTxn

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_COORDINATOR_EPOCH = -1
SNAPSHOT_VERSION = 1


class AppendOrigin(enum.Enum):
    """Kafka's AppendOrigin: who appends, hence which checks apply."""
    CLIENT = "client"  # Produce
    COORDINATOR = "coordinator"  # WriteTxnMarkers (and the group coordinator's writes)
    REPLICATION = "replication"  # a follower's appends, and replays of the log


@dataclass(frozen=True, slots=True)
class AppendedBatch:
    """What this module needs of a batch: its header (offsets assigned) and, for a control
    batch, its marker (None when the cleaner emptied it)."""
    header: BatchHeader
    marker: EndTxnMarker | None = None

    @classmethod
    def of(cls, batch) -> AppendedBatch:
        header = read_batch_header(batch)
        return cls(header, read_marker(batch) if header.attributes & CONTROL_BIT else None)

    @property
    def is_control(self) -> bool:
        return bool(self.header.attributes & CONTROL_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.header.attributes & TRANSACTIONAL_BIT)


@dataclass(frozen=True, slots=True)
class ProducerTxnState:
    """The transaction part of Kafka's ProducerStateEntry."""
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    current_txn_first_offset: int | None = None
    last_timestamp: int = -1


EMPTY_ENTRY = ProducerTxnState()


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """Kafka's CompletedTxn: a transaction this partition saw end."""
    producer_id: int
    first_offset: int
    last_offset: int  # its marker's offset
    is_aborted: bool


class VerificationGuard:
    """Kafka's VerificationGuard: unique per verification; compared by identity."""
    __slots__ = ()

    def verify(self, request_guard: VerificationGuard) -> bool:
        return self is not SENTINEL and self is request_guard


SENTINEL = VerificationGuard()


@dataclass
class VerificationStateEntry:
    """Kafka's VerificationStateEntry: a verification asked of the coordinator, not yet used."""
    timestamp: int
    guard: VerificationGuard
    lowest_sequence: int
    epoch: int

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        """Keep the lowest sequence of the current epoch (a higher epoch starts over)."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence


@dataclass(frozen=True, slots=True)
class Refused:
    """The append is refused with `error`; nothing changed."""
    error: ErrorCode
    message: str


@dataclass(frozen=True, slots=True)
class _Step:
    """One batch's change: undone as a unit when a truncation cuts the batch."""
    producer_id: int
    base_offset: int
    last_offset: int
    previous: ProducerTxnState | None  # None: the producer was unknown
    entry: ProducerTxnState
    started: int | None  # the first offset of a transaction this batch started
    completed: CompletedTxn | None
    retires_guard: bool


@dataclass(frozen=True)
class TxnAppend:
    """A checked append (Kafka's ProducerAppendInfos and completed transactions), to apply with
    `complete_append` before anything else changes the producers, their transactions or their
    verifications (the high watermark and the log start may move meanwhile)."""
    steps: tuple[_Step, ...]
    version: int


@dataclass(frozen=True)
class AppendOutcome:
    completed: list[CompletedTxn]
    aborted: list[AbortedTxn]  # to append to the transaction index, in this order


class PartitionTransactions:
    def __init__(self, *, start_offset: int = 0, verification_enabled: bool = True) -> None:
        self.verification_enabled = verification_enabled  # transaction.partition.verification.enable
        self.producers: dict[int, ProducerTxnState] = {}
        self.ongoing: dict[int, int] = {}  # Kafka's ongoingTxns: first offset -> producer id
        self.unreplicated: dict[int, CompletedTxn] = {}  # Kafka's unreplicatedTxns, by first offset
        self.verification: dict[int, VerificationStateEntry] = {}
        self._undo: deque[_Step] = deque()  # the applied batches not yet below the HW, in offset order
        self._undo_floor = start_offset  # every batch at or above it is in _undo
        self._version = 0

    # -- reading ---------------------------------------------------------------------------

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None

    def ongoing_transactions(self) -> list[tuple[int, int]]:
        """(first offset, producer id) of every ongoing transaction, earliest first."""
        return sorted(self.ongoing.items())

    def first_undecided_offset(self) -> int | None:
        """The first offset of the earliest ongoing transaction (Kafka's firstUndecidedOffset)."""
        return min(self.ongoing, default=None)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """Kafka's firstUnstableOffset: the earliest first offset of a transaction ongoing, or
        completed with its marker at or above the HW (not yet known to be replicated)."""
        candidates = [txn.first_offset for txn in self.unreplicated.values() if txn.last_offset >= high_watermark]
        candidates += self.ongoing
        return min(candidates, default=None)

    def last_stable_offset(self, high_watermark: int, log_start_offset: int = 0) -> int:
        """Kafka's UnifiedLog.lastStableOffset: the first unstable offset if below the HW, else the HW."""
        first_unstable = self.first_unstable_offset(high_watermark)
        if first_unstable is None:
            return high_watermark
        first_unstable = max(first_unstable, log_start_offset)  # maybeIncrementFirstUnstableOffset
        return first_unstable if first_unstable < high_watermark else high_watermark

    # -- KIP-890 part 1 ----------------------------------------------------------------------

    def maybe_start_transaction_verification(self, producer_id: int, sequence: int, epoch: int,
                                             now: int) -> VerificationGuard:
        """UnifiedLog.maybeStartTransactionVerification: SENTINEL when the producer already has an
        ongoing transaction here (no verification needed), else its guard (created if none)."""
        if self.has_ongoing_transaction(producer_id):
            return SENTINEL
        entry = self.verification.get(producer_id)
        if entry is None:
            entry = self.verification[producer_id] = VerificationStateEntry(now, VerificationGuard(), sequence, epoch)
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        self._version += 1  # an append checked before must be checked again
        return entry.guard

    def verification_guard(self, producer_id: int) -> VerificationGuard:
        entry = self.verification.get(producer_id)
        return SENTINEL if entry is None else entry.guard

    # -- appends -----------------------------------------------------------------------------

    def prepare_append(self, batches: Iterable[AppendedBatch], origin: AppendOrigin,
                       verification_guard: VerificationGuard = SENTINEL) -> TxnAppend | Refused:
        """Check an append (batches in offset order, offsets assigned) against the table and
        among its batches; nothing changes here."""
        staged: dict[int, ProducerTxnState] = {}
        retired_guards: set[int] = set()
        steps: list[_Step] = []
        checked = origin is not AppendOrigin.REPLICATION
        previous_last = None
        for batch in batches:
            h = batch.header
            assert previous_last is None or h.base_offset > previous_last, "batches out of offset order"
            previous_last = h.last_offset
            pid = h.producer_id
            if pid == NO_PRODUCER_ID:
                continue
            known = self.producers.get(pid)
            entry = staged.get(pid, known or EMPTY_ENTRY)
            previous = staged.get(pid, known)
            started = completed = None
            if checked and batch.is_transactional and not batch.is_control and self.verification_enabled and (
                    not self.has_ongoing_transaction(pid)):
                guard = SENTINEL if pid in retired_guards else self.verification_guard(pid)
                if not guard.verify(verification_guard):
                    return Refused(ErrorCode.invalid_txn_state, f"producer {pid}'s batch at {h.base_offset} was not "
                                   "part of an ongoing transaction (not verified with the coordinator)")
            if batch.is_control and batch.marker is None:  # emptied by the cleaner: the transaction is gone
                steps.append(_Step(pid, h.base_offset, h.last_offset, previous, entry, None, None, True))
                retired_guards.add(pid)
                continue
            if checked and h.producer_epoch < entry.producer_epoch:
                return Refused(ErrorCode.invalid_producer_epoch, f"epoch {h.producer_epoch} of producer {pid} at "
                               f"{h.base_offset} is below its last seen epoch {entry.producer_epoch}")
            if batch.is_control:
                marker = batch.marker
                if checked and entry.coordinator_epoch > marker.coordinator_epoch:
                    return Refused(ErrorCode.transaction_coordinator_fenced, f"marker of producer {pid} at "
                                   f"{h.base_offset} has coordinator epoch {marker.coordinator_epoch}, below "
                                   f"{entry.coordinator_epoch}")
                if entry.current_txn_first_offset is not None:
                    completed = CompletedTxn(pid, entry.current_txn_first_offset, h.base_offset, marker.is_abort)
                entry = ProducerTxnState(h.producer_epoch, marker.coordinator_epoch, None, h.max_timestamp)
            else:
                pending = self.verification.get(pid)  # as the append began (Kafka's ProducerAppendInfo keeps it)
                if (origin is AppendOrigin.CLIENT and pending is not None
                        and h.base_sequence > pending.lowest_sequence):
                    return Refused(ErrorCode.out_of_order_sequence_number, f"producer {pid}'s sequence "
                                   f"{h.base_sequence} at {h.base_offset} is above {pending.lowest_sequence}, the "
                                   "earliest awaiting verification")
                first = entry.current_txn_first_offset
                if first is not None and not batch.is_transactional:
                    return Refused(ErrorCode.invalid_txn_state, f"non-transactional batch of producer {pid} at "
                                   f"{h.base_offset} while its transaction from {first} is ongoing")
                if first is None and batch.is_transactional and h.record_count:
                    first = started = h.base_offset
                entry = ProducerTxnState(h.producer_epoch, entry.coordinator_epoch, first, h.max_timestamp)
            staged[pid] = entry
            if batch.is_transactional:
                retired_guards.add(pid)
            steps.append(_Step(pid, h.base_offset, h.last_offset, previous, entry, started, completed,
                               batch.is_transactional))
        return TxnAppend(tuple(steps), self._version)

    def complete_append(self, append: TxnAppend) -> AppendOutcome:
        """The log holds the batches of `append` now: apply it (ProducerStateManager.update, then
        for each completed transaction lastStableOffset and completeTxn, as UnifiedLog.append)."""
        assert append.version == self._version, "the table changed between prepare_append and complete_append"
        assert not self._undo or not append.steps or append.steps[0].base_offset > self._undo[-1].last_offset
        for step in append.steps:
            self.producers[step.producer_id] = step.entry
            if step.started is not None:
                self.ongoing[step.started] = step.producer_id
            if step.retires_guard:
                self.verification.pop(step.producer_id, None)
            self._undo.append(step)
        outcome = AppendOutcome([], [])
        for step in append.steps:
            txn = step.completed
            if txn is None:
                continue
            if txn.is_aborted:
                outcome.aborted.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                                  self._last_stable_offset_of(txn)))
            assert self.ongoing.pop(txn.first_offset) == txn.producer_id, f"{txn} was not started"
            self.unreplicated[txn.first_offset] = txn
            outcome.completed.append(txn)
        self._version += 1
        return outcome

    def _last_stable_offset_of(self, txn: CompletedTxn) -> int:
        """ProducerStateManager.lastStableOffset(completedTxn): the first offset of the earliest
        ongoing transaction of another producer, else the marker's offset + 1."""
        for first_offset, producer_id in sorted(self.ongoing.items()):
            if producer_id != txn.producer_id:
                return first_offset
        return txn.last_offset + 1

    def replay(self, batches: Iterable[AppendedBatch]) -> AppendOutcome:
        """Batches already in the log (loading, rebuilding after a truncation): as a follower appends."""
        append = self.prepare_append(batches, AppendOrigin.REPLICATION)
        if isinstance(append, Refused):
            raise ValueError(f"the log holds batches Kafka's producer state refuses: {append.message}")
        return self.complete_append(append)

    # -- offsets moving --------------------------------------------------------------------

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Transactions whose marker is below the HW are stable; batches below it are never cut
        again by `truncate_to`."""
        for first_offset in [f for f, txn in self.unreplicated.items() if txn.last_offset < high_watermark]:
            del self.unreplicated[first_offset]
        while self._undo and self._undo[0].last_offset < high_watermark:
            self._undo.popleft()
        self._undo_floor = max(self._undo_floor, high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        for first_offset in [f for f, txn in self.unreplicated.items() if txn.last_offset < log_start_offset]:
            del self.unreplicated[first_offset]

    def can_truncate_to(self, offset: int) -> bool:
        """Whether `truncate_to(offset)` is exact; otherwise rebuild from a snapshot and the log."""
        return offset >= self._undo_floor

    def truncate_to(self, offset: int) -> None:
        """The log lost the batches at `offset` and above: undo them, latest first."""
        assert self.can_truncate_to(offset), f"truncation to {offset} below {self._undo_floor}: rebuild instead"
        while self._undo and self._undo[-1].last_offset >= offset:
            step = self._undo.pop()
            assert step.base_offset >= offset, f"truncation to {offset} inside the batch at {step.base_offset}"
            if step.previous is None:
                del self.producers[step.producer_id]
            else:
                self.producers[step.producer_id] = step.previous
            if step.started is not None:
                assert self.ongoing.pop(step.started) == step.producer_id
            if step.completed is not None:
                txn = self.unreplicated.pop(step.completed.first_offset)
                self.ongoing[txn.first_offset] = txn.producer_id
        self._version += 1

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The log is emptied and goes on from `offset` (Kafka's truncateFullyAndStartAt)."""
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()
        self._undo.clear()
        self._undo_floor = offset
        self._version += 1

    def remove_expired_producers(self, now: int, producer_id_expiration_ms: int) -> None:
        """ProducerStateManager.removeExpiredProducers (producers with batches above the HW stay:
        a truncation may still need their entries)."""
        recent = {step.producer_id for step in self._undo}
        for pid in [pid for pid, entry in self.producers.items()
                    if entry.current_txn_first_offset is None and pid not in recent
                    and now - entry.last_timestamp >= producer_id_expiration_ms]:
            del self.producers[pid]
        for pid in [pid for pid, entry in self.verification.items()
                    if now - entry.timestamp >= producer_id_expiration_ms]:
            del self.verification[pid]
        self._version += 1

    # -- snapshots ---------------------------------------------------------------------------

    def to_snapshot(self) -> str:
        """The producers' transaction state, for the producer-state snapshot at the log end."""
        return json.dumps({"version": SNAPSHOT_VERSION, "producers": {
            str(pid): [e.producer_epoch, e.coordinator_epoch, e.current_txn_first_offset, e.last_timestamp]
            for pid, e in sorted(self.producers.items())}})

    @classmethod
    def from_snapshot(cls, text: str, offset: int, *, verification_enabled: bool = True) -> PartitionTransactions:
        """The state a snapshot taken at `offset` (the log end then) recorded; replay the log from
        `offset` to bring it up to date."""
        saved = json.loads(text)
        if saved.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unknown transaction snapshot version {saved.get('version')}")
        table = cls(start_offset=offset, verification_enabled=verification_enabled)
        for pid, (epoch, coordinator_epoch, first_offset, last_timestamp) in saved["producers"].items():
            table.producers[int(pid)] = ProducerTxnState(epoch, coordinator_epoch, first_offset, last_timestamp)
            if first_offset is not None:  # ProducerStateManager.loadProducerEntry
                assert first_offset < offset, f"producer {pid}'s transaction starts at {first_offset}, not below {offset}"
                table.ongoing[first_offset] = int(pid)
        return table


def produce_error_for_verification(coordinator_error: ErrorCode) -> ErrorCode:
    """What a producer is told when the coordinator refused to verify its partition
    (AddPartitionsToTxnManager): producers expect INVALID_PRODUCER_EPOCH, not PRODUCER_FENCED."""
    return ErrorCode.invalid_producer_epoch if coordinator_error == ErrorCode.producer_fenced else coordinator_error


__all__ = [
    "AppendOrigin",
    "AppendOutcome",
    "AppendedBatch",
    "CompletedTxn",
    "PartitionTransactions",
    "ProducerTxnState",
    "Refused",
    "SENTINEL",
    "TxnAppend",
    "VerificationGuard",
    "VerificationStateEntry",
    "produce_error_for_verification",
]
