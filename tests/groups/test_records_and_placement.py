"""Kafka's placement rule for groups, and Kafka's record formats in __consumer_offsets."""

from weir.groups.placement import java_string_hash, partition_for
from weir.groups.records import (GroupKey, GroupValue, MemberRecord, OffsetKey, OffsetValue, decode_batches,
                                 encode_batch, group_key, group_value, offset_key, offset_value, read_group_value,
                                 read_key, read_offset_value)
from weir.log.log_validator import ValidationConfig, validate_produced_batch
from weir.protocol.record_batch import read_batch_header


def test_group_partition_follows_java_string_hashcode():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("test") == 3556498
    assert java_string_hash("polygenelubricants") == -2**31  # Utils.abs maps it to 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("test", 50) == 3556498 % 50
    assert java_string_hash("日本") == (ord("日") * 31 + ord("本"))  # UTF-16 code units
    assert java_string_hash("😀") == 0xD83D * 31 + 0xDE00  # a surrogate pair


def test_offset_commit_key_v1_and_value_v3_round_trip():
    key = offset_key("g", "topic", 7)
    assert key[:2] == b"\x00\x01"
    assert read_key(key) == OffsetKey("g", "topic", 7)
    value = OffsetValue(42, 3, "meta", 1_700_000_000_000)
    raw = offset_value(value)
    assert raw[:2] == b"\x00\x03"
    assert read_offset_value(raw) == value


def test_an_offset_with_its_own_expire_timestamp_is_written_as_value_v1():
    """OffsetCommit v2-v4's retention_time survives a coordinator move only in value v1 (Kafka's
    offsetCommitValue writes v1 whenever the expire timestamp is set; v1 has no leader epoch)."""
    raw = offset_value(OffsetValue(42, 3, "meta", 1_700_000_000_000, 1_700_000_000_000))
    assert raw[:2] == b"\x00\x01"
    assert read_offset_value(raw) == OffsetValue(42, -1, "meta", 1_700_000_000_000, 1_700_000_000_000)


def test_group_metadata_key_v2_and_value_v3_round_trip():
    assert read_key(group_key("g")) == GroupKey("g")
    value = GroupValue("consumer", 5, "range", "m-1", 123, (
        MemberRecord("m-1", None, "client", "/127.0.0.1", 30000, 10000, b"sub", b"assign"),
        MemberRecord("m-2", "static-2", "client", "/127.0.0.1", 30000, 10000, b"", b""),))
    raw = group_value(value)
    assert raw[:2] == b"\x00\x03"
    assert read_group_value(raw) == value


def test_batches_are_valid_v2_batches_and_decode_with_tombstones():
    records = [(offset_key("g", "t", 0), offset_value(OffsetValue(1, -1, "", 5))), (group_key("g"), None)]
    batch = encode_batch(records, 5)
    validated = validate_produced_batch(batch, ValidationConfig(1 << 20, compacted=True),
                                        now_ms=read_batch_header(batch).max_timestamp)
    assert validated.records == batch  # nothing for the broker to put right
    assert validated.header.record_count == 2
    decoded, next_offset, skipped = decode_batches(batch + batch[:30])  # a torn tail is ignored
    assert [(o, k, v) for o, k, v in decoded] == [(0, records[0][0], records[0][1]), (1, records[1][0], None)]
    assert next_offset == 2 and skipped == 0
