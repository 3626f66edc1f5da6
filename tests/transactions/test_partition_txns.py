"""Transactions on a partition (Kafka's ProducerStateManager / ProducerAppendInfo): first offsets,
completion, the LSO, aborted index entries, validation errors, truncation, snapshots."""

import random

import pytest
from kio.schema.errors import ErrorCode

from weir.transactions.partition_txns import (SENTINEL, AppendedBatch, AppendOrigin, CompletedTxn,
                                              PartitionTransactions, ProducerTxnState, Refused,
                                              produce_error_for_verification)
from weir.transactions.txn_index import AbortedTxn

from .log_model import LogModel, at_offset, data_batch, end_marker

CLIENT, COORDINATOR, REPLICATION = AppendOrigin.CLIENT, AppendOrigin.COORDINATOR, AppendOrigin.REPLICATION
P, Q, R = 1000, 2000, 3000


def txn(pid, epoch=0, seq=0, n=1):
    return data_batch([b"v%d" % i for i in range(n)], pid=pid, epoch=epoch, seq=seq, transactional=True)


def plain(pid=-1, epoch=-1, seq=-1, n=1):
    return data_batch([b"p%d" % i for i in range(n)], pid=pid, epoch=epoch, seq=seq)


# -- first offset and completion ------------------------------------------------------------

def test_a_transactional_batch_starts_a_transaction_at_its_base_offset_and_later_ones_join():
    log = LogModel()
    log.append(plain(n=3))                       # 0-2, no producer
    assert log.append(txn(P, n=2)).completed == []   # 3-4
    log.append(txn(P, seq=2, n=2))               # 5-6 joins
    assert log.txns.ongoing_transactions() == [(3, P)]
    assert log.txns.producers[P].current_txn_first_offset == 3
    assert log.txns.has_ongoing_transaction(P) and not log.txns.has_ongoing_transaction(Q)


def test_commit_marker_completes_the_transaction():
    log = LogModel()
    log.append(txn(P, n=2))                      # 0-1
    outcome = log.append(end_marker(P, 0, commit=True, coordinator_epoch=4), origin=COORDINATOR)  # 2
    assert outcome.completed == [CompletedTxn(P, 0, 2, is_aborted=False)]
    assert outcome.aborted == [] and len(log.index) == 0
    assert log.txns.ongoing_transactions() == []
    assert log.txns.producers[P] == ProducerTxnState(0, 4, None, 2_000)


def test_abort_marker_completes_with_an_aborted_index_entry():
    log = LogModel()
    log.append(txn(P))                           # 0
    outcome = log.append(end_marker(P, 0, commit=False), origin=COORDINATOR)  # 1
    assert outcome.completed == [CompletedTxn(P, 0, 1, is_aborted=True)]
    assert outcome.aborted == [AbortedTxn(P, 0, 1, last_stable_offset=2)]
    assert log.index.entries == outcome.aborted


def test_a_marker_without_an_ongoing_transaction_completes_nothing_but_moves_the_epochs():
    log = LogModel()
    outcome = log.append(end_marker(P, 3, commit=False, coordinator_epoch=2), origin=COORDINATOR)
    assert outcome.completed == [] and outcome.aborted == []
    assert log.txns.producers[P].producer_epoch == 3 and log.txns.producers[P].coordinator_epoch == 2
    assert log.append(txn(P, epoch=2)).error == ErrorCode.invalid_producer_epoch


def test_a_control_batch_emptied_by_the_cleaner_changes_nothing():
    table = PartitionTransactions(verification_enabled=False)
    table.complete_append(table.prepare_append([AppendedBatch.of(at_offset(txn(P), 0))], CLIENT))
    emptied = AppendedBatch(AppendedBatch.of(at_offset(end_marker(P, 9, False, 9), 1)).header, None)
    before = dict(table.producers)
    outcome = table.complete_append(table.prepare_append([emptied], COORDINATOR))
    assert outcome.completed == [] and table.producers == before and table.ongoing_transactions() == [(0, P)]


def test_idempotent_and_producerless_batches_start_nothing():
    log = LogModel()
    log.append(plain(), plain(pid=Q, epoch=0, seq=0))
    assert log.txns.ongoing_transactions() == []
    assert log.txns.producers[Q].current_txn_first_offset is None
    assert -1 not in log.txns.producers


# -- last stable offset ---------------------------------------------------------------------

def test_lso_is_the_earliest_ongoing_first_offset_bounded_by_the_high_watermark():
    log = LogModel()
    log.append(plain(n=5))                       # 0-4
    log.append(txn(P))                           # 5
    log.append(plain(n=2))                       # 6-7
    log.append(txn(Q))                           # 8
    log.advance_high_watermark()                 # 9
    assert log.last_stable_offset == 5
    log.append(end_marker(P, 0, commit=True), origin=COORDINATOR)  # 9
    log.advance_high_watermark()
    assert log.last_stable_offset == 8
    log.append(end_marker(Q, 0, commit=False), origin=COORDINATOR)  # 10
    log.advance_high_watermark()
    assert log.last_stable_offset == 11 == log.high_watermark
    log.append(txn(R))                           # 11, above the HW
    assert log.txns.last_stable_offset(11) == 11  # LSO <= HW
    assert log.txns.last_stable_offset(4) == 4
    assert log.txns.last_stable_offset(12) == 11


def test_lso_without_transactions_is_the_high_watermark():
    table = PartitionTransactions()
    assert table.last_stable_offset(0) == 0 and table.last_stable_offset(42) == 42
    assert table.first_unstable_offset(42) is None


def test_a_completed_transaction_stays_unstable_until_its_marker_is_below_the_hw():
    log = LogModel()
    log.append(txn(P))                           # 0
    log.advance_high_watermark()                 # 1
    log.append(plain(n=2))                       # 1-2
    log.append(end_marker(P, 0, commit=True), origin=COORDINATOR)  # 3, not replicated
    log.advance_high_watermark(3)
    assert log.txns.first_undecided_offset() is None
    assert log.last_stable_offset == 0           # the marker could still be lost
    log.advance_high_watermark(4)
    assert log.last_stable_offset == 4
    assert log.txns.unreplicated == {}


def test_lso_is_raised_to_the_log_start_offset():
    log = LogModel()
    log.append(plain(n=3), txn(P), plain(n=5))    # txn at 3
    log.advance_high_watermark()
    assert log.txns.last_stable_offset(9, log_start_offset=6) == 6
    assert log.txns.last_stable_offset(9, log_start_offset=2) == 3


def test_log_start_forgets_completed_transactions_below_it():
    log = LogModel()
    log.append(txn(P), end_marker(P, 0, commit=True), origin=REPLICATION)
    log.txns.on_log_start_offset_incremented(2)
    assert log.txns.unreplicated == {} and log.txns.last_stable_offset(2) == 2


# -- the aborted index's last stable offset -------------------------------------------------

def test_aborted_entry_lso_is_the_earliest_other_ongoing_transaction():
    log = LogModel()
    log.append(txn(Q))                           # 0: Q ongoing
    log.append(txn(P))                           # 1
    log.append(txn(R))                           # 2
    outcome = log.append(end_marker(P, 0, commit=False), origin=COORDINATOR)  # 3
    assert outcome.aborted == [AbortedTxn(P, 1, 3, last_stable_offset=0)]
    log.append(end_marker(Q, 0, commit=True), origin=COORDINATOR)  # 4
    outcome = log.append(end_marker(R, 0, commit=False), origin=COORDINATOR)  # 5
    assert outcome.aborted == [AbortedTxn(R, 2, 5, last_stable_offset=6)]


def test_aborted_entry_lso_sees_transactions_started_in_the_same_append():
    # UnifiedLog.append registers the append's new transactions before the completions' LSOs
    log = LogModel()
    log.append(txn(P))                           # 0
    outcome = log.append(end_marker(P, 0, commit=False), txn(Q), end_marker(Q, 0, commit=False),
                         origin=REPLICATION)     # 1, 2, 3
    assert outcome.aborted == [AbortedTxn(P, 0, 1, last_stable_offset=2), AbortedTxn(Q, 2, 3, last_stable_offset=4)]


def test_a_producer_may_run_several_transactions_in_one_replicated_append():
    log = LogModel()
    outcome = log.append(txn(P), end_marker(P, 0, commit=False), txn(P, seq=1), end_marker(P, 0, commit=True),
                         txn(P, seq=2), origin=REPLICATION)
    assert outcome.completed == [CompletedTxn(P, 0, 1, True), CompletedTxn(P, 2, 3, False)]
    assert outcome.aborted == [AbortedTxn(P, 0, 1, 2)]
    assert log.txns.ongoing_transactions() == [(4, P)]


# -- validation ---------------------------------------------------------------------------

def test_data_batch_of_an_older_epoch_is_invalid_producer_epoch():
    log = LogModel()
    log.append(txn(P, epoch=2))
    log.append(end_marker(P, 2, commit=True), origin=COORDINATOR)
    refused = log.append(txn(P, epoch=1))
    assert isinstance(refused, Refused) and refused.error == ErrorCode.invalid_producer_epoch
    assert log.append(plain(pid=P, epoch=1, seq=0)).error == ErrorCode.invalid_producer_epoch
    assert log.append(txn(P, epoch=1), origin=REPLICATION).completed == []  # a follower only logs it


def test_marker_of_an_older_epoch_is_invalid_producer_epoch_and_of_the_same_epoch_passes():
    log = LogModel()
    log.append(txn(P, epoch=5))
    assert log.append(end_marker(P, 4, commit=False), origin=COORDINATOR).error == ErrorCode.invalid_producer_epoch
    assert log.append(end_marker(P, 5, commit=False), origin=COORDINATOR).completed[0].is_aborted


def test_fencing_abort_with_a_bumped_epoch_fences_the_old_producer():
    log = LogModel()
    log.append(txn(P, epoch=5))
    assert log.append(end_marker(P, 6, commit=False), origin=COORDINATOR).completed == [CompletedTxn(P, 0, 1, True)]
    assert log.append(txn(P, epoch=5, seq=1)).error == ErrorCode.invalid_producer_epoch
    assert isinstance(log.append(txn(P, epoch=6)).completed, list)


def test_marker_from_an_older_coordinator_epoch_is_transaction_coordinator_fenced():
    log = LogModel()
    log.append(txn(P))
    log.append(end_marker(P, 0, commit=True, coordinator_epoch=7), origin=COORDINATOR)
    log.append(txn(P, seq=1))
    refused = log.append(end_marker(P, 0, commit=False, coordinator_epoch=6), origin=COORDINATOR)
    assert refused.error == ErrorCode.transaction_coordinator_fenced
    assert log.txns.ongoing_transactions() == [(2, P)]
    assert log.append(end_marker(P, 0, commit=False, coordinator_epoch=7), origin=COORDINATOR).completed
    log.append(txn(P, seq=2))
    assert log.append(end_marker(P, 0, commit=True, coordinator_epoch=6), origin=REPLICATION).completed


def test_non_transactional_batch_during_a_transaction_is_invalid_txn_state_from_every_origin():
    log = LogModel()
    log.append(txn(P))
    for origin in (CLIENT, REPLICATION):
        refused = log.append(plain(pid=P, epoch=0, seq=1), origin=origin)
        assert refused.error == ErrorCode.invalid_txn_state
    log.append(end_marker(P, 0, commit=True), origin=COORDINATOR)
    assert log.append(plain(pid=P, epoch=0, seq=1)).completed == []


def test_an_append_is_checked_whole_before_anything_changes():
    log2 = LogModel()
    log2.append(txn(Q, epoch=3))
    before = (dict(log2.txns.producers), log2.txns.ongoing_transactions())
    refused = log2.append(txn(P), plain(pid=R, epoch=0, seq=0), txn(Q, epoch=2))
    assert refused.error == ErrorCode.invalid_producer_epoch
    assert (dict(log2.txns.producers), log2.txns.ongoing_transactions()) == before
    assert len(log2.batches) == 1


def test_an_append_checked_against_a_table_that_changed_since_is_not_applied():
    table = PartitionTransactions(verification_enabled=False)
    first = table.prepare_append([AppendedBatch.of(at_offset(txn(P), 0))], CLIENT)
    second = table.prepare_append([AppendedBatch.of(at_offset(txn(Q), 1))], CLIENT)
    table.complete_append(first)
    with pytest.raises(AssertionError):
        table.complete_append(second)


# -- KIP-890 part 1 verification ----------------------------------------------------------

def test_a_first_transactional_batch_needs_the_partition_s_verification_guard():
    log = LogModel(verification_enabled=True)
    assert log.append(txn(P)).error == ErrorCode.invalid_txn_state  # never verified
    guard = log.txns.maybe_start_transaction_verification(P, 0, 0, now=100)
    assert guard is not SENTINEL and log.txns.verification_guard(P) is guard
    assert log.txns.maybe_start_transaction_verification(P, 0, 0, now=200) is guard  # the same until used
    other = log.txns.maybe_start_transaction_verification(Q, 0, 0, now=100)
    assert log.append(txn(P), guard=other).error == ErrorCode.invalid_txn_state  # another producer's guard
    assert log.append(txn(P), guard=guard).completed == []
    assert log.txns.verification_guard(P) is SENTINEL  # retired by the append
    # the transaction is ongoing here now: no verification needed for the next batches
    assert log.txns.maybe_start_transaction_verification(P, 1, 0, now=300) is SENTINEL
    assert log.append(txn(P, seq=1)).completed == []


def test_a_stale_guard_after_an_abort_is_refused():
    # the ABA race: verified, aborted by the coordinator, then a retry with the old guard
    log = LogModel(verification_enabled=True)
    guard = log.txns.maybe_start_transaction_verification(P, 0, 0, now=0)
    log.append(txn(P), guard=guard)
    log.append(end_marker(P, 0, commit=False), origin=COORDINATOR)
    assert log.append(txn(P, seq=1), guard=guard).error == ErrorCode.invalid_txn_state


def test_markers_and_replication_need_no_guard_and_verification_can_be_disabled():
    log = LogModel(verification_enabled=True)
    assert log.append(txn(P), origin=REPLICATION).completed == []
    assert log.append(end_marker(P, 0, commit=True), origin=COORDINATOR).completed
    assert LogModel(verification_enabled=False).append(txn(P)).completed == []


def test_verification_keeps_the_lowest_sequence_and_refuses_higher_ones():
    log = LogModel(verification_enabled=True)
    guard = log.txns.maybe_start_transaction_verification(P, 5, 0, now=0)
    log.txns.maybe_start_transaction_verification(P, 3, 0, now=0)
    log.txns.maybe_start_transaction_verification(P, 9, 0, now=0)
    assert log.txns.verification[P].lowest_sequence == 3
    assert log.append(txn(P, seq=5), guard=guard).error == ErrorCode.out_of_order_sequence_number
    log.txns.maybe_start_transaction_verification(P, 7, 1, now=0)  # a new epoch starts over
    assert (log.txns.verification[P].epoch, log.txns.verification[P].lowest_sequence) == (1, 7)
    assert log.append(txn(P, epoch=1, seq=7), guard=guard).completed == []


def test_verification_states_and_idle_producers_expire():
    log = LogModel(verification_enabled=True)
    log.txns.maybe_start_transaction_verification(P, 0, 0, now=1_000)
    log.append(plain(pid=Q, epoch=0, seq=0), txn(R), origin=REPLICATION)  # timestamps 1_000
    log.advance_high_watermark()
    log.txns.remove_expired_producers(now=1_999, producer_id_expiration_ms=1_000)
    assert set(log.txns.producers) == {Q, R} and P in log.txns.verification
    log.txns.remove_expired_producers(now=2_000, producer_id_expiration_ms=1_000)
    assert set(log.txns.producers) == {R}  # R's transaction is ongoing
    assert log.txns.verification == {}


def test_producer_fenced_from_the_coordinator_reaches_the_producer_as_invalid_producer_epoch():
    assert produce_error_for_verification(ErrorCode.producer_fenced) == ErrorCode.invalid_producer_epoch
    assert produce_error_for_verification(ErrorCode.invalid_txn_state) == ErrorCode.invalid_txn_state


# -- truncation ---------------------------------------------------------------------------

def state_of(table: PartitionTransactions, high_watermark: int):
    return (dict(table.producers), table.ongoing_transactions(),
            sorted((t.first_offset, t) for t in table.unreplicated.values() if t.last_offset >= high_watermark),
            table.last_stable_offset(high_watermark))


def rebuilt(batches: list[bytes], high_watermark: int) -> PartitionTransactions:
    table = PartitionTransactions()
    table.replay([AppendedBatch.of(b) for b in batches])
    table.on_high_watermark_updated(high_watermark)
    return table


def test_truncation_reopens_a_transaction_whose_marker_is_cut_and_drops_one_started_above():
    log = LogModel()
    log.append(plain(n=2), txn(P))                # P from 2
    log.advance_high_watermark()                  # 3
    log.append(end_marker(P, 1, commit=False, coordinator_epoch=4), origin=COORDINATOR)  # 3, epoch bumped
    log.append(txn(Q))                            # 4
    log.txns.truncate_to(3)
    log.index.truncate_to(3)
    assert log.txns.ongoing_transactions() == [(2, P)]
    assert log.txns.producers[P] == ProducerTxnState(0, -1, 2, 1_000)  # epoch and coordinator epoch as before
    assert Q not in log.txns.producers
    assert len(log.index) == 0
    assert log.txns.last_stable_offset(3) == 2


def test_truncation_below_the_high_watermark_asks_for_a_rebuild():
    log = LogModel()
    log.append(txn(P), txn(P, seq=1))
    log.advance_high_watermark()
    assert log.txns.can_truncate_to(2) and not log.txns.can_truncate_to(1)
    with pytest.raises(AssertionError):
        log.txns.truncate_to(1)


def test_truncation_inside_a_batch_is_a_bug():
    log = LogModel()
    log.append(txn(P, n=3))
    with pytest.raises(AssertionError):
        log.txns.truncate_to(1)


@pytest.mark.parametrize("seed", range(40))
def test_truncation_leaves_what_replaying_the_kept_log_leaves(seed):
    rng = random.Random(seed)
    log = LogModel()
    producers = {pid: {"epoch": 0, "seq": 0, "coordinator_epoch": 0} for pid in (P, Q, R)}
    for _ in range(rng.randrange(5, 40)):
        pid = rng.choice(list(producers))
        p = producers[pid]
        kind = rng.random()
        if kind < 0.5:
            batch = txn(pid, epoch=p["epoch"], seq=p["seq"], n=rng.randrange(1, 3))
            p["seq"] += 1
        elif kind < 0.6:
            batch = plain(n=rng.randrange(1, 3))
        else:
            if rng.random() < 0.2:
                p["epoch"] += 1
                p["seq"] = 0
            if rng.random() < 0.2:
                p["coordinator_epoch"] += 1
            batch = end_marker(pid, p["epoch"], rng.random() < 0.5, p["coordinator_epoch"])
        outcome = log.append(batch, origin=REPLICATION)
        assert not isinstance(outcome, Refused), outcome
        if rng.random() < 0.2:
            log.advance_high_watermark(rng.randrange(log.high_watermark, log.log_end_offset + 1))
    boundaries = [AppendedBatch.of(b).header.base_offset for b in log.batches] + [log.log_end_offset]
    cut = rng.choice([b for b in boundaries if b >= log.high_watermark])
    log.txns.truncate_to(cut)
    log.index.truncate_to(cut)
    kept = [b for b in log.batches if AppendedBatch.of(b).header.base_offset < cut]
    fresh = rebuilt(kept, log.high_watermark)
    assert state_of(log.txns, log.high_watermark) == state_of(fresh, log.high_watermark)
    # the same aborted transactions; their LSOs depend on how the batches were grouped into
    # appends (one replay registers every transaction it starts first), as in Kafka
    replayed = PartitionTransactions().replay([AppendedBatch.of(b) for b in kept]).aborted
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in log.index.entries] == \
        [(e.producer_id, e.first_offset, e.last_offset) for e in replayed]


def test_truncate_fully_and_start_at_forgets_everything():
    log = LogModel()
    log.append(txn(P))
    log.txns.truncate_fully_and_start_at(50)
    assert log.txns.producers == {} and log.txns.ongoing_transactions() == []
    assert not log.txns.can_truncate_to(49)


# -- snapshots ------------------------------------------------------------------------------

def test_snapshot_round_trip_keeps_producers_and_ongoing_transactions():
    log = LogModel()
    log.append(txn(P, epoch=2), plain(pid=Q, epoch=1, seq=0), txn(R))
    log.append(end_marker(R, 0, commit=True, coordinator_epoch=3), origin=COORDINATOR)
    loaded = PartitionTransactions.from_snapshot(log.txns.to_snapshot(), log.log_end_offset)
    assert loaded.producers == log.txns.producers
    assert loaded.ongoing_transactions() == [(0, P)]
    assert loaded.to_snapshot() == log.txns.to_snapshot()
    assert not loaded.can_truncate_to(log.log_end_offset - 1) and loaded.can_truncate_to(log.log_end_offset)
    with pytest.raises(ValueError):
        PartitionTransactions.from_snapshot('{"version": 99, "producers": {}}', 0)


def test_rebuild_from_a_snapshot_and_the_batches_after_it_equals_the_live_table():
    log = LogModel()
    log.append(txn(P), plain(n=2), txn(Q))
    log.advance_high_watermark()
    snapshot, snapshot_offset = log.txns.to_snapshot(), log.log_end_offset
    after = len(log.batches)
    log.append(end_marker(P, 0, commit=False), origin=COORDINATOR)
    log.append(txn(R), txn(P, seq=1))
    log.append(end_marker(Q, 0, commit=True, coordinator_epoch=1), origin=COORDINATOR)
    log.advance_high_watermark()
    loaded = PartitionTransactions.from_snapshot(snapshot, snapshot_offset)
    outcome = loaded.replay([AppendedBatch.of(b) for b in log.batches[after:]])
    loaded.on_high_watermark_updated(log.high_watermark)
    assert [e for e in outcome.aborted] == log.index.entries
    assert state_of(loaded, log.high_watermark) == state_of(log.txns, log.high_watermark)
    assert loaded.last_stable_offset(log.high_watermark) == 5  # R's transaction


def test_replay_refuses_a_log_kafka_would_refuse():
    table = PartitionTransactions()
    with pytest.raises(ValueError):
        table.replay([AppendedBatch.of(at_offset(txn(P), 0)), AppendedBatch.of(at_offset(plain(pid=P, epoch=0), 1))])


def test_lso_counts_a_completed_transaction_stable_once_the_given_hw_passes_its_marker():
    table = PartitionTransactions(verification_enabled=False)
    table.replay([AppendedBatch.of(at_offset(txn(P), 0)), AppendedBatch.of(at_offset(end_marker(P, 0, True), 1))])
    assert table.last_stable_offset(1) == 0  # the marker at 1 is not below the HW
    assert table.last_stable_offset(2) == 2  # even before on_high_watermark_updated(2)


def test_a_checked_append_survives_hw_moves_but_not_a_new_verification():
    table = PartitionTransactions(verification_enabled=False)
    checked = table.prepare_append([AppendedBatch.of(at_offset(txn(P), 0))], CLIENT)
    table.on_high_watermark_updated(0)
    table.on_log_start_offset_incremented(0)
    table.complete_append(checked)
    checked = table.prepare_append([AppendedBatch.of(at_offset(txn(Q), 1))], CLIENT)
    table.maybe_start_transaction_verification(Q, 0, 0, now=0)
    with pytest.raises(AssertionError):
        table.complete_append(checked)
