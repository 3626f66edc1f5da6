"""Kafka's __transaction_state record formats (TransactionLogKey v0, TransactionLogValue v0 and v1),
checked against bytes laid out by hand from Kafka's schema."""

import struct

import pytest

from weir.transactions.state_log import (RecordFormatError, TransactionState, TxnLogValue, UnknownKeyVersion,
                                         decode_batches, encode_batch, grouped_partitions, key_bytes, read_key,
                                         read_value, value_bytes)

S = TransactionState


def ongoing_value(**changes) -> TxnLogValue:
    fields = dict(producer_id=1000, producer_epoch=3, transaction_timeout_ms=60000, transaction_status=S.ONGOING,
                  transaction_partitions=(("foo", (0, 2)),), transaction_last_update_timestamp_ms=2000,
                  transaction_start_timestamp_ms=1500)
    fields.update(changes)
    return TxnLogValue(**fields)


def test_key_v0_is_version_then_int16_length_prefixed_transactional_id():
    assert key_bytes("t1") == b"\x00\x00" + b"\x00\x02" + b"t1"
    assert read_key(b"\x00\x00\x00\x02t1") == "t1"
    assert read_key(key_bytes("日本-txn")) == "日本-txn"


def test_unknown_key_version_is_reported_as_such():
    with pytest.raises(UnknownKeyVersion) as e:
        read_key(b"\x00\x01\x00\x02t1")
    assert e.value.version == 1


def test_value_v0_byte_layout_by_hand():
    expected = (b"\x00\x00"                                  # version 0
                + b"\x00\x00\x00\x00\x00\x00\x03\xe8"        # producer_id 1000
                + b"\x00\x03"                                # producer_epoch 3
                + b"\x00\x00\xea\x60"                        # transaction_timeout_ms 60000
                + b"\x01"                                    # transaction_status Ongoing
                + b"\x00\x00\x00\x01"                        # 1 topic
                + b"\x00\x03foo"                             # topic "foo"
                + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x02"  # partition ids [0, 2]
                + b"\x00\x00\x00\x00\x00\x00\x07\xd0"        # last update 2000
                + b"\x00\x00\x00\x00\x00\x00\x05\xdc")       # start 1500
    assert value_bytes(ongoing_value()) == expected
    assert read_value(expected) == ongoing_value()


def test_value_v1_byte_layout_by_hand_with_tagged_fields():
    value = ongoing_value(previous_producer_id=999, client_transaction_version=2)
    expected = (b"\x00\x01"                                  # version 1 (flexible)
                + struct.pack(">qhib", 1000, 3, 60000, 1)
                + b"\x02"                                    # compact array: 1 topic (+1)
                + b"\x04foo"                                 # compact string (length + 1)
                + b"\x03" + struct.pack(">ii", 0, 2)         # compact array of 2 int32
                + b"\x00"                                    # the partitions entry's tagged fields: none
                + struct.pack(">qq", 2000, 1500)
                + b"\x02"                                    # two tagged fields, in tag order:
                + b"\x00\x08" + struct.pack(">q", 999)       #   tag 0 previous_producer_id, 8 bytes
                + b"\x02\x02" + struct.pack(">h", 2))        #   tag 2 client_transaction_version, 2 bytes
    assert value_bytes(value, version=1) == expected
    assert read_value(expected) == value


def test_value_v1_writes_no_tagged_field_at_its_default():
    raw = value_bytes(ongoing_value(), version=1)
    assert raw.endswith(struct.pack(">qq", 2000, 1500) + b"\x00")
    assert read_value(raw).next_producer_id == -1


def test_empty_transaction_is_written_with_null_partitions():
    empty = TxnLogValue(7, 0, 60000, S.EMPTY, None, 10, -1)
    v0 = value_bytes(empty)
    assert v0[2 + 8 + 2 + 4 + 1:][:4] == b"\xff\xff\xff\xff"
    v1 = value_bytes(empty, version=1)
    assert v1[2 + 8 + 2 + 4 + 1] == 0  # compact null
    assert read_value(v0) == empty and read_value(v1) == empty
    assert read_value(v0).partitions() == frozenset()


def test_every_state_id_is_kafkas():
    assert [(s.value, s.kafka_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    for state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        value = ongoing_value(transaction_status=state)
        assert read_value(value_bytes(value)) == value


def test_dead_and_prepare_epoch_fence_are_never_written():
    for state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        with pytest.raises(AssertionError):
            value_bytes(ongoing_value(transaction_status=state))


def test_tombstone_is_a_null_value():
    assert value_bytes(None) is None
    assert read_value(None) is None


def test_unknown_tagged_fields_survive_a_round_trip():
    raw = bytearray(value_bytes(ongoing_value(), version=1))
    raw[-1:] = b"\x01" + b"\x05\x02\xab\xcd"  # one unknown tag 5 of 2 bytes
    value = read_value(bytes(raw))
    assert value.unknown_tagged_fields == ((5, b"\xab\xcd"),)
    assert value_bytes(value, version=1) == bytes(raw)


def test_bad_values_are_refused():
    with pytest.raises(RecordFormatError):
        read_value(b"\x00\x02" + value_bytes(ongoing_value())[2:])  # version 2
    with pytest.raises(RecordFormatError):
        read_value(value_bytes(ongoing_value())[:-3])  # truncated
    raw = bytearray(value_bytes(ongoing_value()))
    raw[16] = 9  # no such state
    with pytest.raises(RecordFormatError):
        read_value(bytes(raw))


def test_partitions_are_grouped_by_topic_sorted():
    assert grouped_partitions({("b", 1), ("a", 3), ("b", 0)}) == (("a", (3,)), ("b", (0, 1)))


def test_records_travel_in_ordinary_batches():
    records = [(key_bytes("t1"), value_bytes(ongoing_value())), (key_bytes("t2"), None)]
    decoded, next_offset, skipped = decode_batches(encode_batch(records, timestamp_ms=5))
    assert [(k, v) for _, k, v in decoded] == records and next_offset == 2 and skipped == 0
