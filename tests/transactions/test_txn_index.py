"""The aborted transaction index: Kafka's AbortedTxn entries (34 bytes in .txnindex), the lookup a
READ_COMMITTED fetch makes (collectAbortedTxns) and truncation."""

import pytest

from weir.transactions.txn_index import (ABORTED_TXN_SIZE, AbortedTxn, TransactionIndex, TxnIndexFormatError,
                                         collect_aborted_transactions)


def test_entry_bytes_by_hand():
    entry = AbortedTxn(producer_id=4242, first_offset=10, last_offset=20, last_stable_offset=21)
    expected = (b"\x00\x00"                                # version 0
                + b"\x00\x00\x00\x00\x00\x00\x10\x92"      # producerId 4242
                + b"\x00\x00\x00\x00\x00\x00\x00\x0a"      # firstOffset 10
                + b"\x00\x00\x00\x00\x00\x00\x00\x14"      # lastOffset 20
                + b"\x00\x00\x00\x00\x00\x00\x00\x15")     # lastStableOffset 21
    assert ABORTED_TXN_SIZE == 34
    assert entry.to_bytes() == expected
    assert AbortedTxn.from_bytes(expected) == entry
    assert entry.as_aborted_transaction() == (4242, 10)


def test_index_file_round_trip_and_refusals():
    index = TransactionIndex([AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10)])
    data = index.to_bytes()
    assert len(data) == 68
    assert TransactionIndex.from_bytes(data).entries == index.entries
    with pytest.raises(TxnIndexFormatError):
        TransactionIndex.from_bytes(data[:-1])  # a trailing partial entry
    with pytest.raises(TxnIndexFormatError):
        TransactionIndex.from_bytes(b"\x00\x01" + data[2:34])  # version 1 is unknown


def test_last_offsets_must_increase():
    index = TransactionIndex([AbortedTxn(1, 0, 5, 6)])
    with pytest.raises(ValueError):
        index.append(AbortedTxn(2, 1, 5, 6))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(2, 1, 4, 6))


def test_collect_aborted_txns_overlapping_the_fetch_range():
    a, b, c = AbortedTxn(1, 0, 10, 11), AbortedTxn(2, 5, 20, 21), AbortedTxn(3, 25, 30, 31)
    index = TransactionIndex([a, b, c])
    assert index.collect_aborted_txns(11, 25).aborted == [b]  # a ended before; c starts at the bound
    assert index.collect_aborted_txns(10, 26).aborted == [a, b, c]
    assert index.collect_aborted_txns(31, 40).aborted == []
    assert index.collect_aborted_txns(0, 5).aborted == [a]


def test_search_is_complete_once_an_entry_s_lso_reaches_the_upper_bound():
    # b's LSO 3: when b was aborted, a transaction from offset 3 was still ongoing, so entries
    # after b may start below any bound above 3; c's LSO 31 tells the search to stop at bound 31
    index = TransactionIndex([AbortedTxn(1, 0, 10, 11), AbortedTxn(2, 5, 20, 3), AbortedTxn(3, 25, 30, 31)])
    assert index.collect_aborted_txns(0, 11).is_complete  # a's LSO 11 >= 11: stops at a
    assert index.collect_aborted_txns(0, 11).aborted == [AbortedTxn(1, 0, 10, 11)]
    assert not index.collect_aborted_txns(0, 40).is_complete
    second = TransactionIndex([AbortedTxn(4, 35, 36, 37)])
    assert collect_aborted_transactions([index, second], 12, 36) == [AbortedTxn(2, 5, 20, 3),
                                                                      AbortedTxn(3, 25, 30, 31),
                                                                      AbortedTxn(4, 35, 36, 37)]
    assert collect_aborted_transactions([index, second], 12, 30) == [AbortedTxn(2, 5, 20, 3),
                                                                      AbortedTxn(3, 25, 30, 31)]


def test_truncate_removes_entries_whose_marker_is_at_or_above():
    index = TransactionIndex([AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10), AbortedTxn(3, 12, 14, 15)])
    index.truncate_to(9)
    assert [e.producer_id for e in index.entries] == [1]
    index.append(AbortedTxn(2, 3, 7, 8))  # appending goes on after the truncation point
    index.truncate_to(100)
    assert len(index) == 2
    index.truncate_to(0)
    assert len(index) == 0
