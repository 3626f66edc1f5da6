"""A log's aborted transaction indexes, one .txnindex per segment (weir.log.txn_index_files):
entries go to the segment holding their marker, in Kafka's 34-byte format; searches start at the
fetch offset's segment; truncation, removed segments and reopening after a crash."""

from weir.log.txn_index_files import AbortedTxnIndexes, txn_index_path
from weir.transactions.txn_index import ABORTED_TXN_SIZE, AbortedTxn

BASES = [0, 100, 200]


def entries():
    return [AbortedTxn(1, 10, 20, 21), AbortedTxn(2, 15, 120, 121), AbortedTxn(3, 130, 140, 141),
            AbortedTxn(4, 150, 210, 211)]


def test_entries_go_to_the_segment_of_their_marker_once(tmp_path):
    indexes = AbortedTxnIndexes(tmp_path)
    indexes.append(entries(), BASES)
    indexes.append(entries()[:3], BASES)  # a replay offers them again: already there
    sizes = {base: txn_index_path(tmp_path, base).stat().st_size for base in BASES}
    assert sizes == {0: ABORTED_TXN_SIZE, 100: 2 * ABORTED_TXN_SIZE, 200: ABORTED_TXN_SIZE}
    assert indexes.last_indexed_offset == 210
    indexes.flush()


def test_a_search_starts_at_the_fetch_offsets_segment(tmp_path):
    indexes = AbortedTxnIndexes(tmp_path)
    indexes.append(entries(), BASES)
    assert [t.producer_id for t in indexes.collect(0, 300, BASES)] == [1, 2, 3, 4]
    # from 125: P2's transaction (15-120) ended before; P3 and P4 overlap
    assert [t.producer_id for t in indexes.collect(125, 300, BASES)] == [3, 4]
    assert [t.producer_id for t in indexes.collect(0, 12, BASES)] == [1]
    assert AbortedTxnIndexes(tmp_path).collect(0, 300, BASES) == []  # not loaded: nothing known


def test_truncation_and_removed_segments(tmp_path):
    indexes = AbortedTxnIndexes(tmp_path)
    indexes.append(entries(), BASES)
    indexes.truncate_to(135, [0, 100])  # the segment at 200 went, and the marker at 140
    assert [t.producer_id for t in indexes.collect(0, 300, [0, 100])] == [1, 2]
    assert not txn_index_path(tmp_path, 200).exists()
    assert txn_index_path(tmp_path, 100).stat().st_size == ABORTED_TXN_SIZE
    indexes.retain([100])  # retention removed the first segment
    assert not txn_index_path(tmp_path, 0).exists()
    indexes.clear()
    assert list(tmp_path.iterdir()) == []


def test_reopening_drops_entries_past_the_log_end_and_torn_entries(tmp_path):
    indexes = AbortedTxnIndexes(tmp_path)
    indexes.append(entries(), BASES)
    with open(txn_index_path(tmp_path, 0), "ab") as f:
        f.write(b"\x00" * 5)  # a torn last entry: cut
    again = AbortedTxnIndexes.load(tmp_path, BASES, log_end_offset=200)  # the segment at 200 lost its marker
    assert [t.producer_id for t in again.collect(0, 300, BASES)] == [1, 2, 3] and not again.lost
    assert txn_index_path(tmp_path, 0).stat().st_size == ABORTED_TXN_SIZE
    assert not txn_index_path(tmp_path, 200).exists()


def test_a_damaged_file_drops_every_index_to_build_them_again(tmp_path):
    """A file Kafka would not read, or entries outside their segment: dropping that one file alone
    would lose its aborts for good (a replay re-offers only entries past the last one indexed)."""
    for damage in (b"\x00\x07", AbortedTxn(5, 10, 20, 21).to_bytes()):  # a version; a marker in segment 0
        indexes = AbortedTxnIndexes(tmp_path)
        indexes.append(entries(), BASES)
        with open(txn_index_path(tmp_path, 100), "r+b") as f:
            f.write(damage)
        again = AbortedTxnIndexes.load(tmp_path, BASES, log_end_offset=300)
        assert again.lost and again.collect(0, 300, BASES) == [] and list(tmp_path.iterdir()) == []


def test_a_log_keeps_its_indexes_across_a_reopen_and_removes_strays(tmp_path):
    from weir.log import LogConfig, PartitionLog
    from weir.protocol.records import encode_batch
    log = PartitionLog.open(tmp_path, LogConfig(), 1_000)
    for i in range(3):
        log.append(bytearray(encode_batch([b"v"])), 0, 1_000)
    log.append_aborted_txns([AbortedTxn(9, 0, 1, 2)])
    log.close()
    txn_index_path(tmp_path, 500).write_bytes(AbortedTxn(9, 500, 501, 502).to_bytes())  # no segment of its own
    log = PartitionLog.open(tmp_path, LogConfig(), 1_000)
    assert log.collect_aborted_txns(0, 3) == [AbortedTxn(9, 0, 1, 2)]
    assert not txn_index_path(tmp_path, 500).exists()
    log.truncate_to(1)
    assert log.collect_aborted_txns(0, 3) == []
    log.close()
