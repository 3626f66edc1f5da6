"""The transaction coordinator's pure core (weir.transactions.coordinator), one test per rule,
driven with a fake clock, a fake producer id allocator and an in-memory __transaction_state."""

import itertools

import pytest

from weir.groups.placement import java_string_hash
from weir.protocol.errors import ErrorCode, KafkaError
from weir.transactions.coordinator import (Answer, Effects, MarkersToSend, TransactionConfig, TransactionCoordinator,
                                           TransactionResult, UnexpectedMarkerError, Write, WritePurpose,
                                           coordinator_error_for_append, error_for_version, expected_producer,
                                           partition_for, rebuild_transactions)
from weir.transactions.state_log import (RecordFormatError, TransactionState, TxnLogValue, key_bytes, read_key,
                                         read_value, value_bytes)

S = TransactionState
E = ErrorCode
COMMIT, ABORT = TransactionResult.COMMIT, TransactionResult.ABORT
FOO0, FOO1, BAR0 = ("foo", 0), ("foo", 1), ("bar", 0)


class Driver:
    """One coordinator owning the single __transaction_state partition at coordinator epoch 7.
    Writes are appended to `log` and reported written unless held; answers collect by token."""

    def __init__(self, coordinator_epoch: int = 7, records=(), **config) -> None:
        self.now = 1_000_000
        self.core = TransactionCoordinator(TransactionConfig(num_partitions=1, **config))
        self.log: list[tuple[bytes, bytes | None]] = list(records)
        self.answers: dict[object, Answer] = {}
        self.markers: list[MarkersToSend] = []
        self.held: list[Write] = []
        self.retries: list[Write] = []
        self._pids = itertools.count(1000)
        self._tokens = itertools.count()
        self.core.start_loading(0, coordinator_epoch)
        self.take(self.core.finish_loading(0, coordinator_epoch, list(self.log), self.now))

    def allocate(self) -> int:
        return next(self._pids)

    def take(self, fx: Effects, hold: bool = False) -> None:
        for token, answer in fx.answers:
            assert token not in self.answers
            self.answers[token] = answer
        self.markers += fx.markers
        self.retries += fx.retry_writes
        for write in fx.writes:
            if hold:
                self.held.append(write)
            else:
                self.persist(write)

    def persist(self, write: Write, error: ErrorCode = E.none) -> None:
        if error == E.none:
            self.log.append((write.key(), write.value()))
        self.take(self.core.on_write_done(write, error, self.now))

    def release(self, error: ErrorCode = E.none) -> None:
        held, self.held = self.held, []
        for write in held:
            self.persist(write, error)

    def request(self, method, *args, hold: bool = False):
        token = next(self._tokens)
        self.take(getattr(self.core, method)(*args, token=token), hold)
        return token

    def init(self, tid="t", timeout=60_000, expected=None, hold=False) -> Answer | None:
        token = self.request("init_producer_id", tid, timeout, expected, self.now, self.allocate, hold=hold)
        return self.answers.get(token)

    def add(self, tid, pid, epoch, *partitions, hold=False) -> ErrorCode | None:
        token = self.request("add_partitions_to_txn", tid, pid, epoch, partitions, self.now, hold=hold)
        return self.answers[token].error if token in self.answers else None

    def end(self, tid, pid, epoch, result, hold=False) -> ErrorCode | None:
        token = self.request("end_txn", tid, pid, epoch, result, self.now, hold=hold)
        return self.answers[token].error if token in self.answers else None

    def write_markers(self, error: ErrorCode = E.none) -> None:
        markers, self.markers = self.markers, []
        for m in markers:
            self.take(self.core.on_markers_written(m, {tp: error for tp in m.partitions}))

    def state(self, tid="t") -> TransactionState:
        return self.core.transaction(tid).state

    def last_record(self) -> tuple[str, TxnLogValue | None]:
        key, value = self.log[-1]
        return read_key(key), read_value(value)


def ongoing(d: Driver, tid="t", *partitions) -> Answer:
    answer = d.init(tid)
    assert d.add(tid, answer.producer_id, answer.producer_epoch, *(partitions or (FOO0, BAR0))) == E.none
    return answer


# -- InitProducerId -----------------------------------------------------------------------

def test_new_transactional_id_gets_an_allocated_producer_id_and_epoch_0_once_written():
    d = Driver()
    assert d.init(hold=True) is None  # nothing answered before the write
    assert d.core.transaction("t").pending_state == S.EMPTY
    d.release()
    assert d.answers[0] == Answer(E.none, 1000, 0)
    tid, value = d.last_record()
    assert tid == "t" and value.producer_id == 1000 and value.producer_epoch == 0
    assert value.transaction_status == S.EMPTY and value.transaction_partitions is None
    assert value.transaction_timeout_ms == 60_000 and value.transaction_start_timestamp_ms == -1


def test_init_again_bumps_the_epoch_and_keeps_the_producer_id():
    d = Driver()
    d.init()
    assert d.init(timeout=30_000) == Answer(E.none, 1000, 1)
    meta = d.core.transaction("t")
    assert meta.txn_timeout_ms == 30_000 and meta.last_producer_epoch == -1


def test_init_requests_refused_before_any_lookup():
    d = Driver(transaction_max_timeout_ms=60_000)
    assert d.init(timeout=60_001).error == E.invalid_transaction_timeout
    assert d.init(timeout=0).error == E.invalid_transaction_timeout
    assert d.init(tid="").error == E.invalid_request
    assert d.log == [] and d.core.transaction("t") is None


def test_init_without_transactional_id_is_an_idempotent_producer():
    d = Driver()
    assert d.init(tid=None) == Answer(E.none, 1000, 0)
    assert d.log == []


def test_allocator_failure_is_the_answer():
    d = Driver()

    def no_ids():
        raise KafkaError(E.coordinator_load_in_progress)

    token = d.request("init_producer_id", "t", 60_000, None, d.now, no_ids)
    assert d.answers[token].error == E.coordinator_load_in_progress and d.log == []


def test_kip_360_provided_producer_id_and_epoch():
    d = Driver()
    d.init()  # 1000/0
    assert d.init(expected=(1000, 0)) == Answer(E.none, 1000, 1)  # recovers: bump, remembers last epoch 0
    assert d.core.transaction("t").last_producer_epoch == 0
    assert d.init(expected=(1000, 0)) == Answer(E.none, 1000, 1)  # retry of that bump: same epoch, no bump
    assert d.init(expected=(1000, 5)).error == E.producer_fenced  # neither current nor last epoch
    assert d.init(expected=(999, 1)).error == E.producer_fenced  # another producer id
    assert d.init() == Answer(E.none, 1000, 2)  # a new instance: bump, forgets the last epoch
    assert d.init(expected=(1000, 1)).error == E.producer_fenced


def test_expected_producer_reads_minus_one_as_none():
    assert expected_producer(-1, -1) is None
    assert expected_producer(5, -1) == E.invalid_request
    assert expected_producer(-1, 3) == E.invalid_request
    assert expected_producer(5, 3) == (5, 3)


def test_exhausted_epoch_gets_a_new_producer_id():
    for state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        value = TxnLogValue(7, 32766, 60_000, state, None if state == S.EMPTY else (), 5, -1 if state == S.EMPTY else 1)
        d = Driver(records=[(key_bytes("t"), value_bytes(value))])
        assert d.init() == Answer(E.none, 1000, 0)  # 1000: the allocator's next id
        meta = d.core.transaction("t")
        assert meta.last_producer_id == 7 and meta.last_producer_epoch == -1
    value = TxnLogValue(7, 32765, 60_000, S.EMPTY, None, 5, -1)
    d = Driver(records=[(key_bytes("t"), value_bytes(value))])
    assert d.init() == Answer(E.none, 7, 32766)  # the last epoch a client gets
    assert d.init() == Answer(E.none, 1000, 0)


def test_retry_of_a_rotation_with_the_old_exhausted_epoch_gets_the_same_answer():
    d = Driver(records=[(key_bytes("t"), value_bytes(TxnLogValue(7, 32766, 60_000, S.EMPTY, None, 5, -1)))])
    assert d.init(expected=(7, 32766)) == Answer(E.none, 1000, 0)
    assert d.core.transaction("t").last_producer_epoch == 32766  # recorded: the producer sent it
    assert d.init(expected=(7, 32766)) == Answer(E.none, 1000, 0)  # retry: answer lost, nothing bumped
    assert d.init(expected=(7, 32765)).error == E.producer_fenced


def test_init_while_prepare_or_pending_is_concurrent_transactions():
    d = Driver()
    d.init(hold=True)
    assert d.init().error == E.concurrent_transactions  # the first write is still pending
    d.release()
    a = ongoing(d)
    assert d.end("t", a.producer_id, a.producer_epoch, COMMIT) == E.none
    assert d.state() == S.PREPARE_COMMIT and d.markers
    assert d.init().error == E.concurrent_transactions


# -- fencing an ongoing transaction ------------------------------------------------------------

def test_init_during_ongoing_transaction_aborts_it_with_a_bumped_epoch_and_fences_the_old_producer():
    d = Driver()
    old = ongoing(d)  # 1000/0 with foo-0, bar-0
    answer = d.init()
    assert answer.error == E.concurrent_transactions  # answered once PrepareAbort is written
    _, value = d.last_record()
    assert value.transaction_status == S.PREPARE_ABORT and value.producer_epoch == 1
    assert value.partitions() == {FOO0, BAR0}
    [markers] = d.markers
    assert markers.result == ABORT and markers.producer_epoch == 1 and markers.partitions == {FOO0, BAR0}
    assert d.add("t", 1000, old.producer_epoch, FOO1) == E.producer_fenced
    assert d.end("t", 1000, old.producer_epoch, COMMIT) == E.producer_fenced
    d.write_markers()
    assert d.last_record()[1].transaction_status == S.COMPLETE_ABORT and d.state() == S.COMPLETE_ABORT
    assert d.init() == Answer(E.none, 1000, 2)  # the retry bumps again


def test_failed_fence_write_keeps_the_bumped_epoch_and_does_not_bump_twice():
    d = Driver()
    ongoing(d)
    token = d.request("init_producer_id", "t", 60_000, None, d.now, d.allocate, hold=True)
    d.release(E.not_enough_replicas)
    assert d.answers[token].error == E.coordinator_not_available
    meta = d.core.transaction("t")
    assert meta.state == S.ONGOING and meta.producer_epoch == 1 and meta.has_failed_epoch_fence
    assert meta.pending_state is None
    assert d.end("t", 1000, 0, COMMIT) == E.producer_fenced  # fenced in memory all the same
    assert d.init().error == E.concurrent_transactions
    assert d.last_record()[1].producer_epoch == 1  # not bumped again
    d.write_markers()
    assert not d.core.transaction("t").has_failed_epoch_fence
    assert d.init() == Answer(E.none, 1000, 2)


# -- AddPartitionsToTxn, AddOffsetsToTxn ---------------------------------------------------------

def test_add_partitions_starts_the_transaction_with_its_start_time():
    d = Driver()
    a = d.init()
    d.now += 500
    assert d.add("t", a.producer_id, a.producer_epoch, FOO0) == E.none
    _, value = d.last_record()
    assert value.transaction_status == S.ONGOING and value.transaction_start_timestamp_ms == d.now
    assert value.partitions() == {FOO0}
    start = d.now
    d.now += 100
    records = len(d.log)
    assert d.add("t", a.producer_id, a.producer_epoch, FOO0) == E.none  # already in: no write
    assert len(d.log) == records
    assert d.add("t", a.producer_id, a.producer_epoch, BAR0) == E.none
    value = d.last_record()[1]
    assert value.partitions() == {FOO0, BAR0} and value.transaction_start_timestamp_ms == start
    assert value.transaction_last_update_timestamp_ms == d.now


def test_add_partitions_checks_producer_then_state():
    d = Driver()
    assert d.add("unknown", 1, 0, FOO0) == E.invalid_producer_id_mapping
    assert d.add("", 1, 0, FOO0) == E.invalid_request
    a = d.init()
    assert d.add("t", a.producer_id + 1, 0, FOO0) == E.invalid_producer_id_mapping
    assert d.add("t", a.producer_id, 1, FOO0) == E.producer_fenced
    assert d.add("t", a.producer_id, 0, FOO0, hold=True) is None
    assert d.add("t", a.producer_id, 0, FOO1) == E.concurrent_transactions  # a write is pending
    d.release()
    assert d.end("t", a.producer_id, 0, COMMIT, hold=True) is None
    assert d.add("t", a.producer_id, 0, FOO1) == E.concurrent_transactions
    d.release()
    assert d.state() == S.PREPARE_COMMIT
    assert d.add("t", a.producer_id, 0, FOO1) == E.concurrent_transactions  # Prepare*: markers going out


def test_failed_add_partitions_write_is_undone():
    d = Driver()
    a = d.init()
    token = d.request("add_partitions_to_txn", "t", a.producer_id, 0, [FOO0], d.now, hold=True)
    d.release(E.not_leader_or_follower)
    assert d.answers[token].error == E.not_coordinator
    meta = d.core.transaction("t")
    assert meta.state == S.EMPTY and meta.pending_state is None and not meta.partitions


def test_add_offsets_adds_the_groups_consumer_offsets_partition():
    d = Driver()
    a = d.init()
    token = d.request("add_offsets_to_txn", "t", a.producer_id, 0, "hello", 50, d.now)
    assert d.answers[token].error == E.none
    assert d.core.transaction("t").partitions == {("__consumer_offsets", 99162322 % 50)}


def test_verify_partitions_kip_890():
    d = Driver()
    a = ongoing(d, "t", FOO0)
    assert d.core.verify_partitions("t", a.producer_id, 0, [FOO0, FOO1]) == {FOO0: E.none, FOO1: E.invalid_txn_state}
    assert d.core.verify_partitions("t", a.producer_id, 1, [FOO0]) == {FOO0: E.producer_fenced}
    assert d.core.verify_partitions("x", 1, 0, [FOO0]) == {FOO0: E.invalid_producer_id_mapping}


# -- EndTxn ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("result, prepare, complete", [(COMMIT, S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
                                                       (ABORT, S.PREPARE_ABORT, S.COMPLETE_ABORT)])
def test_end_txn_prepare_markers_complete(result, prepare, complete):
    d = Driver()
    a = ongoing(d)
    assert d.end("t", a.producer_id, 0, result, hold=True) is None  # answered once Prepare* is written
    assert not d.markers
    d.release()
    assert d.answers[max(d.answers)].error == E.none
    assert d.last_record()[1].transaction_status == prepare and d.state() == prepare
    [markers] = d.markers
    assert markers == MarkersToSend("t", 1000, 0, 7, result, frozenset({FOO0, BAR0}))
    assert d.end("t", a.producer_id, 0, result) == E.concurrent_transactions  # retry while markers go out
    d.write_markers()
    _, value = d.last_record()
    assert value.transaction_status == complete and value.transaction_partitions == ()
    assert d.state() == complete and not d.core.transaction("t").partitions
    assert d.end("t", a.producer_id, 0, result) == E.none  # retry after: idempotent
    other = ABORT if result == COMMIT else COMMIT
    assert d.end("t", a.producer_id, 0, other) == E.invalid_txn_state
    # the next transaction starts from Complete*
    assert d.add("t", a.producer_id, 0, FOO1) == E.none and d.state() == S.ONGOING
    assert d.core.transaction("t").partitions == {FOO1}


def test_end_txn_errors():
    d = Driver()
    assert d.end("t", 1, 0, COMMIT) == E.invalid_producer_id_mapping
    assert d.end("", 1, 0, COMMIT) == E.invalid_request
    a = d.init()
    assert d.end("t", a.producer_id, 0, COMMIT) == E.invalid_txn_state  # Empty
    assert d.end("t", a.producer_id + 1, 0, COMMIT) == E.invalid_producer_id_mapping
    ongoing(d)  # epoch 1
    assert d.end("t", a.producer_id, 0, COMMIT) == E.producer_fenced
    assert d.end("t", a.producer_id, 2, COMMIT) == E.producer_fenced  # clients name the epoch exactly


def test_prepare_commit_without_pending_completion_answers_by_outcome():
    d = Driver()
    a = ongoing(d)
    d.end("t", a.producer_id, 0, COMMIT)
    # the markers are written but the completion cannot be: the partition is moving away
    markers, d.markers = d.markers, []
    d.take(d.core.on_markers_written(markers[0], {tp: E.none for tp in markers[0].partitions}), hold=True)
    [complete] = d.held
    assert complete.purpose == WritePurpose.COMPLETE and complete.transit.state == S.COMPLETE_COMMIT
    d.release(E.not_leader_or_follower)
    assert d.state() == S.PREPARE_COMMIT and d.core.transaction("t").pending_state is None
    assert d.end("t", a.producer_id, 0, COMMIT) == E.concurrent_transactions
    assert d.end("t", a.producer_id, 0, ABORT) == E.invalid_txn_state


def test_completion_write_that_finds_no_coordinator_available_is_retried():
    d = Driver()
    a = ongoing(d)
    d.end("t", a.producer_id, 0, ABORT)
    markers, d.markers = d.markers, []
    d.take(d.core.on_markers_written(markers[0], {tp: E.none for tp in markers[0].partitions}), hold=True)
    d.release(E.not_enough_replicas)
    [retry] = d.retries
    assert d.core.transaction("t").pending_state == S.COMPLETE_ABORT  # still pending
    d.persist(retry)
    assert d.state() == S.COMPLETE_ABORT


def test_transaction_without_partitions_completes_without_markers():
    d = Driver()
    a = d.init()
    assert d.add("t", a.producer_id, 0) == E.none  # an empty AddPartitionsToTxn starts it all the same
    assert d.end("t", a.producer_id, 0, COMMIT) == E.none
    assert not d.markers and d.state() == S.COMPLETE_COMMIT


# -- markers ------------------------------------------------------------------------------------------

def test_marker_errors_retry_stop_or_remove():
    d = Driver()
    a = ongoing(d, "t", FOO0, FOO1, BAR0)
    d.end("t", a.producer_id, 0, COMMIT)
    [m] = d.markers
    d.markers = []
    d.take(d.core.on_markers_written(m, {FOO0: E.none, FOO1: E.not_leader_or_follower, BAR0: E.request_timed_out}))
    [retry] = d.markers
    assert retry.partitions == {FOO1, BAR0} and retry.result == COMMIT and retry.producer_epoch == 0
    assert d.core.transaction("t").partitions == {FOO1, BAR0}
    d.markers = []
    d.take(d.core.on_markers_unroutable(retry, [BAR0]))  # deleted topic: no leader
    d.take(d.core.on_markers_written(retry, {FOO1: E.none}))
    assert d.state() == S.COMPLETE_COMMIT


def test_marker_fenced_by_a_newer_epoch_stops_sending():
    d = Driver()
    a = ongoing(d)
    d.end("t", a.producer_id, 0, COMMIT)
    [m] = d.markers
    d.markers = []
    d.take(d.core.on_markers_written(m, {FOO0: E.invalid_producer_epoch}))
    d.take(d.core.on_markers_written(m, {BAR0: E.none}))  # late answers are ignored
    assert not d.markers and d.state() == S.PREPARE_COMMIT
    assert d.core.transaction("t").pending_state == S.COMPLETE_COMMIT  # until a reload completes it


def test_unexpected_marker_error_is_a_bug():
    d = Driver()
    a = ongoing(d)
    d.end("t", a.producer_id, 0, COMMIT)
    with pytest.raises(UnexpectedMarkerError):
        d.core.on_markers_written(d.markers[0], {FOO0: E.corrupt_message})


# -- timeout -----------------------------------------------------------------------------------------

def test_timed_out_transaction_is_aborted_with_a_bumped_epoch():
    d = Driver()
    a = d.init(timeout=1000)
    d.add("t", a.producer_id, 0, FOO0)
    start = d.now
    d.now = start + 1000
    d.take(d.core.abort_timed_out_transactions(d.now))
    assert d.state() == S.ONGOING and not d.markers  # not yet: strictly older than the timeout
    d.now = start + 1001
    d.take(d.core.abort_timed_out_transactions(d.now), hold=True)
    [write] = d.held
    assert write.purpose == WritePurpose.TIMEOUT_ABORT and write.transit.producer_epoch == 1
    d.take(d.core.abort_timed_out_transactions(d.now))  # pending: not aborted twice
    assert len(d.held) == 1
    d.release()
    [m] = d.markers
    assert m.result == ABORT and m.producer_epoch == 1
    assert d.end("t", a.producer_id, 0, COMMIT) == E.producer_fenced
    d.write_markers()
    assert d.state() == S.COMPLETE_ABORT
    assert d.init(expected=(a.producer_id, 0)).error == E.producer_fenced  # the old producer is fenced
    assert d.init() == Answer(E.none, a.producer_id, 2)


# -- expiration ----------------------------------------------------------------------------------------

def test_idle_transactional_id_expires_with_a_tombstone():
    d = Driver(transactional_id_expiration_ms=10_000)
    d.init("idle")
    a = ongoing(d, "busy")
    d.now += 9_999
    d.take(d.core.expire_transactional_ids(d.now))
    assert d.core.transaction("idle") is not None
    d.now += 1
    d.take(d.core.expire_transactional_ids(d.now), hold=True)
    [write] = d.held
    assert write.transactional_id == "idle" and write.value() is None and write.key() == key_bytes("idle")
    assert d.init("idle").error == E.concurrent_transactions  # Dead is pending
    d.release()
    assert d.log[-1] == (key_bytes("idle"), None)
    assert d.core.transaction("idle") is None and d.core.transaction("busy").producer_id == a.producer_id
    assert d.init("idle").producer_id != 1000  # a new producer id


def test_failed_tombstone_keeps_the_id():
    d = Driver(transactional_id_expiration_ms=10_000)
    d.init()
    d.now += 10_000
    d.take(d.core.expire_transactional_ids(d.now), hold=True)
    d.release(E.request_timed_out)
    meta = d.core.transaction("t")
    assert meta is not None and meta.pending_state is None and meta.state == S.EMPTY


# -- loading and failover ------------------------------------------------------------------------------

def test_rebuild_last_record_wins_tombstones_delete_unknown_keys_skipped():
    def rec(tid, epoch, state=S.EMPTY):
        return key_bytes(tid), value_bytes(TxnLogValue(1, epoch, 100, state, None if state == S.EMPTY else (), 5, -1))
    records = [rec("a", 0), rec("b", 0), rec("a", 1), (key_bytes("b"), None), rec("c", 0), (b"\x00\x05junk", b"x"),
               (key_bytes("c"), None), rec("c", 3)]
    transactions, skipped = rebuild_transactions(records)
    assert sorted(transactions) == ["a", "c"] and skipped == 1
    assert transactions["a"].producer_epoch == 1 and transactions["c"].producer_epoch == 3
    core = TransactionCoordinator(TransactionConfig(num_partitions=1))
    core.start_loading(0, 1)
    assert core.finish_loading(0, 1, records, 0).skipped_records == 1
    assert core.transaction("b") is None and core.transaction("a").producer_epoch == 1


def test_failover_reloads_state_and_resends_markers_of_prepared_transactions():
    a_side = Driver(coordinator_epoch=7)
    committed = ongoing(a_side, "committing", FOO0, BAR0)
    aborted = ongoing(a_side, "aborting", FOO1)
    open_txn = ongoing(a_side, "open", ("baz", 0))
    a_side.init("empty")
    a_side.end("committing", committed.producer_id, 0, COMMIT)
    a_side.end("aborting", aborted.producer_id, 0, ABORT)
    # the coordinator dies before any marker is written; another broker leads the partition
    b_side = Driver(coordinator_epoch=8, records=a_side.log)
    assert {(m.transactional_id, m.result, m.partitions, m.coordinator_epoch, m.producer_epoch)
            for m in b_side.markers} == {("committing", COMMIT, frozenset({FOO0, BAR0}), 8, 0),
                                         ("aborting", ABORT, frozenset({FOO1}), 8, 0)}
    assert b_side.state("open") == S.ONGOING and b_side.core.transaction("open").partitions == {("baz", 0)}
    assert b_side.state("empty") == S.EMPTY
    assert b_side.end("committing", committed.producer_id, 0, COMMIT) == E.concurrent_transactions
    b_side.write_markers()
    assert b_side.state("committing") == S.COMPLETE_COMMIT and b_side.state("aborting") == S.COMPLETE_ABORT
    assert b_side.end("committing", committed.producer_id, 0, COMMIT) == E.none  # the client's retry
    assert b_side.add("open", open_txn.producer_id, 0, FOO0) == E.none  # the open one goes on
    # and the loaded ids keep their producers: a new instance bumps the epoch
    assert b_side.init("empty") == Answer(E.none, a_side.core.transaction("empty").producer_id, 1)


def test_a_stale_epochs_marker_answer_does_not_stop_the_reloaded_epochs_markers():
    """The same broker leads the partition again at a newer epoch while a WriteTxnMarkers of its
    old epoch is still in flight: that answer is dropped, and only its own pending completion
    with it (Kafka's removeMarkersForTxn(pendingCompleteTxn) removes that entry, not the newer
    one). Found by `weir sim --scenario transactions`: the transaction hung in PrepareCommit."""
    d = Driver(coordinator_epoch=7)
    answer = ongoing(d, "t", FOO0, BAR0)
    assert d.end("t", answer.producer_id, 0, COMMIT) == E.none
    (old,) = d.markers
    d.markers = []
    d.core.unload(0, 9)
    d.core.start_loading(0, 9)
    d.take(d.core.finish_loading(0, 9, list(d.log), d.now))
    (new,) = d.markers
    assert new.coordinator_epoch == 9 and old.coordinator_epoch == 7
    d.take(d.core.on_markers_written(old, {FOO0: E.none}))  # the old epoch's answer, late
    d.take(d.core.on_markers_written(old, {BAR0: E.request_timed_out}))
    assert d.markers == [new]  # nothing resent for the old epoch
    d.write_markers()
    assert d.state("t") == S.COMPLETE_COMMIT


def test_requests_while_loading_or_not_coordinator():
    core = TransactionCoordinator(TransactionConfig(num_partitions=1))
    fx = core.add_partitions_to_txn("t", 1, 0, [FOO0], 0, token="x")
    assert fx.answers == [("x", Answer(E.not_coordinator))]
    core.start_loading(0, 3)
    fx = core.end_txn("t", 1, 0, COMMIT, 0, token="y")
    assert fx.answers == [("y", Answer(E.coordinator_load_in_progress))]
    assert core.finish_loading(0, 2, [], 0).markers == []  # a stale load is ignored
    assert core.end_txn("t", 1, 0, COMMIT, 0, token="z").answers[0][1].error == E.coordinator_load_in_progress
    core.finish_loading(0, 3, [], 0)
    assert core.end_txn("t", 1, 0, COMMIT, 0, token="w").answers[0][1].error == E.invalid_producer_id_mapping


def test_write_finishing_after_the_partition_moved_answers_not_coordinator():
    d = Driver()
    d.init(hold=True)
    d.core.unload(0, 7)
    d.core.start_loading(0, 9)
    d.core.finish_loading(0, 9, list(d.log), d.now)  # the write had not reached the log
    d.release()
    assert d.answers[0].error == E.not_coordinator
    assert d.core.transaction("t") is None


def test_resignation_unloads_what_was_loaded_at_its_epoch_or_before():
    d = Driver()
    d.init()
    d.core.unload(0, 6)  # a stale resignation: the load at 7 is newer
    assert d.core.transaction("t") is not None
    d.core.unload(0, 8)  # a follower from epoch 8
    assert d.core.transaction("t") is None
    assert d.init().error == E.not_coordinator
    d.core.start_loading(0, 9)
    d.core.unload(0, 8)
    assert d.init().error == E.coordinator_load_in_progress
    d.core.unload(0)  # the partition is deleted
    assert d.init().error == E.not_coordinator


def test_a_record_that_is_never_written_refuses_the_load():
    fenced = TxnLogValue(1, 0, 100, S.ONGOING, (), 5, 1)
    raw = bytearray(value_bytes(fenced))
    raw[16] = S.PREPARE_EPOCH_FENCE
    with pytest.raises(RecordFormatError):
        rebuild_transactions([(key_bytes("t"), bytes(raw))])


# -- placement, configs, compatibility ------------------------------------------------------------------

def test_transactional_id_partition_is_kafkas():
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE: Utils.abs gives 0
    assert partition_for("my-txn", 7) == abs(java_string_hash("my-txn")) % 7
    assert TransactionCoordinator(TransactionConfig(num_partitions=50)).partition_for("hello") == 22


def test_config_defaults_and_names_are_kafkas():
    c = TransactionConfig()
    assert (c.transaction_max_timeout_ms, c.transactional_id_expiration_ms, c.num_partitions, c.replication_factor,
            c.min_isr, c.segment_bytes, c.abort_timed_out_transactions_interval_ms,
            c.remove_expired_transactional_ids_interval_ms) == (900000, 604800000, 50, 3, 2, 104857600, 10000, 3600000)
    c = TransactionConfig.from_broker({"transaction.state.log.num.partitions": "3", "transaction.max.timeout.ms": 5})
    assert c.num_partitions == 3 and c.transaction_max_timeout_ms == 5 and c.min_isr == 2
    assert TransactionConfig().topic_configs()["cleanup.policy"] == "compact"


def test_old_clients_hear_invalid_producer_epoch_for_producer_fenced():
    assert error_for_version("InitProducerId", 3, E.producer_fenced) == E.invalid_producer_epoch
    assert error_for_version("InitProducerId", 4, E.producer_fenced) == E.producer_fenced
    assert error_for_version("EndTxn", 1, E.producer_fenced) == E.invalid_producer_epoch
    assert error_for_version("AddPartitionsToTxn", 2, E.producer_fenced) == E.producer_fenced
    assert error_for_version("AddOffsetsToTxn", 0, E.concurrent_transactions) == E.concurrent_transactions


def test_append_errors_become_coordinator_errors():
    assert coordinator_error_for_append(E.not_enough_replicas) == E.coordinator_not_available
    assert coordinator_error_for_append(E.request_timed_out) == E.coordinator_not_available
    assert coordinator_error_for_append(E.not_leader_or_follower) == E.not_coordinator
    assert coordinator_error_for_append(E.message_too_large) == E.unknown_server_error


def test_writes_can_use_value_version_1_with_the_previous_producer_id():
    d = Driver(records=[(key_bytes("t"), value_bytes(TxnLogValue(7, 32766, 60_000, S.EMPTY, None, 5, -1)))])
    d.init(hold=True)
    [write] = d.held
    value = read_value(write.value(version=1))
    assert value.producer_id == 1000 and value.previous_producer_id == 7
    assert read_value(write.value()).previous_producer_id == -1  # v0 has no room for it
