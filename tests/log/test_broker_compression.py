"""compression.type on the leader (the validator alone): a batch in another codec than the topic's
is stored recompressed, the same records with the same offsets, producer fields and timestamps;
`producer` (None here) keeps what the producer sent."""

import pytest
from log.batches import COMPRESS, raw_batch

from weir.log.log_validator import LOG_APPEND_TIME, ValidationConfig, validate_produced_batch
from weir.protocol.compression import CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD, decompress
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.record_batch import CODEC_MASK, crc_matches, read_batch_header
from weir.protocol.records import encode_batch

NOW = 1_700_000_000_000
CODECS = [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]


def produced(codec: int) -> bytes:
    """An idempotent producer's batch of three records, in `codec`."""
    plain = encode_batch([b"value-%d" % i * 20 for i in range(3)], keys=[b"a", b"b", None],
                         timestamps=[NOW - 30, NOW - 10, NOW - 20], producer_id=7, producer_epoch=2,
                         base_sequence=40)
    if codec == CODEC_NONE:
        return plain
    h = read_batch_header(plain)
    return raw_batch(COMPRESS[codec](plain[61:]), 3, attributes=codec, base_timestamp=h.base_timestamp,
                     max_timestamp=h.max_timestamp, producer_id=7, producer_epoch=2, base_sequence=40)


def records_section(batch) -> bytes:
    header = read_batch_header(batch)
    return decompress(header.attributes & CODEC_MASK, memoryview(batch)[61:header.length])


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_a_batch_is_stored_in_the_topics_codec_with_everything_else_kept(source, target):
    batch = produced(source)
    validated = validate_produced_batch(batch, ValidationConfig(1 << 20, compression=target), NOW)
    stored, before = bytes(validated.records), read_batch_header(batch)
    after = read_batch_header(stored)
    assert after.attributes & CODEC_MASK == target and after == validated.header
    assert crc_matches(stored, 0, len(stored), after.crc) and after.length == len(stored)
    assert records_section(stored) == records_section(batch)  # offset and timestamp deltas, keys, values
    for field in ("base_offset", "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
                  "producer_epoch", "base_sequence", "record_count"):
        assert getattr(after, field) == getattr(before, field), field
    if source == target:
        assert stored == batch, "a batch already in the topic's codec is stored as sent"


def test_producer_keeps_the_producers_codec():
    batch = produced(CODEC_SNAPPY)
    assert bytes(validate_produced_batch(batch, ValidationConfig(1 << 20, compression=None), NOW).records) == batch


def test_the_codecs_level_is_used():
    batch = encode_batch([b"x" * 2000 + b"%d" % i for i in range(50)])
    fast, best = (bytes(validate_produced_batch(batch, ValidationConfig(1 << 20, compression=CODEC_GZIP,
                                                                        compression_level=level), NOW).records)
                  for level in (1, 9))
    assert records_section(fast) == records_section(best) and len(best) < len(fast)


def test_recompression_and_log_append_time_together():
    validated = validate_produced_batch(produced(CODEC_GZIP), ValidationConfig(
        1 << 20, timestamp_type=LOG_APPEND_TIME, compression=CODEC_ZSTD), NOW)
    header = validated.header
    assert header.attributes & CODEC_MASK == CODEC_ZSTD and header.attributes & 0x08
    assert header.max_timestamp == NOW and crc_matches(validated.records, 0, header.length, header.crc)


def test_a_batch_too_large_once_recompressed_is_refused():
    batch = produced(CODEC_ZSTD)
    plain_size = 61 + len(records_section(batch))
    with pytest.raises(KafkaError) as refused:
        validate_produced_batch(batch, ValidationConfig(plain_size - 1, compression=CODEC_NONE), NOW)
    assert refused.value.code == ErrorCode.message_too_large


def zstd_frames(checksum=True) -> bytes:
    import zstandard
    return zstandard.ZstdCompressor(write_checksum=checksum).compress(encode_batch([b"v%d" % i for i in range(3)])[61:])


@pytest.mark.parametrize("damage", ["checksum cut short", "checksum flag without a checksum", "a truncated second frame",
                                    "bytes after the frame"])
def test_a_zstd_batch_that_consumers_cannot_decompress_is_refused(damage):
    """Found by the produce fuzzer (seed 3271594954): such a batch was stored, its records walked
    fine, and librdkafka then failed every read of it (_BAD_COMPRESSION: Invalid compressed
    data), stopping every consumer of the partition there. libzstd's ZSTD_decompress and zstd-jni
    refuse a frame that is not whole; so does the broker now, as INVALID_RECORD (as any records
    section it cannot decompress)."""
    frame, unchecked = zstd_frames(), zstd_frames(checksum=False)
    payload = {"checksum cut short": frame[:-2],
               "checksum flag without a checksum": bytes([*unchecked[:4], unchecked[4] | 0x04]) + unchecked[5:],
               "a truncated second frame": frame + frame[:12],
               "bytes after the frame": frame + b"\x28\xb5"}[damage]
    with pytest.raises(KafkaError) as refused:
        validate_produced_batch(raw_batch(payload, 3, attributes=CODEC_ZSTD), ValidationConfig(1 << 20), NOW)
    assert refused.value.code == ErrorCode.invalid_record
    section = encode_batch([b"v%d" % i for i in range(3)])[61:]
    two_frames = COMPRESS[CODEC_ZSTD](section[:10]) + COMPRESS[CODEC_ZSTD](section[10:])
    whole = validate_produced_batch(raw_batch(two_frames, 3, attributes=CODEC_ZSTD), ValidationConfig(1 << 20), NOW)
    assert whole.header.record_count == 3, "whole frames one after another are one records section"
