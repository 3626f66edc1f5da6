"""The idempotent producer's rules, one test per rule."""

from kio.schema.errors import ErrorCode

from weir.replication.producer_state import MAX_SEQUENCE, Duplicate, ProducerStateTable


def table_with(*batches) -> ProducerStateTable:
    """Batches as (first sequence, count, first offset), all from producer 7, epoch 0."""
    table = ProducerStateTable()
    for first, count, offset in batches:
        assert table.check(7, 0, first, count) is None
        table.record(7, 0, first, count, offset, offset + count - 1)
    return table


def test_a_producer_the_table_does_not_know_is_taken_at_any_sequence():
    """Kafka since KIP-360: its earlier batches may be gone (retention, DeleteRecords) or its state
    expired; it goes on from wherever it stands, and from there in order."""
    table = ProducerStateTable()
    assert table.check(7, 0, 5, 10) is None
    table.record(7, 0, 5, 10, 100, 109)
    assert table.check(7, 0, 15, 1) is None
    assert table.check(7, 0, 16, 1) == ErrorCode.out_of_order_sequence_number


def test_a_producer_known_only_by_a_transaction_marker_starts_at_sequence_zero():
    table = ProducerStateTable()
    table.record_marker(7, 2)
    assert table.check(7, 2, 3, 1) == ErrorCode.out_of_order_sequence_number
    assert table.check(7, 2, 0, 1) is None


def test_next_batch_continues_the_sequence():
    table = table_with((0, 10, 100))
    assert table.check(7, 0, 10, 5) is None


def test_gap_in_sequence_is_out_of_order():
    table = table_with((0, 10, 100))
    assert table.check(7, 0, 11, 5) == ErrorCode.out_of_order_sequence_number


def test_retry_of_one_of_last_five_batches_is_a_duplicate_with_original_offsets():
    table = table_with((0, 10, 100), (10, 10, 110), (20, 10, 120), (30, 10, 130), (40, 10, 140))
    assert table.check(7, 0, 10, 10) == Duplicate(110, 119)
    assert table.check(7, 0, 40, 10) == Duplicate(140, 149)


def test_only_five_batches_are_remembered():
    table = table_with(*[(i * 10, 10, 100 + i * 10) for i in range(6)])
    assert table.check(7, 0, 0, 10) == ErrorCode.out_of_order_sequence_number  # the sixth pushed it out
    assert table.check(7, 0, 10, 10) == Duplicate(110, 119)


def test_older_epoch_is_fenced():
    table = ProducerStateTable()
    table.record(7, 3, 0, 1, 0, 0)
    assert table.check(7, 2, 1, 1) == ErrorCode.invalid_producer_epoch


def test_new_epoch_starts_again_at_zero():
    table = table_with((0, 10, 100))
    assert table.check(7, 1, 0, 3) is None
    assert table.check(7, 1, 10, 3) == ErrorCode.out_of_order_sequence_number
    table.record(7, 1, 0, 3, 110, 112)
    assert table.check(7, 1, 3, 1) is None


def test_sequence_wraps_at_int32_max():
    table = ProducerStateTable()
    table.record(7, 0, 0, 1, 0, 0)
    table.producers[7].batches[-1] = type(table.producers[7].batches[-1])(MAX_SEQUENCE - 1, MAX_SEQUENCE, 5, 5)
    assert table.check(7, 0, 0, 4) is None


def test_batches_without_producer_id_are_not_checked():
    assert ProducerStateTable().check(-1, -1, -1, 10) is None


def test_snapshot_round_trip():
    table = table_with((0, 10, 100), (10, 10, 110))
    again = ProducerStateTable.from_json(table.to_json())
    assert again.check(7, 0, 10, 10) == Duplicate(110, 119)
    assert again.check(7, 0, 20, 1) is None


def test_last_timestamp_is_the_last_batch_max_timestamp_and_survives_a_snapshot():
    table = ProducerStateTable()
    table.record(7, 0, 0, 3, 100, 102, max_timestamp=5_000)
    table.record(7, 0, 3, 2, 103, 104, max_timestamp=4_000)  # the last batch's, not the largest seen
    assert table.producers[7].last_timestamp == 4_000
    again = ProducerStateTable.from_json(table.to_json())
    assert again.producers[7].last_timestamp == 4_000
    assert again.check(7, 0, 0, 3) == Duplicate(100, 102, 5_000)  # each batch keeps its own


def test_a_snapshot_without_timestamps_reads_as_unknown():
    old = '{"7": {"epoch": 0, "batches": [[0, 2, 100, 102]]}}'  # written before timestamps were kept
    entry = ProducerStateTable.from_json(old).producers[7]
    assert (entry.last_sequence, entry.last_timestamp) == (2, -1)
    assert ProducerStateTable.from_json(old).check(7, 0, 0, 3) == Duplicate(100, 102, -1)


def test_producers_idle_for_the_expiration_are_forgotten_unless_kept():
    table = ProducerStateTable()
    table.record(7, 0, 0, 1, 0, 0, max_timestamp=1_000)
    table.record(8, 0, 0, 1, 1, 1, max_timestamp=1_000)
    table.record(9, 0, 0, 1, 2, 2, max_timestamp=5_000)
    table.remove_expired(11_000, 10_000, keep=lambda producer_id: producer_id == 8)
    assert sorted(table.producers) == [8, 9]
    assert table.check(7, 0, 1, 1) is None  # a forgotten producer goes on where it stood
