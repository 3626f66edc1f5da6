"""The request decoder turns any bytes into a request or a clean refusal, never a crash."""

import io
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_writer

from weir.protocol.codec import MalformedRequest, decode_request
from weir.protocol.header import MalformedHeader, read_request_header
from weir.protocol.versions import SUPPORTED_VERSIONS


def frame(api_key: int, version: int, entity, client_id: bytes = b"test") -> bytes:
    schema = load_request_schema(api_key, version)
    out = io.BytesIO()
    out.write(api_key.to_bytes(2, "big") + version.to_bytes(2, "big") + (7).to_bytes(4, "big"))
    out.write(len(client_id).to_bytes(2, "big") + client_id)
    if schema.__flexible__:
        out.write(b"\x00")
    entity_writer(schema)(out, entity)
    return out.getvalue()


def decode(data: bytes):
    return decode_request(read_request_header(data), data)


def test_header_fields_are_read_before_the_body():
    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    data = frame(18, 3, ApiVersionsRequest(client_software_name="weir-test", client_software_version="1"))
    header = read_request_header(data)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 3, 7, "test")
    assert decode(data).client_software_name == "weir-test"


def test_unknown_tagged_field_in_a_request_is_ignored():
    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    data = frame(18, 3, ApiVersionsRequest(client_software_name="x", client_software_version="1"))
    with_new_tag = data[:-1] + bytes([1, 5, 1, 0])  # a tag from a newer client: tag 5, one byte
    assert decode(with_new_tag).client_software_name == "x"


def test_bytes_after_the_body_are_ignored_as_kafka_does():
    """librdkafka 2.16 sends this Metadata v13 request (all topics) with three bytes after the body."""
    data = bytes.fromhex("0003000d00000003000772646b61666b610000000000010000")
    request = decode(data)
    assert request.topics is None and request.allow_auto_topic_creation is False


SUPPORTED = [(int(k), v) for k, (lo, hi) in SUPPORTED_VERSIONS.items() for v in range(lo, hi + 1)]


@settings(max_examples=400, deadline=500)
@given(st.sampled_from(SUPPORTED), st.binary(max_size=300))
def test_random_bodies_of_every_supported_request_decode_or_are_refused(api, body):
    api_key, version = api
    data = api_key.to_bytes(2, "big") + version.to_bytes(2, "big") + b"\x00\x00\x00\x01\xff\xff" + body
    try:
        decode(data)
    except (MalformedRequest, MalformedHeader):
        pass


@settings(max_examples=300, deadline=500)
@given(st.binary(max_size=64))
def test_random_frames_never_escape_the_decoder(data):
    try:
        header = read_request_header(data)
    except MalformedHeader:
        return
    if (header.api_key, header.api_version) in SUPPORTED:
        try:
            decode_request(header, data)
        except MalformedRequest:
            pass


HUGE_COUNTS = [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff\x0f"]  # an int32 and a compact (uvarint) array count


def test_absurd_array_counts_are_refused_before_kio_reserves_memory_for_them():
    """kio's compiled reader reserves an array's memory from its declared count: two billion
    elements in a 100-byte request made it allocate tens of GB and abort the process (found by
    the produce fuzzer). Every supported request, with such a count at every early position,
    is refused with MalformedRequest; run in a child process, so an abort fails the test."""
    script = f"""
import itertools
from weir.protocol.codec import MalformedRequest
from test_request_decoding import SUPPORTED, decode
refused = 0
for (api_key, version), count, at in itertools.product(SUPPORTED, {HUGE_COUNTS!r}, range(12)):
    body = bytes(at) + count + bytes(16)
    try:
        decode(api_key.to_bytes(2, "big") + version.to_bytes(2, "big") + b"\\x00\\x00\\x00\\x01\\xff\\xff" + body)
    except MalformedRequest:
        refused += 1
print(refused)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            cwd=Path(__file__).parent)
    assert result.returncode == 0, result.stderr[-2000:]
    assert int(result.stdout) > 0


def test_null_for_an_array_that_cannot_be_null_is_refused():
    """Kafka's parser refuses it, and the handlers iterate such arrays (the produce fuzzer sent a
    Produce whose topic_data was null: the handler failed with an internal error)."""
    produce_v9 = (0).to_bytes(2, "big") + (9).to_bytes(2, "big") + b"\x00\x00\x00\x01\xff\xff" + b"\x00"
    with pytest.raises(MalformedRequest, match="cannot be null"):
        decode(produce_v9 + b"\x00" + b"\xff\xff" + b"\x00\x00\x13\x88" + b"\x00" + b"\x00")
    from kio.schema.metadata.v12.request import MetadataRequest
    everything = frame(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False))
    assert decode(everything).topics is None  # a nullable array may be null
