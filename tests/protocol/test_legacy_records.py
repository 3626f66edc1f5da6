"""Message formats 0 and 1 up-converted to a format-2 batch and down-converted back."""

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.protocol.compression import compress
from weir.protocol.errors import KafkaError
from weir.protocol.legacy_records import down_convert, up_convert
from weir.protocol.record_batch import read_batch_header
from weir.protocol.records import encode_batch

GZIP = 1


def message(offset: int, magic: int, key: bytes | None, value: bytes | None, timestamp: int = 5,
            attributes: int = 0) -> bytes:
    """A message as an old client writes it (Kafka's LegacyRecord), built here by hand."""
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", timestamp) if magic else b"")
    for data in (key, value):
        body += struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data
    return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body


@pytest.mark.parametrize("magic", [0, 1])
def test_a_message_set_becomes_one_batch_and_comes_back(magic):
    messages = [(b"k0", b"v0", 100), (None, b"v1", 101), (b"k2", None, 102)]
    batch = up_convert(b"".join(message(i, magic, k, v, ts) for i, (k, v, ts) in enumerate(messages)))
    header = read_batch_header(batch)
    assert (header.magic, header.record_count, header.base_offset) == (2, 3, 0)
    patched = struct.pack(">q", 40) + batch[8:]  # the log gives it its offsets
    back = down_convert(patched, magic, 41)
    expected = b"".join(message(40 + i, magic, k, v, ts) for i, (k, v, ts) in enumerate(messages) if i >= 1)
    assert back == expected  # a fetch from the middle of a batch starts there


def test_a_compressed_wrapper_is_opened_and_log_append_time_stands_for_every_message():
    inner = b"".join(message(i, 1, None, b"v%d" % i, timestamp=7) for i in range(3))
    wrapper = message(2, 1, None, compress(GZIP, inner), timestamp=99, attributes=GZIP | 0x08)
    batch = up_convert(wrapper)
    assert read_batch_header(batch).record_count == 3
    assert down_convert(batch, 1, 0) == b"".join(message(i, 1, None, b"v%d" % i, timestamp=99) for i in range(3))


def test_a_format_2_batch_in_an_old_produce_is_taken_as_it_is():
    batch = encode_batch([b"x"])
    assert up_convert(batch) == batch


def test_control_batches_and_a_partial_batch_are_left_out_of_a_down_conversion():
    data = encode_batch([b"a"]) + encode_batch([b"b"], base_offset=1)
    control = bytearray(encode_batch([b"marker"], base_offset=2))
    control[22] |= 0x20  # attributes' control bit (the CRC is not checked here)
    assert down_convert(data + bytes(control) + data[:30], 1, 0) == message(0, 1, None, b"a", 1000) + message(
        1, 1, None, b"b", 1000)


@pytest.mark.parametrize("broken", [
    message(0, 1, b"k", b"v")[:-1],  # truncated
    message(0, 1, b"k", b"v")[:-1] + b"\x00",  # CRC
    message(0, 2, b"k", b"v")[:16] + b"\x05" + message(0, 2, b"k", b"v")[17:],  # magic 5
    message(0, 1, None, b"not gzip", attributes=GZIP),
    b"",
])
def test_a_broken_message_set_is_refused_with_kafkas_error(broken):
    with pytest.raises(KafkaError):
        up_convert(broken)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_convert_or_are_refused(data):
    try:
        up_convert(data)
    except KafkaError:
        pass
