"""Kafka's READ_COMMITTED semantics end to end on bytes: the partition's transaction table and
aborted index decide the LSO and the aborted list, the fetch cuts at the LSO, the consumer drops
aborted transactions and markers."""

from weir.transactions.partition_txns import AppendOrigin
from weir.transactions.read_committed import consume_read_committed, consume_read_uncommitted, fetch_read_committed

from .log_model import LogModel, data_batch, end_marker

P, Q, R = 1000, 2000, 3000
COORDINATOR = AppendOrigin.COORDINATOR


def txn(pid, value, seq):
    return data_batch([value], pid=pid, epoch=0, seq=seq, transactional=True)


def values(records):
    return [(r.offset, r.value) for r in records]


def interleaved_log() -> LogModel:
    log = LogModel()
    log.append(data_batch([b"x0"]))                          # 0
    log.append(txn(P, b"a1", 0))                             # 1  A (committed)
    log.append(txn(Q, b"b1", 0))                             # 2  B (aborted)
    log.append(txn(P, b"a2", 1))                             # 3
    log.append(txn(Q, b"b2", 1))                             # 4
    log.append(end_marker(P, 0, commit=True), origin=COORDINATOR)   # 5
    log.append(txn(R, b"c1", 0))                             # 6  C (ongoing)
    log.append(data_batch([b"x1"]))                          # 7
    log.append(end_marker(Q, 0, commit=False), origin=COORDINATOR)  # 8
    log.advance_high_watermark()                             # 9
    return log


def fetch(log: LogModel, offset: int):
    return fetch_read_committed(log.batches, [log.index], offset, log.last_stable_offset, log.log_end_offset)


def test_committed_aborted_and_ongoing_transactions_as_a_read_committed_consumer_sees_them():
    log = interleaved_log()
    assert log.last_stable_offset == 6                      # C's first offset
    batches, aborted = fetch(log, 0)
    assert len(batches) == 6                                 # offsets 0-5: below the LSO
    assert aborted == [(Q, 2)]
    assert values(consume_read_committed(batches, aborted)) == [(0, b"x0"), (1, b"a1"), (3, b"a2")]
    # read_uncommitted, up to the HW, sees everything that is data
    assert [v for _, v in values(consume_read_uncommitted(log.batches))] == [b"x0", b"a1", b"b1", b"a2", b"b2",
                                                                             b"c1", b"x1"]


def test_once_the_ongoing_transaction_commits_the_rest_becomes_readable():
    log = interleaved_log()
    log.append(end_marker(R, 0, commit=True), origin=COORDINATOR)  # 9
    assert log.last_stable_offset == 6                      # not before the HW passes its marker
    log.advance_high_watermark()
    assert log.last_stable_offset == 10
    batches, aborted = fetch(log, 6)
    assert aborted == [(Q, 2)]                               # B overlaps [6, 10): its marker is at 8
    assert values(consume_read_committed(batches, aborted)) == [(6, b"c1"), (7, b"x1")]
    everything, aborted = fetch(log, 0)
    assert [v for _, v in values(consume_read_committed(everything, aborted))] == [b"x0", b"a1", b"a2", b"c1",
                                                                                   b"x1"]


def test_an_abort_marker_ends_the_drop_and_the_producer_s_next_transaction_is_read():
    log = LogModel()
    log.append(txn(P, b"lost", 0))                            # 0
    log.append(end_marker(P, 0, commit=False), origin=COORDINATOR)  # 1
    log.append(txn(P, b"kept", 1))                            # 2
    log.append(end_marker(P, 0, commit=True), origin=COORDINATOR)   # 3
    log.advance_high_watermark()
    batches, aborted = fetch(log, 0)
    assert aborted == [(P, 0)]
    assert values(consume_read_committed(batches, aborted)) == [(2, b"kept")]
    # without the aborted list, a consumer would have kept the aborted record: the list matters
    assert values(consume_read_committed(batches, [])) == [(0, b"lost"), (2, b"kept")]


def test_a_fetch_past_an_aborted_transaction_does_not_list_it():
    log = LogModel()
    log.append(txn(P, b"lost", 0), end_marker(P, 0, commit=False), data_batch([b"x"]), origin=AppendOrigin.REPLICATION)
    log.advance_high_watermark()
    batches, aborted = fetch(log, 2)
    assert aborted == [] and values(consume_read_committed(batches, aborted)) == [(2, b"x")]


def test_the_spark_source_keeps_what_a_read_committed_consumer_keeps():
    from weir.spark.records import decode
    from weir.transactions.read_committed import AbortedTransactionFilter
    log = interleaved_log()
    log.append(end_marker(R, 0, commit=False), origin=COORDINATOR)  # 9: C aborted too
    log.advance_high_watermark()
    for start in (0, 3, 6):
        batches, aborted = fetch(log, start)
        columns = decode(b"".join(batches), start, log.last_stable_offset, AbortedTransactionFilter(aborted).keep)
        expected = consume_read_committed(batches, aborted, start)
        assert list(zip(columns.offsets.to_pylist(), columns.values.to_pylist())) == values(expected)
        assert columns.next_offset == log.last_stable_offset
    assert values(consume_read_committed(*fetch(log, 0))) == [(0, b"x0"), (1, b"a1"), (3, b"a2"), (7, b"x1")]
