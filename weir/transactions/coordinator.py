"""The transaction coordinator's decisions (KIP-98): pure, one `TransactionMetadata` per transactional id.

Rules this module owns (Kafka 3.x's `TransactionCoordinator`, `TransactionMetadata`,
`TransactionStateManager` and the marker completion of `TransactionMarkerChannelManager`; the
classic protocol, before KIP-890's transaction version 2; names are Kafka's):

- STATES. Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead,
  PrepareEpochFence, with the legal predecessors in `VALID_PREVIOUS_STATES`. PrepareEpochFence
  is only ever pending (it turns into PrepareAbort before anything is written); Dead is only
  ever pending (its record is a tombstone).
- PENDING TRANSITIONS. Every change is prepared (`prepare_*` returns the `TxnTransit`, Kafka's
  TxnTransitMetadata, and sets `pending_state`), written to `__transaction_state` with acks=all,
  and only then completed (`complete_transition`), or dropped when the write failed. While a
  transition is pending, no other may be prepared: requests answer CONCURRENT_TRANSACTIONS.
- INITPRODUCERID (KIP-98, KIP-360 for the producer id and epoch a producer may send). A new
  transactional id gets a producer id from the shell's allocator and epoch 0. An Empty or
  Complete* one gets the epoch + 1 and forgets its partitions; the provided producer id/epoch
  must be the current ones (the epoch may also be the previous one: a retry of a bump whose
  answer was lost, answered with the same epoch) or the producer is PRODUCER_FENCED. Epochs stop
  at 32766 (Short.MaxValue - 1, so the coordinator can always fence once more): an exhausted
  epoch gets a new producer id with epoch 0. An Ongoing transaction is first aborted with the
  epoch bumped (PrepareEpochFence, then PrepareAbort): the old producer is fenced, the caller is
  told CONCURRENT_TRANSACTIONS and retries once the abort completed. Prepare* answers
  CONCURRENT_TRANSACTIONS. transaction.timeout.ms must be in (0, transaction.max.timeout.ms]
  (INVALID_TRANSACTION_TIMEOUT); an empty transactional id is INVALID_REQUEST.
- ADDPARTITIONSTOTXN and ADDOFFSETSTOTXN (the latter adds the group's `__consumer_offsets`
  partition). Unknown id or another producer id: INVALID_PRODUCER_ID_MAPPING; another epoch:
  PRODUCER_FENCED; pending or Prepare*: CONCURRENT_TRANSACTIONS; partitions already in an Ongoing
  transaction: NONE at once; otherwise Ongoing with the partitions added (the start timestamp is
  set when the transaction starts from Empty/Complete*). KIP-890 part 1's verification
  (`verify_partitions`): partitions not in the transaction are INVALID_TXN_STATE.
- ENDTXN. Unknown id or another producer id: INVALID_PRODUCER_ID_MAPPING; another epoch
  (from a client; a lower one from the coordinator itself): PRODUCER_FENCED; pending:
  CONCURRENT_TRANSACTIONS. Ongoing becomes PrepareCommit or PrepareAbort; once that is written
  the client is answered NONE and markers go to every partition of the transaction; once all
  are written, CompleteCommit or CompleteAbort is written. A retry of the same outcome is
  answered NONE after Complete*, CONCURRENT_TRANSACTIONS before; the other outcome, or EndTxn in
  Empty, is INVALID_TXN_STATE.
- MARKERS (WriteTxnMarkers results per partition): NONE (and UNSUPPORTED_FOR_MESSAGE_FORMAT,
  UNSUPPORTED_VERSION, and a partition with no leader: deleted) remove the partition from those
  waiting; NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR are retried; INVALID_PRODUCER_EPOCH and
  TRANSACTION_COORDINATOR_FENCED stop the sending (a newer epoch or coordinator took over; the
  transaction is completed by whoever loads it next); anything else is a bug (raised).
- TIMEOUT. An Ongoing transaction with no pending transition whose start is more than its
  transaction.timeout.ms ago is aborted by the coordinator as InitProducerId aborts one: epoch
  bumped (the producer is fenced), PrepareAbort, markers, CompleteAbort. If the PrepareAbort
  write fails, the bumped epoch stays in memory (never told to anyone) and the next fence does
  not bump again (Kafka's hasFailedEpochFence).
- EXPIRATION. Empty and Complete* transactional ids not updated for
  transactional.id.expiration.ms are written as tombstones (pending Dead) and forgotten once the
  tombstone is written.
- LOADING. A coordinator that becomes leader of a `__transaction_state` partition rebuilds its
  ids from that partition's records (the last record of an id wins; a tombstone deletes it;
  unknown key versions are skipped) and re-sends the markers of every PrepareCommit and
  PrepareAbort transaction, then completes it: the client was told its EndTxn succeeded, so the
  outcome must be carried out whoever coordinates. While loading, requests for the partition
  answer COORDINATOR_LOAD_IN_PROGRESS; for partitions not owned, NOT_COORDINATOR.
- A transactional id lives in partition `Utils.abs(id.hashCode) % transaction.state.log.num.partitions`
  (Java's String.hashCode, `weir.groups.placement`).

Theory of operation: one `TransactionCoordinator` per broker holds the `__transaction_state`
partitions it leads, each with the coordinator epoch (its leader epoch) it was loaded at. Each
request method takes the time `now` (ms) and a `token` for its answer and returns `Effects`:
answers for tokens, `Write`s to append (one record each; the shell appends `write.key()` /
`write.value()` to partition `write.partition` with acks=all and reports the outcome with
`on_write_done`), `MarkersToSend` (WriteTxnMarkers to the partitions' leaders, outcome with
`on_markers_written`) and `retry_writes` (completions to append again after a backoff). An
answer waits for its write: the shell persists before it answers. Timers are the shell's:
`abort_timed_out_transactions` every transaction.abort.timed.out.transaction.cleanup.interval.ms,
`expire_transactional_ids` every transaction.remove.expired.transaction.cleanup.interval.ms. No
clocks, sockets or files here; producer ids come from the shell's allocator.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode

from weir.groups.placement import OFFSETS_TOPIC
from weir.groups.placement import partition_for as _hash_partition
from weir.protocol.errors import KafkaError
from weir.transactions.state_log import (NO_PRODUCER_EPOCH, NO_PRODUCER_ID, RecordFormatError, TransactionState,
                                         TxnLogValue, UnknownKeyVersion, grouped_partitions, key_bytes, read_key,
                                         read_value, value_bytes)

TopicPartition = tuple[str, int]
S = TransactionState
SHORT_MAX = 2**15 - 1

VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
EXPIRATION_ALLOWED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


class TransactionResult(enum.IntEnum):
    """Kafka's TransactionResult; WriteTxnMarkers' and EndTxn's `committed` boolean."""
    ABORT = 0
    COMMIT = 1


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Clients never get Short.MaxValue, so the coordinator can always fence once more."""
    return producer_epoch >= SHORT_MAX - 1


@dataclass(frozen=True)
class TransactionConfig:
    """Kafka's names and defaults."""
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms (7 days)
    transaction_max_timeout_ms: int = 900_000  # transaction.max.timeout.ms (15 min)
    num_partitions: int = 50  # transaction.state.log.num.partitions
    replication_factor: int = 3  # transaction.state.log.replication.factor
    min_isr: int = 2  # transaction.state.log.min.isr
    segment_bytes: int = 104_857_600  # transaction.state.log.segment.bytes
    load_buffer_size: int = 5_242_880  # transaction.state.log.load.buffer.size
    # transaction.abort.timed.out.transaction.cleanup.interval.ms
    abort_timed_out_transactions_interval_ms: int = 10_000
    # transaction.remove.expired.transaction.cleanup.interval.ms
    remove_expired_transactional_ids_interval_ms: int = 3_600_000

    NAMES: ClassVar[dict[str, str]] = {
        "transactional_id_expiration_ms": "transactional.id.expiration.ms",
        "transaction_max_timeout_ms": "transaction.max.timeout.ms",
        "num_partitions": "transaction.state.log.num.partitions",
        "replication_factor": "transaction.state.log.replication.factor",
        "min_isr": "transaction.state.log.min.isr",
        "segment_bytes": "transaction.state.log.segment.bytes",
        "load_buffer_size": "transaction.state.log.load.buffer.size",
        "abort_timed_out_transactions_interval_ms": "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "remove_expired_transactional_ids_interval_ms": "transaction.remove.expired.transaction.cleanup.interval.ms",
    }

    @classmethod
    def from_broker(cls, config) -> TransactionConfig:
        """From a broker config (anything with `config[kafka_name]`); names it lacks keep Kafka's default."""
        values = {}
        for attribute, name in cls.NAMES.items():
            try:
                values[attribute] = int(config[name])
            except KeyError:
                pass
        return cls(**values)

    def topic_configs(self) -> dict[str, str]:
        """The configs Kafka enforces on `__transaction_state` when it creates it."""
        return {"cleanup.policy": "compact", "compression.type": "uncompressed",
                "unclean.leader.election.enable": "false", "min.insync.replicas": str(self.min_isr),
                "segment.bytes": str(self.segment_bytes)}


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Kafka's `Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions`."""
    return _hash_partition(transactional_id, num_partitions)


def expected_producer(producer_id: int, producer_epoch: int) -> tuple[int, int] | None | ErrorCode:
    """InitProducerId v3+'s producer id and epoch as KafkaApis reads them (KIP-360): both -1 is
    none, one of them -1 is INVALID_REQUEST."""
    if producer_id == NO_PRODUCER_ID and producer_epoch == NO_PRODUCER_EPOCH:
        return None
    if producer_id == NO_PRODUCER_ID or producer_epoch == NO_PRODUCER_EPOCH:
        return ErrorCode.invalid_request
    return producer_id, producer_epoch


# PRODUCER_FENCED (KIP-588) is answered as INVALID_PRODUCER_EPOCH below these request versions.
PRODUCER_FENCED_SINCE = {"InitProducerId": 4, "AddPartitionsToTxn": 2, "AddOffsetsToTxn": 2, "EndTxn": 2}


def error_for_version(api: str, version: int, error: ErrorCode) -> ErrorCode:
    if error == ErrorCode.producer_fenced and version < PRODUCER_FENCED_SINCE[api]:
        return ErrorCode.invalid_producer_epoch
    return error


def coordinator_error_for_append(error: ErrorCode) -> ErrorCode:
    """How a failed append to `__transaction_state` is told to the client (Kafka's
    TransactionStateManager.appendTransactionToLog)."""
    if error in (ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas,
                 ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out):
        return ErrorCode.coordinator_not_available
    if error in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if error in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
        return ErrorCode.unknown_server_error
    return error


# -- one transactional id ------------------------------------------------------------------

@dataclass(frozen=True)
class TxnTransit:
    """Kafka's TxnTransitMetadata: the metadata a prepared transition will have once written."""
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int

    def log_value(self) -> TxnLogValue:
        assert self.state not in (S.DEAD, S.PREPARE_EPOCH_FENCE)
        return TxnLogValue(self.producer_id, self.producer_epoch, self.txn_timeout_ms, self.state,
                           None if self.state == S.EMPTY else grouped_partitions(self.partitions),
                           self.txn_last_update_timestamp, self.txn_start_timestamp,
                           previous_producer_id=self.last_producer_id)


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: set[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    pending_state: TransactionState | None = None
    # a fence's PrepareAbort failed to be written: its bumped epoch stays, and is not bumped again
    has_failed_epoch_fence: bool = False

    @classmethod
    def from_log(cls, transactional_id: str, value: TxnLogValue) -> TransactionMetadata:
        """As Kafka's loader: the last epoch is not in the log (-1)."""
        assert value.transaction_status not in (S.DEAD, S.PREPARE_EPOCH_FENCE), value
        partitions = set() if value.transaction_status == S.EMPTY else set(value.partitions())
        return cls(transactional_id, value.producer_id, value.previous_producer_id, value.producer_epoch,
                   NO_PRODUCER_EPOCH, value.transaction_timeout_ms, value.transaction_status, partitions,
                   value.transaction_start_timestamp_ms, value.transaction_last_update_timestamp_ms)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    # -- prepare ---------------------------------------------------------------------------

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        """PrepareEpochFence with the epoch + 1 (not again after a failed fence)."""
        assert self.producer_epoch != SHORT_MAX, "fencing would overflow the epoch"
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare_transition_to(S.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH,
                                           self.txn_timeout_ms, frozenset(self.partitions), self.txn_start_timestamp,
                                           self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, new_timeout_ms: int, expected_epoch: int | None,
                                         now: int) -> TxnTransit | ErrorCode:
        """InitProducerId's epoch bump, KIP-360's rules for the epoch the producer sent."""
        assert not self.is_producer_epoch_exhausted(), f"no epochs left for producer id {self.producer_id}"
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH  # a new producer instance
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch  # the producer recovers from an error
        elif expected_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch  # a retry of a bump it never heard of
        else:
            return ErrorCode.producer_fenced
        return self._prepare_transition_to(S.EMPTY, self.producer_id, epoch, last_epoch, new_timeout_ms, frozenset(),
                                           -1, now)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_timeout_ms: int, now: int,
                                     record_last_epoch: bool) -> TxnTransit:
        assert not self.has_pending_transaction(), "cannot rotate producer ids within a transaction"
        return self._prepare_transition_to(S.EMPTY, new_producer_id, 0,
                                           self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                                           new_timeout_ms, frozenset(), -1, now)

    def prepare_add_partitions(self, added: Collection[TopicPartition], now: int) -> TxnTransit:
        start = now if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) else self.txn_start_timestamp
        return self._prepare_transition_to(S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                                           self.txn_timeout_ms, frozenset(self.partitions) | frozenset(added), start,
                                           now)

    def prepare_abort_or_commit(self, new_state: TransactionState, now: int) -> TxnTransit:
        assert new_state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
        return self._prepare_transition_to(new_state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                                           self.txn_timeout_ms, frozenset(self.partitions), self.txn_start_timestamp,
                                           now)

    def prepare_complete(self, now: int) -> TxnTransit:
        new_state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False  # the PrepareAbort of a fence was written after all
        return self._prepare_transition_to(new_state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                                           self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, now)

    def prepare_dead(self) -> TxnTransit:
        return self._prepare_transition_to(S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                                           self.txn_timeout_ms, frozenset(), self.txn_start_timestamp,
                                           self.txn_last_update_timestamp)

    def _prepare_transition_to(self, new_state: TransactionState, producer_id: int, epoch: int, last_epoch: int,
                               timeout_ms: int, partitions: frozenset[TopicPartition], start: int,
                               now: int) -> TxnTransit:
        assert self.pending_state is None, (f"{self.transactional_id}: preparing {new_state.kafka_name} while "
                                            f"{self.pending_state.kafka_name} is pending")
        assert producer_id >= 0, f"illegal producer id {producer_id}"
        assert new_state == S.DEAD or epoch >= 0, f"illegal producer epoch {epoch}"
        assert self.state in VALID_PREVIOUS_STATES[new_state], \
            f"{self.transactional_id}: {self.state.kafka_name} -> {new_state.kafka_name} is not a transition"
        self.pending_state = new_state
        return TxnTransit(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, new_state, partitions, start,
                          now)

    # -- complete ---------------------------------------------------------------------------

    def complete_transition(self, transit: TxnTransit) -> None:
        """The transit was written: it becomes the metadata (Kafka's completeTransitionTo and its checks)."""
        to = self.pending_state
        assert to is not None and to == transit.state, (self.transactional_id, to, transit)
        same_producer = transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id
        if to == S.EMPTY:  # InitProducerId
            bump = (transit.producer_epoch == self.producer_epoch + 1
                    or (transit.producer_epoch == 0 and transit.producer_id != self.producer_id))
            assert (transit.producer_epoch == self.producer_epoch or bump) and not transit.partitions \
                and transit.txn_start_timestamp == -1, (self, transit)
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
        elif to == S.ONGOING:  # AddPartitionsToTxn
            assert same_producer and self.partitions <= transit.partitions \
                and self.txn_timeout_ms == transit.txn_timeout_ms, (self, transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.partitions |= transit.partitions
        elif to in (S.PREPARE_COMMIT, S.PREPARE_ABORT):  # EndTxn
            assert same_producer and self.partitions == transit.partitions \
                and self.txn_timeout_ms == transit.txn_timeout_ms \
                and self.txn_start_timestamp == transit.txn_start_timestamp, (self, transit)
        elif to in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):  # all markers written
            assert same_producer and self.txn_timeout_ms == transit.txn_timeout_ms \
                and transit.txn_start_timestamp != -1, (self, transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.partitions.clear()
        else:
            raise AssertionError(f"{to.kafka_name} is never completed: it is never written")
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.state = to

    def remove_partition(self, tp: TopicPartition) -> None:
        """Its marker is written."""
        assert self.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT), (self.transactional_id, self.state)
        self.partitions.discard(tp)


# -- what the shell does -------------------------------------------------------------------

@dataclass(frozen=True)
class Answer:
    """A request's answer; producer id and epoch only for InitProducerId."""
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class WritePurpose(str, enum.Enum):
    INIT_PRODUCER_ID = "InitProducerId"
    ADD_PARTITIONS = "AddPartitionsToTxn"
    END_TXN = "EndTxn"
    FENCE = "InitProducerId's abort of an ongoing transaction"
    TIMEOUT_ABORT = "abort of a timed-out transaction"
    COMPLETE = "completion after the markers"
    EXPIRE = "expiration"


@dataclass(frozen=True)
class Write:
    """Append one record to `__transaction_state` partition `partition` (acks=all, uncompressed)
    while this broker leads it at `coordinator_epoch`; report with `on_write_done`."""
    transactional_id: str
    partition: int
    coordinator_epoch: int
    transit: TxnTransit  # Dead: the tombstone of an expired id
    purpose: WritePurpose
    token: object = None
    result: TransactionResult | None = None  # EndTxn and the aborts

    def key(self) -> bytes:
        return key_bytes(self.transactional_id)

    def value(self, version: int = 0) -> bytes | None:
        """TransactionLogValue `version` (0 as Kafka 3.x; 1 once transaction.version >= 1); None: a tombstone."""
        return None if self.transit.state == S.DEAD else value_bytes(self.transit.log_value(), version)


@dataclass(frozen=True)
class MarkersToSend:
    """WriteTxnMarkers for `partitions` (to their leaders); report with `on_markers_written`,
    or `on_markers_unroutable` for partitions that have no leader (deleted)."""
    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    result: TransactionResult
    partitions: frozenset[TopicPartition]


@dataclass
class Effects:
    answers: list[tuple[object, Answer]] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    markers: list[MarkersToSend] = field(default_factory=list)
    retry_writes: list[Write] = field(default_factory=list)  # append again after a backoff
    skipped_records: int = 0  # loading: records with a key version we do not know (to log)

    def answer(self, token, error: ErrorCode, producer_id: int = NO_PRODUCER_ID,
               producer_epoch: int = NO_PRODUCER_EPOCH) -> Effects:
        if token is not None:
            self.answers.append((token, Answer(error, producer_id, producer_epoch)))
        return self

    def merge(self, other: Effects) -> Effects:
        self.answers += other.answers
        self.writes += other.writes
        self.markers += other.markers
        self.retry_writes += other.retry_writes
        self.skipped_records += other.skipped_records
        return self


@dataclass
class _OwnedPartition:
    coordinator_epoch: int
    transactions: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(frozen=True)
class _PendingCompletion:
    coordinator_epoch: int
    result: TransactionResult
    transit: TxnTransit  # Complete*, prepared when the markers were queued


RETRIABLE_MARKER_ERRORS = frozenset({
    ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower, ErrorCode.not_enough_replicas,
    ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out, ErrorCode.kafka_storage_error})
MARKER_DONE_ERRORS = frozenset({ErrorCode.none, ErrorCode.unsupported_for_message_format,
                                ErrorCode.unsupported_version})
MARKER_STOP_ERRORS = frozenset({ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced})


class UnexpectedMarkerError(RuntimeError):
    """A WriteTxnMarkers result that only a bug produces (Kafka: IllegalStateException)."""


def rebuild_transactions(records: Iterable[tuple[bytes, bytes | None]]) -> tuple[dict[str, TransactionMetadata], int]:
    """The transactional ids of one `__transaction_state` partition from its records in offset
    order: the last record of an id wins, a tombstone deletes it. Also how many records had a
    key version we do not know (skipped, as Kafka does). A value that cannot be read raises
    RecordFormatError: the partition cannot be loaded."""
    latest: dict[str, TxnLogValue | None] = {}
    skipped = 0
    for key, value in records:
        try:
            transactional_id = read_key(key)
        except UnknownKeyVersion:
            skipped += 1
            continue
        latest[transactional_id] = read_value(value)
        if value is not None and latest[transactional_id].transaction_status in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            raise RecordFormatError(f"{transactional_id}: {latest[transactional_id].transaction_status.kafka_name}"
                                    " is never written")
    return {tid: TransactionMetadata.from_log(tid, v) for tid, v in latest.items() if v is not None}, skipped


class TransactionCoordinator:
    def __init__(self, config: TransactionConfig = TransactionConfig()) -> None:
        self.config = config
        self._owned: dict[int, _OwnedPartition] = {}
        self._loading: dict[int, int] = {}  # partition -> coordinator epoch being loaded
        self._pending_completions: dict[str, _PendingCompletion] = {}

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def transaction(self, transactional_id: str) -> TransactionMetadata | None:
        """The metadata held for an id (DescribeTransactions), None if unknown or not owned."""
        owned = self._owned.get(self.partition_for(transactional_id))
        return None if owned is None else owned.transactions.get(transactional_id)

    def describe_transaction(self, transactional_id: str) -> TransactionMetadata | ErrorCode:
        """DescribeTransactions (KIP-664): the metadata held for an id, or NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS, TRANSACTIONAL_ID_NOT_FOUND (unknown, or expiring)."""
        found = self._lookup(transactional_id) if transactional_id else ErrorCode.transactional_id_not_found
        if isinstance(found, ErrorCode):
            return found
        meta = found[1]
        if meta is None or meta.pending_state == S.DEAD:
            return ErrorCode.transactional_id_not_found
        return meta

    def transactions(self) -> Iterable[TransactionMetadata]:
        for owned in self._owned.values():
            yield from owned.transactions.values()

    def _lookup(self, transactional_id: str) -> ErrorCode | tuple[_OwnedPartition, TransactionMetadata | None]:
        partition = self.partition_for(transactional_id)
        if partition in self._loading:
            return ErrorCode.coordinator_load_in_progress
        owned = self._owned.get(partition)
        if owned is None:
            return ErrorCode.not_coordinator
        return owned, owned.transactions.get(transactional_id)

    def _producer_of(self, transactional_id: str,
                     producer_id: int) -> ErrorCode | tuple[_OwnedPartition, TransactionMetadata]:
        """The transaction a request of `producer_id` names, or why there is none for it (Kafka's
        order: the id, the coordinator, the producer id)."""
        if not transactional_id:
            return ErrorCode.invalid_request
        found = self._lookup(transactional_id)
        if isinstance(found, ErrorCode):
            return found
        if found[1] is None or found[1].producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        return found

    def _write(self, owned: _OwnedPartition, meta: TransactionMetadata, transit: TxnTransit,
               purpose: WritePurpose, token=None, result: TransactionResult | None = None) -> Write:
        return Write(meta.transactional_id, self.partition_for(meta.transactional_id), owned.coordinator_epoch,
                     transit, purpose, token, result)

    # -- loading --------------------------------------------------------------------------

    def start_loading(self, partition: int, coordinator_epoch: int) -> None:
        """This broker became leader of `__transaction_state` partition `partition`: forget what
        was held for it, and answer COORDINATOR_LOAD_IN_PROGRESS until it is loaded."""
        self.unload(partition)
        self._loading[partition] = coordinator_epoch

    def finish_loading(self, partition: int, coordinator_epoch: int,
                       records: Iterable[tuple[bytes, bytes | None]], now: int) -> Effects:
        """The partition's records, read from its log start to its end. Transactions in
        PrepareCommit/PrepareAbort get their markers again. Nothing if the load was cancelled."""
        fx = Effects()
        if self._loading.get(partition) != coordinator_epoch:
            return fx
        transactions, fx.skipped_records = rebuild_transactions(records)
        del self._loading[partition]
        owned = self._owned[partition] = _OwnedPartition(coordinator_epoch, transactions)
        for meta in transactions.values():
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                result = TransactionResult.COMMIT if meta.state == S.PREPARE_COMMIT else TransactionResult.ABORT
                fx.merge(self._send_markers(owned, meta, result, meta.prepare_complete(now)))
        return fx

    def unload(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """No longer leader of the partition: a follower from leader epoch `coordinator_epoch`
        (what was loaded at that epoch or before goes; a later load stays), or deleted (None)."""
        loading = self._loading.get(partition)
        if loading is not None and (coordinator_epoch is None or loading <= coordinator_epoch):
            del self._loading[partition]
        owned = self._owned.get(partition)
        if owned is not None and (coordinator_epoch is None or owned.coordinator_epoch <= coordinator_epoch):
            del self._owned[partition]
            for transactional_id in owned.transactions:
                self._pending_completions.pop(transactional_id, None)

    # -- InitProducerId -------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str | None, transaction_timeout_ms: int,
                         expected: tuple[int, int] | None, now: int, allocate_producer_id: Callable[[], int],
                         token=None) -> Effects:
        """`expected`: the (producer id, epoch) the producer sent (KIP-360), see `expected_producer`.
        `allocate_producer_id` may raise KafkaError (no ids to give): its code is the answer."""
        fx = Effects()
        if transactional_id is None:  # an idempotent producer: any new id will do
            try:
                return fx.answer(token, ErrorCode.none, allocate_producer_id(), 0)
            except KafkaError as e:
                return fx.answer(token, e.code)
        if transactional_id == "":
            return fx.answer(token, ErrorCode.invalid_request)
        if not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return fx.answer(token, ErrorCode.invalid_transaction_timeout)
        found = self._lookup(transactional_id)
        if isinstance(found, ErrorCode):
            return fx.answer(token, found)
        owned, meta = found
        if meta is None:
            try:
                producer_id = allocate_producer_id()
            except KafkaError as e:
                return fx.answer(token, e.code)
            meta = owned.transactions[transactional_id] = TransactionMetadata(
                transactional_id, producer_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
                transaction_timeout_ms, S.EMPTY, set(), -1, now)
        transit = self._prepare_init_producer_id(meta, transaction_timeout_ms, expected, now, allocate_producer_id)
        if isinstance(transit, ErrorCode):
            return fx.answer(token, transit)
        if transit.state == S.PREPARE_EPOCH_FENCE:
            return self._end_transaction(transactional_id, transit.producer_id, transit.producer_epoch,
                                         TransactionResult.ABORT, now, token, purpose=WritePurpose.FENCE)
        fx.writes.append(self._write(owned, meta, transit, WritePurpose.INIT_PRODUCER_ID, token))
        return fx

    def _prepare_init_producer_id(self, meta: TransactionMetadata, timeout_ms: int, expected: tuple[int, int] | None,
                                  now: int, allocate_producer_id: Callable[[], int]) -> TxnTransit | ErrorCode:
        if meta.pending_transition_in_progress:
            return ErrorCode.concurrent_transactions
        if expected is not None:
            pid, epoch = expected
            # KIP-360: a just-created id, the current producer id, or the previous one with an
            # exhausted epoch (a retry of the bump that rotated the producer id)
            if not (meta.producer_epoch == NO_PRODUCER_EPOCH or pid == meta.producer_id
                    or (pid == meta.last_producer_id and is_epoch_exhausted(epoch))):
                return ErrorCode.producer_fenced
        if meta.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return ErrorCode.concurrent_transactions
        if meta.state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            if meta.is_producer_epoch_exhausted() and (expected is None or expected[1] == meta.producer_epoch):
                try:
                    new_producer_id = allocate_producer_id()
                except KafkaError as e:
                    return e.code
                return meta.prepare_producer_id_rotation(new_producer_id, timeout_ms, now, expected is not None)
            return meta.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1], now)
        if meta.state == S.ONGOING:
            # abort it first with the epoch bumped; the caller hears CONCURRENT_TRANSACTIONS and
            # retries, bumping again (or rotating the producer id if this exhausted the epochs)
            return meta.prepare_fence_producer_epoch()
        raise AssertionError(f"{meta.transactional_id} is {meta.state.kafka_name}: never a current state")

    # -- AddPartitionsToTxn, AddOffsetsToTxn ------------------------------------------------

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Collection[TopicPartition], now: int, token=None) -> Effects:
        fx = Effects()
        found = self._producer_of(transactional_id, producer_id)
        if isinstance(found, ErrorCode):
            return fx.answer(token, found)
        owned, meta = found
        if meta.producer_epoch != producer_epoch:
            return fx.answer(token, ErrorCode.producer_fenced)
        if meta.pending_transition_in_progress or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return fx.answer(token, ErrorCode.concurrent_transactions)
        if meta.state == S.ONGOING and set(partitions) <= meta.partitions:
            return fx.answer(token, ErrorCode.none)
        transit = meta.prepare_add_partitions(frozenset(partitions), now)
        fx.writes.append(self._write(owned, meta, transit, WritePurpose.ADD_PARTITIONS, token))
        return fx

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                           offsets_topic_partitions: int, now: int, token=None) -> Effects:
        """The group's `__consumer_offsets` partition joins the transaction (KafkaApis'
        handleAddOffsetsToTxnRequest), so TxnOffsetCommit's offsets get the markers too."""
        partition = _hash_partition(group_id, offsets_topic_partitions)
        return self.add_partitions_to_txn(transactional_id, producer_id, producer_epoch, [(OFFSETS_TOPIC, partition)],
                                          now, token)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Collection[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4's verify_only (KIP-890 part 1): is each partition in the
        transaction? Read only: nothing pending is looked at, nothing is written."""
        found = self._producer_of(transactional_id, producer_id)
        if isinstance(found, ErrorCode):
            error = found
        elif found[1].producer_epoch != producer_epoch:
            error = ErrorCode.producer_fenced
        elif found[1].state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            error = ErrorCode.concurrent_transactions
        else:
            error = None
        if error is not None:
            return {tp: error for tp in partitions}
        meta = found[1]
        return {tp: ErrorCode.none if tp in meta.partitions else ErrorCode.invalid_txn_state for tp in partitions}

    # -- EndTxn ----------------------------------------------------------------------------

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, result: TransactionResult,
                now: int, token=None) -> Effects:
        return self._end_transaction(transactional_id, producer_id, producer_epoch, TransactionResult(result), now,
                                     token, purpose=WritePurpose.END_TXN)

    def _end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         result: TransactionResult, now: int, token, purpose: WritePurpose) -> Effects:
        """Kafka's endTransaction: from a client (EndTxn) or from the coordinator itself (the abort
        of a fence, with the bumped epoch and PrepareEpochFence pending)."""
        fx = Effects()
        from_client = purpose == WritePurpose.END_TXN
        found = self._producer_of(transactional_id, producer_id)
        if isinstance(found, ErrorCode):
            return fx.answer(token, found)
        owned, meta = found
        # clients must name the epoch exactly; the coordinator's own abort names the bumped one
        if (from_client and producer_epoch != meta.producer_epoch) or producer_epoch < meta.producer_epoch:
            return fx.answer(token, ErrorCode.producer_fenced)
        if meta.pending_transition_in_progress and meta.pending_state != S.PREPARE_EPOCH_FENCE:
            return fx.answer(token, ErrorCode.concurrent_transactions)
        commit = result == TransactionResult.COMMIT
        if meta.state == S.ONGOING:
            next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            if next_state == S.PREPARE_ABORT and meta.pending_state == S.PREPARE_EPOCH_FENCE:
                # the fence: its bumped epoch becomes current now, in memory, before the write
                # (the old producer is fenced even if the write fails: never told to anyone)
                assert not from_client
                meta.pending_state = None
                meta.producer_epoch = producer_epoch
                meta.last_producer_epoch = NO_PRODUCER_EPOCH
            transit = meta.prepare_abort_or_commit(next_state, now)
            fx.writes.append(self._write(owned, meta, transit, purpose, token, result))
            return fx
        assert meta.pending_state is None, meta
        if meta.state == S.COMPLETE_COMMIT and commit or meta.state == S.COMPLETE_ABORT and not commit:
            return fx.answer(token, ErrorCode.none)  # a retry of what already happened
        if meta.state == S.PREPARE_COMMIT and commit or meta.state == S.PREPARE_ABORT and not commit:
            return fx.answer(token, ErrorCode.concurrent_transactions)
        if meta.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return fx.answer(token, ErrorCode.invalid_txn_state)
        raise AssertionError(f"{transactional_id} is {meta.state.kafka_name}: never a current state")

    # -- write outcomes ---------------------------------------------------------------------

    def on_write_done(self, write: Write, error: ErrorCode, now: int) -> Effects:
        """The append of `write` finished: `error` is the produce error (NONE: written and replicated)."""
        fx = Effects()
        found = self._lookup(write.transactional_id)
        if error != ErrorCode.none:
            return self._on_write_failed(write, coordinator_error_for_append(error), found)
        if isinstance(found, ErrorCode) or found[1] is None or found[0].coordinator_epoch != write.coordinator_epoch:
            # the partition moved away (and maybe back) meanwhile: whoever loads it has the record
            return fx.answer(write.token, found if isinstance(found, ErrorCode) else ErrorCode.not_coordinator)
        owned, meta = found
        if write.purpose == WritePurpose.EXPIRE:  # forgotten, unless it changed meanwhile
            if meta.pending_state == S.DEAD and meta.producer_epoch == write.transit.producer_epoch:
                del owned.transactions[write.transactional_id]
            else:
                meta.pending_state = None
            return fx
        transit = write.transit
        meta.complete_transition(transit)
        if write.purpose == WritePurpose.INIT_PRODUCER_ID:
            return fx.answer(write.token, ErrorCode.none, transit.producer_id, transit.producer_epoch)
        if write.purpose == WritePurpose.ADD_PARTITIONS:
            return fx.answer(write.token, ErrorCode.none)
        if write.purpose == WritePurpose.COMPLETE:
            return fx
        # PrepareCommit / PrepareAbort is written: the outcome is decided; send the markers
        assert meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and write.result is not None, (meta, write)
        assert meta.producer_id == transit.producer_id and meta.producer_epoch == transit.producer_epoch
        fx.answer(write.token, ErrorCode.concurrent_transactions if write.purpose == WritePurpose.FENCE
                  else ErrorCode.none)
        return fx.merge(self._send_markers(owned, meta, write.result, meta.prepare_complete(now)))

    def _on_write_failed(self, write: Write, error: ErrorCode, found) -> Effects:
        fx = Effects()
        if not isinstance(found, ErrorCode) and found[1] is not None \
                and found[0].coordinator_epoch == write.coordinator_epoch:
            meta = found[1]
            if write.purpose == WritePurpose.COMPLETE and error == ErrorCode.coordinator_not_available:
                fx.retry_writes.append(write)  # keep Complete* pending and append it again
                return fx
            meta.pending_state = None
            if write.purpose in (WritePurpose.FENCE, WritePurpose.TIMEOUT_ABORT):
                meta.has_failed_epoch_fence = True
        return fx.answer(write.token, error)

    # -- markers ---------------------------------------------------------------------------

    def _send_markers(self, owned: _OwnedPartition, meta: TransactionMetadata, result: TransactionResult,
                      complete: TxnTransit) -> Effects:
        self._pending_completions[meta.transactional_id] = _PendingCompletion(owned.coordinator_epoch, result, complete)
        fx = Effects()
        if meta.partitions:
            fx.markers.append(MarkersToSend(meta.transactional_id, meta.producer_id, meta.producer_epoch,
                                            owned.coordinator_epoch, result, frozenset(meta.partitions)))
        return fx.merge(self._maybe_write_completion(meta.transactional_id))

    def _maybe_write_completion(self, transactional_id: str) -> Effects:
        fx = Effects()
        pending = self._pending_completions.get(transactional_id)
        found = self._lookup(transactional_id)
        if pending is None or isinstance(found, ErrorCode) or found[1] is None:
            return fx
        owned, meta = found
        if meta.partitions:
            return fx
        del self._pending_completions[transactional_id]
        if owned.coordinator_epoch == pending.coordinator_epoch:
            fx.writes.append(self._write(owned, meta, pending.transit, WritePurpose.COMPLETE, None, pending.result))
        return fx

    def _pending_markers_of(self, transactional_id: str, coordinator_epoch: int) -> TransactionMetadata | None:
        pending = self._pending_completions.get(transactional_id)
        found = self._lookup(transactional_id)
        if isinstance(found, ErrorCode) or found[1] is None or pending is None \
                or found[0].coordinator_epoch != coordinator_epoch or pending.coordinator_epoch != coordinator_epoch:
            # obsolete: stop sending; only this epoch's completion goes (a newer load's stays:
            # Kafka's removeMarkersForTxn(pendingCompleteTxn) removes that entry only)
            if pending is not None and pending.coordinator_epoch == coordinator_epoch:
                del self._pending_completions[transactional_id]
            return None
        return found[1]

    def on_markers_written(self, markers: MarkersToSend, errors: Mapping[TopicPartition, ErrorCode]) -> Effects:
        """WriteTxnMarkers' result for (some of) `markers.partitions`. Partitions to retry come
        back in `Effects.markers` (route them to their current leaders)."""
        fx = Effects()
        meta = self._pending_markers_of(markers.transactional_id, markers.coordinator_epoch)
        if meta is None:
            return fx
        retry = set()
        for tp, error in errors.items():
            if error in MARKER_DONE_ERRORS:
                meta.remove_partition(tp)
            elif error in RETRIABLE_MARKER_ERRORS:
                retry.add(tp)
            elif error in MARKER_STOP_ERRORS:
                # a newer producer epoch or coordinator wrote to the partition: this one stops
                self._pending_completions.pop(markers.transactional_id, None)
                return fx
            else:
                raise UnexpectedMarkerError(f"{error.name} writing the marker of {markers.transactional_id} to {tp}")
        if retry:
            fx.markers.append(MarkersToSend(markers.transactional_id, markers.producer_id, markers.producer_epoch,
                                            markers.coordinator_epoch, markers.result, frozenset(retry)))
            return fx
        return self._maybe_write_completion(markers.transactional_id)

    def on_markers_unroutable(self, markers: MarkersToSend, partitions: Collection[TopicPartition]) -> Effects:
        """No leader is known for `partitions`: they were deleted, nothing waits there for a marker."""
        meta = self._pending_markers_of(markers.transactional_id, markers.coordinator_epoch)
        if meta is None:
            return Effects()
        for tp in partitions:
            meta.remove_partition(tp)
        return self._maybe_write_completion(markers.transactional_id)

    # -- timers ----------------------------------------------------------------------------

    def abort_timed_out_transactions(self, now: int) -> Effects:
        """Every transaction.abort.timed.out.transaction.cleanup.interval.ms."""
        fx = Effects()
        timed_out = [meta for meta in self.transactions()
                     if not meta.pending_transition_in_progress and meta.state == S.ONGOING
                     and meta.txn_start_timestamp + meta.txn_timeout_ms < now]
        for meta in timed_out:
            transit = meta.prepare_fence_producer_epoch()
            fx.merge(self._end_transaction(meta.transactional_id, transit.producer_id, transit.producer_epoch,
                                           TransactionResult.ABORT, now, None, purpose=WritePurpose.TIMEOUT_ABORT))
        return fx

    def expire_transactional_ids(self, now: int) -> Effects:
        """Every transaction.remove.expired.transaction.cleanup.interval.ms: tombstones for the
        ids idle for transactional.id.expiration.ms (the shell may put one partition's in one batch)."""
        fx = Effects()
        for owned in self._owned.values():
            for meta in owned.transactions.values():
                if meta.pending_state is None and meta.state in EXPIRATION_ALLOWED \
                        and meta.txn_last_update_timestamp <= now - self.config.transactional_id_expiration_ms:
                    fx.writes.append(self._write(owned, meta, meta.prepare_dead(), WritePurpose.EXPIRE))
        return fx


__all__ = [
    "VALID_PREVIOUS_STATES",
    "Answer",
    "Effects",
    "MarkersToSend",
    "TransactionConfig",
    "TransactionCoordinator",
    "TransactionMetadata",
    "TransactionResult",
    "TxnTransit",
    "UnexpectedMarkerError",
    "Write",
    "WritePurpose",
    "coordinator_error_for_append",
    "error_for_version",
    "expected_producer",
    "is_epoch_exhausted",
    "partition_for",
    "rebuild_transactions",
]
