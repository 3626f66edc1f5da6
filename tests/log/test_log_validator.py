"""The batch validator on its own (no broker): what a produced batch must be, the Kafka error code
for each way it can be wrong, and what the broker puts right in its header."""

import struct

import pytest
import snappy
from hypothesis import given, settings
from hypothesis import strategies as st
from log.batches import COMPRESS, batch_crc_ok, encode_record, make_batch, patched, raw_batch, zigzag_varint

from weir.log.log_validator import LOG_APPEND_TIME, ValidationConfig, recovered_max_timestamp, validate_produced_batch
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.record_batch import read_batch_header

NOW = 1_700_000_000_000
CONFIG = ValidationConfig(max_message_bytes=1 << 20)


def records_of(values, timestamps_delta=None, keys=None):
    keys = keys or [b"k"] * len(values)
    deltas = timestamps_delta or [0] * len(values)
    return b"".join(encode_record(i, d, k, v) for i, (k, v, d) in enumerate(zip(keys, values, deltas)))


def refused(batch, config=CONFIG, now=NOW) -> KafkaError:
    with pytest.raises(KafkaError) as caught:
        validate_produced_batch(batch, config, now)
    return caught.value


# -- what the broker puts right -----------------------------------------------------------------

def test_a_missing_max_timestamp_is_computed_from_the_records_and_the_crc_recomputed():
    batch = make_batch([b"a", b"b", b"c"], timestamps=[NOW - 30, NOW - 10, NOW - 20])
    unset = patched(batch, max_timestamp=-1)
    validated = validate_produced_batch(unset, CONFIG, NOW)
    assert validated.header.max_timestamp == NOW - 10
    assert batch_crc_ok(bytes(validated.records))
    assert bytes(validated.records) == batch  # exactly what a client that set it would have sent
    assert validated.log_append_time_ms == -1


def test_a_wrong_max_timestamp_is_corrected():
    batch = make_batch([b"a", b"b"], timestamps=[NOW - 5, NOW - 1])
    validated = validate_produced_batch(patched(batch, max_timestamp=NOW + 50_000), CONFIG, NOW)
    assert validated.header.max_timestamp == NOW - 1 and bytes(validated.records) == batch


def test_a_right_batch_is_appended_as_sent():
    batch = make_batch([b"a"], timestamp=NOW)
    assert bytes(validate_produced_batch(batch, CONFIG, NOW).records) == batch


def test_log_append_time_stamps_the_broker_clock_and_the_timestamp_type():
    batch = make_batch([b"a", b"b"], timestamp=5)  # ancient CreateTime: not checked under LogAppendTime
    validated = validate_produced_batch(batch, ValidationConfig(1 << 20, timestamp_type=LOG_APPEND_TIME), NOW)
    assert validated.header.max_timestamp == NOW and validated.log_append_time_ms == NOW
    assert validated.header.attributes & 0x08
    assert batch_crc_ok(bytes(validated.records))


def test_a_client_cannot_claim_log_append_time_on_a_create_time_topic():
    batch = patched(make_batch([b"a"], timestamp=NOW), attributes=0x08)
    validated = validate_produced_batch(batch, CONFIG, NOW)
    assert not validated.header.attributes & 0x08 and batch_crc_ok(bytes(validated.records))


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_every_codec_is_decompressed_and_checked(codec):
    records = records_of([b"x" * 50] * 20, [i * 3 for i in range(20)])
    batch = raw_batch(COMPRESS[codec](records), 20, attributes=codec, base_timestamp=NOW - 100, max_timestamp=-1)
    validated = validate_produced_batch(batch, CONFIG, NOW)
    assert validated.header.max_timestamp == NOW - 100 + 57
    assert validated.header.attributes & 0x07 == codec  # the records stay compressed as sent


def test_snappy_in_the_java_clients_framing():
    block = snappy.compress(records_of([b"v"] * 3))
    xerial = b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, len(block)) + block
    batch = raw_batch(xerial, 3, attributes=2, base_timestamp=NOW, max_timestamp=NOW)
    assert validate_produced_batch(batch, CONFIG, NOW).header.record_count == 3


# -- what is refused, and with which error -------------------------------------------------------

def test_framing_and_crc():
    batch = make_batch([b"a"], timestamp=NOW)
    assert refused(batch[:40]).code == ErrorCode.corrupt_message
    assert refused(batch[:-1]).code == ErrorCode.corrupt_message  # length says more than there is
    flipped = bytearray(batch)
    flipped[-1] ^= 1
    assert refused(bytes(flipped)).code == ErrorCode.corrupt_message
    assert refused(batch + batch).code == ErrorCode.invalid_record  # one batch per partition
    assert refused(None).code == ErrorCode.invalid_record
    old_magic = bytearray(batch)
    old_magic[16] = 1
    assert refused(bytes(old_magic)).code == ErrorCode.invalid_record


def test_max_message_bytes_is_per_batch():
    batch = make_batch([b"x" * 1000], timestamp=NOW)
    assert refused(batch, ValidationConfig(max_message_bytes=len(batch) - 1)).code == ErrorCode.message_too_large
    validate_produced_batch(batch, ValidationConfig(max_message_bytes=len(batch)), NOW)


@pytest.mark.parametrize("fields", [
    {"record_count": 0, "last_offset_delta": -1},
    {"record_count": -3},
    {"record_count": 3},  # two records present
    {"last_offset_delta": 5},
    {"record_count": 1, "last_offset_delta": 0},  # one record declared, two present
])
def test_header_counts_must_match_the_records(fields):
    batch = make_batch([b"a", b"b"], timestamp=NOW)
    assert refused(patched(batch, **fields)).code == ErrorCode.invalid_record


@pytest.mark.parametrize("records, count, why", [
    (encode_record(0, 0, b"k", b"a") + encode_record(2, 0, b"k", b"b"), 2, "offset delta"),
    (encode_record(1, 0, b"k", b"a"), 1, "offset delta"),
    (encode_record(0, 0, b"k", b"a") + b"\x00", 1, "after"),
    (encode_record(0, 0, b"k", b"a")[:-2], 1, "does not fit"),
    (zigzag_varint(40) + encode_record(0, 0, b"k", b"a")[1:], 1, "does not fit"),
    (zigzag_varint(8) + b"\x00\x00\x00" + zigzag_varint(-7) + b"\x00\x00\x00\x00", 1, "key length"),
    (zigzag_varint(6) + b"\x00\x00\x00\x00\x00" + zigzag_varint(-1), 1, "headers"),
    (zigzag_varint(7) + b"\x00\x00\x00\x00\x00" + zigzag_varint(1) + zigzag_varint(-1), 1, "header without a key"),
    (b"\xff\xff\xff\xff\xff\xff\x01", 1, "varint"),
])
def test_malformed_records_are_invalid_record(records, count, why):
    error = refused(raw_batch(records, count, base_timestamp=NOW, max_timestamp=NOW))
    assert error.code == ErrorCode.invalid_record and why in error.message


def test_control_transactional_and_producer_fields():
    batch = make_batch([b"a"], timestamp=NOW)
    assert "control" in refused(patched(batch, attributes=0x20)).message
    assert refused(patched(batch, attributes=0x10)).code == ErrorCode.invalid_record  # no producer id
    assert refused(patched(batch, attributes=0x30, producer_id=7, producer_epoch=0, base_sequence=0)).code \
        == ErrorCode.invalid_record  # a transactional control batch: clients write no markers
    assert refused(patched(batch, attributes=0x10, producer_id=7, producer_epoch=0, base_sequence=-1)).code \
        == ErrorCode.invalid_record
    validated = validate_produced_batch(patched(batch, attributes=0x10, producer_id=7, producer_epoch=0,
                                                base_sequence=0), CONFIG, NOW)
    assert validated.header.attributes & 0x10 and validated.header.producer_id == 7
    assert refused(patched(batch, producer_id=7, producer_epoch=0, base_sequence=-1)).code == ErrorCode.invalid_record
    assert refused(patched(batch, producer_id=7, producer_epoch=-1, base_sequence=0)).code == ErrorCode.invalid_record
    assert refused(patched(batch, producer_id=-2)).code == ErrorCode.invalid_record
    validate_produced_batch(patched(batch, producer_id=7, producer_epoch=0, base_sequence=0), CONFIG, NOW)


def test_unknown_codec_and_undecompressable_records():
    batch = make_batch([b"a"], timestamp=NOW)
    assert refused(patched(batch, attributes=6)).code == ErrorCode.unsupported_compression_type
    for codec in (1, 2, 3, 4):
        error = refused(raw_batch(b"not compressed at all", 1, attributes=codec, base_timestamp=NOW))
        assert error.code == ErrorCode.invalid_record, codec
        trailing = COMPRESS[codec](records_of([b"v"])) + b"junk"  # librdkafka refuses bytes after the data
        error = refused(raw_batch(trailing, 1, attributes=codec, base_timestamp=NOW, max_timestamp=NOW))
        assert error.code == ErrorCode.invalid_record, codec


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_is_capped(codec):
    records = encode_record(0, 0, b"k", b"\x00" * 200_000)
    batch = raw_batch(COMPRESS[codec](records), 1, attributes=codec, base_timestamp=NOW, max_timestamp=NOW)
    assert len(batch) < 20_000
    small_cap = ValidationConfig(1 << 20, max_decompressed_bytes=100_000)
    error = refused(batch, small_cap)
    assert error.code == ErrorCode.invalid_record and "more than 100000" in error.message
    validate_produced_batch(batch, CONFIG, NOW)


def test_timestamps_outside_the_window_are_refused_per_record():
    config = ValidationConfig(1 << 20, timestamp_before_max_ms=60_000, timestamp_after_max_ms=1_000)
    batch = make_batch([b"a", b"b", b"c", b"d"], timestamps=[NOW - 61_000, NOW, NOW + 2_000, NOW - 60_000])
    error = refused(batch, config)
    assert error.code == ErrorCode.invalid_timestamp
    assert [index for index, _ in error.record_errors] == [0, 2]
    validate_produced_batch(make_batch([b"a"], timestamps=[NOW + 1_000]), config, NOW)


def test_kafka_4_default_refuses_timestamps_an_hour_ahead_and_accepts_old_ones():
    assert refused(make_batch([b"a"], timestamp=NOW + 3_600_001)).code == ErrorCode.invalid_timestamp
    validate_produced_batch(make_batch([b"a"], timestamp=1), CONFIG, NOW)


def test_records_without_a_timestamp_are_accepted():
    batch = raw_batch(records_of([b"a", b"b"]), 2, base_timestamp=-1, max_timestamp=-1)
    config = ValidationConfig(1 << 20, timestamp_before_max_ms=0, timestamp_after_max_ms=0)
    assert validate_produced_batch(batch, config, NOW).header.max_timestamp == -1


def test_compacted_topics_refuse_records_without_a_key():
    batch = raw_batch(records_of([b"a", b"b", b"c"], keys=[b"k", None, b"k"]), 3, base_timestamp=NOW,
                      max_timestamp=NOW)
    validate_produced_batch(batch, CONFIG, NOW)
    error = refused(batch, ValidationConfig(1 << 20, compacted=True))
    assert error.code == ErrorCode.invalid_record and error.record_errors == [
        (1, "record without a key on a compacted topic")]


# -- recovery's check ----------------------------------------------------------------------------

def test_recovery_computes_a_missing_max_timestamp_and_allows_compactions_gaps():
    batch = make_batch([b"a", b"b"], timestamps=[100, 300])
    assert recovered_max_timestamp(patched(batch, max_timestamp=-1)) == 300
    gapped = raw_batch(encode_record(0, 0, b"k", b"a") + encode_record(4, 9, b"k", b"b"), 2,
                       last_offset_delta=6, base_timestamp=100, max_timestamp=109)
    assert recovered_max_timestamp(gapped) == 109
    appended = patched(batch, attributes=0x08, max_timestamp=NOW)
    assert recovered_max_timestamp(appended) == NOW  # LogAppendTime: the header's time is the batch's


def test_recovery_rejects_what_the_validator_rejects_structurally():
    assert recovered_max_timestamp(patched(make_batch([b"a", b"b"]), record_count=3)) is None
    assert recovered_max_timestamp(raw_batch(encode_record(0, 0, b"k", b"a") + b"\x07", 1)) is None
    assert recovered_max_timestamp(raw_batch(b"junk", 1, attributes=1)) is None


# -- anything at all -----------------------------------------------------------------------------

FIELDS = st.sampled_from(["attributes", "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
                          "producer_epoch", "base_sequence", "record_count"])
VALUES = st.one_of(st.integers(-3, 3), st.sampled_from([-2**15, 2**15 - 1, -2**31, 2**31 - 1, NOW, -NOW]))


@settings(max_examples=400, deadline=None)
@given(fields=st.dictionaries(FIELDS, VALUES, max_size=4), cut=st.integers(0, 200), flips=st.lists(
    st.tuples(st.integers(61, 300), st.integers(1, 255)), max_size=3), codec=st.sampled_from([0, 1, 2, 3, 4]))
def test_any_crc_valid_batch_is_either_accepted_whole_or_refused_with_a_kafka_error(fields, cut, flips, codec):
    records = records_of([b"value"] * 5, [0, 1, 2, 3, 4])
    payload = COMPRESS[codec](records) if codec else records
    batch = bytearray(raw_batch(payload, 5, attributes=codec, base_timestamp=NOW, max_timestamp=NOW))
    for position, mask in flips:
        if position < len(batch):
            batch[position] ^= mask
    batch = patched(bytes(batch[:len(batch) - cut] if cut < len(batch) - 61 else batch), **fields)
    batch = batch[:8] + struct.pack(">i", len(batch) - 12) + batch[12:]
    try:
        validated = validate_produced_batch(batch, CONFIG, NOW)
    except KafkaError as e:
        assert e.code in (ErrorCode.invalid_record, ErrorCode.corrupt_message, ErrorCode.invalid_timestamp,
                          ErrorCode.unsupported_compression_type)
        return
    header = read_batch_header(validated.records)
    assert batch_crc_ok(bytes(validated.records))
    assert header.record_count == header.last_offset_delta + 1 > 0
    assert recovered_max_timestamp(validated.records) == header.max_timestamp
