"""Transaction markers (Kafka's EndTransactionMarker in a control batch), checked against bytes laid
out by hand from Kafka's record format v2, ControlRecordType and EndTransactionMarker schemas, and
read back with kafka-python's independent batch reader."""

import struct

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch

from weir.protocol.record_batch import CONTROL_BIT, TRANSACTIONAL_BIT, read_batch_header
from weir.protocol.records import encode_batch
from weir.transactions.markers import (ControlRecordType, EndTxnMarker, MarkerFormatError, marker_batch,
                                       parse_control_key, parse_end_txn_marker, read_marker)

TIMESTAMP = 1_700_000_000_000


def hand_made_marker(type_id: int, coordinator_epoch: int) -> bytes:
    record_body = (b"\x00"                                   # record attributes
                   + b"\x00"                                 # timestamp delta 0 (zigzag varint)
                   + b"\x00"                                 # offset delta 0
                   + b"\x08"                                 # key length 4 (zigzag: 8)
                   + b"\x00\x00" + struct.pack(">h", type_id)  # ControlRecordType key: version 0, type
                   + b"\x0c"                                 # value length 6 (zigzag: 12)
                   + b"\x00\x00" + struct.pack(">i", coordinator_epoch)  # EndTxnMarker: version 0, epoch
                   + b"\x00")                                # no headers
    assert len(record_body) == 16
    record = b"\x20" + record_body                          # record length 16 (zigzag: 32)
    after_crc = (b"\x00\x30"                                 # attributes: control | transactional
                 + b"\x00\x00\x00\x00"                       # last offset delta 0
                 + struct.pack(">q", TIMESTAMP) * 2          # base and max timestamp
                 + b"\x00\x00\x00\x00\x00\x00\x10\x92"       # producer id 4242
                 + b"\x00\x05"                               # producer epoch 5
                 + b"\xff\xff\xff\xff"                       # base sequence -1
                 + b"\x00\x00\x00\x01"                       # one record
                 + record)
    return (struct.pack(">q", 100)                           # base offset
            + struct.pack(">i", 66)                          # batch length: 78 - 12
            + struct.pack(">i", 3)                           # partition leader epoch
            + b"\x02"                                        # magic
            + struct.pack(">I", crc32c(after_crc))
            + after_crc)


@pytest.mark.parametrize("control_type", [ControlRecordType.ABORT, ControlRecordType.COMMIT])
def test_marker_batch_bytes_by_hand(control_type):
    encoded = marker_batch(4242, 5, EndTxnMarker(control_type, 7), timestamp=TIMESTAMP, base_offset=100,
                           leader_epoch=3)
    assert len(encoded) == 78
    assert encoded == hand_made_marker(int(control_type), 7)


def test_abort_is_type_0_and_commit_type_1():
    assert ControlRecordType.ABORT == 0 and ControlRecordType.COMMIT == 1
    assert read_marker(hand_made_marker(0, 9)) == EndTxnMarker(ControlRecordType.ABORT, 9)
    assert read_marker(hand_made_marker(1, 9)) == EndTxnMarker(ControlRecordType.COMMIT, 9)
    assert read_marker(hand_made_marker(0, 9)).is_abort and not read_marker(hand_made_marker(1, 9)).is_abort


def test_marker_header_fields():
    header = read_batch_header(marker_batch(4242, 5, EndTxnMarker(ControlRecordType.COMMIT, 2), timestamp=TIMESTAMP,
                                            base_offset=17))
    assert header.attributes & CONTROL_BIT and header.attributes & TRANSACTIONAL_BIT
    assert (header.base_offset, header.last_offset, header.record_count) == (17, 17, 1)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 5, -1)
    assert header.base_timestamp == header.max_timestamp == TIMESTAMP


def test_kafka_python_reads_our_marker_as_kafka_control_record():
    batch = DefaultRecordBatch(marker_batch(77, 1, EndTxnMarker(ControlRecordType.ABORT, 12), timestamp=TIMESTAMP,
                                            base_offset=5))
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    (record,) = list(batch)
    assert record.abort and not record.commit and record.offset == 5
    assert record.value == b"\x00\x00\x00\x00\x00\x0c"


def test_negative_coordinator_epoch_round_trips():
    encoded = marker_batch(1, 0, EndTxnMarker(ControlRecordType.ABORT, -1), timestamp=0)
    assert read_marker(encoded) == EndTxnMarker(ControlRecordType.ABORT, -1)


def test_a_newer_value_version_is_read_as_version_0():
    assert parse_end_txn_marker(ControlRecordType.COMMIT, b"\x00\x01\x00\x00\x00\x04extra") == \
        EndTxnMarker(ControlRecordType.COMMIT, 4)


@pytest.mark.parametrize("value", [None, b"\x00\x00\x00\x00\x01", b"\xff\xff\x00\x00\x00\x01"])
def test_short_null_or_negative_version_values_are_refused(value):
    with pytest.raises(MarkerFormatError):
        parse_end_txn_marker(ControlRecordType.ABORT, value)


@pytest.mark.parametrize("key", [None, b"\x00\x00\x00", b"\xff\xff\x00\x00", b"\x00\x00\x00\x02",
                                 b"\x00\x00\xff\xff"])
def test_keys_that_are_no_transaction_marker_are_refused(key):
    with pytest.raises(MarkerFormatError):
        parse_control_key(key)


def test_a_control_batch_emptied_by_the_cleaner_holds_no_marker():
    full = bytearray(marker_batch(3, 0, EndTxnMarker(ControlRecordType.COMMIT, 0), timestamp=0))
    emptied = full[:61]
    struct.pack_into(">i", emptied, 8, 61 - 12)
    struct.pack_into(">i", emptied, 57, 0)
    struct.pack_into(">I", emptied, 17, crc32c(bytes(emptied[21:])))
    assert read_marker(bytes(emptied)) is None


def test_a_data_batch_or_a_corrupt_marker_is_refused():
    with pytest.raises(MarkerFormatError):
        read_marker(encode_batch([b"v"]))
    corrupt = bytearray(marker_batch(3, 0, EndTxnMarker(ControlRecordType.COMMIT, 0), timestamp=0))
    corrupt[-2] ^= 0xFF
    with pytest.raises(MarkerFormatError):
        read_marker(bytes(corrupt))


def test_the_coordinator_s_markers_to_send_become_marker_batches():
    from weir.transactions.coordinator import MarkersToSend, TransactionResult
    from weir.transactions.markers import marker_of
    sent = MarkersToSend("txn-1", 4242, 5, 7, TransactionResult.COMMIT, frozenset({("foo", 0)}))
    batch = marker_batch(sent.producer_id, sent.producer_epoch,
                         marker_of(sent.result == TransactionResult.COMMIT, sent.coordinator_epoch),
                         timestamp=TIMESTAMP, base_offset=100, leader_epoch=3)
    assert batch == hand_made_marker(1, 7)
    assert marker_of(False, 2) == EndTxnMarker(ControlRecordType.ABORT, 2)
    assert int(TransactionResult.ABORT) == ControlRecordType.ABORT and int(TransactionResult.COMMIT) == \
        ControlRecordType.COMMIT
