"""The hand decoders of Produce and Fetch read what kio's reader reads, field for field, in every
supported version; the follower's hand-encoded Fetch is the request kio would encode."""

import dataclasses
import io
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records

from weir.protocol.codec import request_schema
from weir.protocol.hot_requests import decode_fetch_request, decode_produce_request, encode_follower_fetch_request

st.register_type_strategy(Records, st.binary(max_size=64))
IGNORED = {"replica_directory_id"}  # Fetch v17's tagged field: read by kio, not used by Weir


def encoded(api_key: int, version: int, entity) -> bytes:
    out = io.BytesIO()
    entity_writer(request_schema(api_key, version))(out, entity)
    return out.getvalue()


def assert_same(ours, theirs) -> None:
    """Every field kio decoded, with the same value (tuples there, lists here)."""
    for f in dataclasses.fields(theirs):
        if f.name in IGNORED:
            continue
        mine, expected = getattr(ours, f.name), getattr(theirs, f.name)
        if isinstance(expected, tuple):
            assert len(mine) == len(expected), f.name
            for a, b in zip(mine, expected):
                if dataclasses.is_dataclass(b):
                    assert_same(a, b)
                else:
                    assert a == b, f.name
        elif dataclasses.is_dataclass(expected):
            assert_same(mine, expected)
        else:
            assert mine == expected, f.name


@pytest.mark.parametrize("api_key, versions, decode", [(0, range(0, 14), decode_produce_request),
                                                       (1, range(0, 18), decode_fetch_request)])
def test_hand_decoders_read_what_kio_reads(api_key, versions, decode):
    for version in versions:
        schema = request_schema(api_key, version)

        @settings(max_examples=40, deadline=None)
        @given(st.from_type(schema))
        def check(entity):
            body = encoded(api_key, version, entity)
            assert_same(decode(version, body, 0), entity_reader(schema)(body, 0)[0])

        check()


@pytest.mark.parametrize("version", [15, 16, 17])
@pytest.mark.parametrize("session", [(0, -1, []), (31337, 4, [(uuid.UUID(int=9), [2, 7]), (uuid.UUID(int=8), [0])])])
def test_the_follower_fetch_request_is_what_kio_would_encode(version, session):
    topic = uuid.uuid4()
    session_id, epoch, forgotten = session
    body = encode_follower_fetch_request(version, 2, 77, 500, 1, 10_485_760,
                                         [(topic, [(0, 5, 1234, 10, 1_048_576), (3, 5, 99, 0, 1_048_576)])],
                                         session_id, epoch, forgotten)
    request, size = entity_reader(request_schema(1, version))(body, 0)
    assert size == len(body)
    assert (request.replica_state.replica_id, request.replica_state.replica_epoch) == (2, 77)
    assert (request.max_wait.total_seconds(), request.min_bytes, request.max_bytes) == (0.5, 1, 10_485_760)
    assert (request.session_id, request.session_epoch) == (session_id, epoch)
    assert [(t.topic_id, list(t.partitions)) for t in request.forgotten_topics_data] == forgotten
    [t] = request.topics
    assert t.topic_id == topic
    assert [(p.partition, p.current_leader_epoch, p.fetch_offset, p.log_start_offset, p.partition_max_bytes)
            for p in t.partitions] == [(0, 5, 1234, 10, 1_048_576), (3, 5, 99, 0, 1_048_576)]
    assert_same(decode_fetch_request(version, body, 0), request)
