"""The hand-written Produce and Fetch encoders agree with kio's schemas, version by version."""

import uuid

import pytest
from kio.serial import entity_reader

from weir.protocol.codec import response_schema
from weir.protocol.hot_responses import (FetchPartitionResult, FileRegion, NodeEndpoint, ProducePartitionResult,
                                         encode_fetch_response, encode_produce_response)

TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def decode(api_key, version, body: bytes):
    entity, size = entity_reader(response_schema(api_key, version))(body, 0)  # kio's, or weir's legacy_schemas
    assert size == len(body)
    return entity


LEADER = NodeEndpoint(2, "broker-2", 9092, "rack-b")


@pytest.mark.parametrize("version", range(0, 14))
def test_produce_response_decodes_with_every_supported_version(version):
    results = [ProducePartitionResult(0, 0, 42, -1, 7),
               ProducePartitionResult(3, 6, -1, -1, -1, "not the leader", current_leader=(2, 9))]
    body = encode_produce_response(version, [("orders", TOPIC_ID, results)], node_endpoints=[LEADER])
    response = decode(0, version, body)
    topic = response.responses[0]
    if version >= 13:
        assert topic.topic_id == TOPIC_ID
    else:
        assert topic.name == "orders"
    first, second = topic.partition_responses
    assert (first.index, first.error_code, first.base_offset) == (0, 0, 42)
    assert (second.index, second.error_code) == (3, 6)
    if version >= 5:
        assert first.log_start_offset == 7
    if version >= 8:
        assert second.error_message == "not the leader"
    if version >= 10:  # KIP-951
        assert (first.current_leader.leader_id, first.current_leader.leader_epoch) == (-1, -1)
        assert (second.current_leader.leader_id, second.current_leader.leader_epoch) == (2, 9)
        assert [(n.node_id, n.host, n.port, n.rack) for n in response.node_endpoints] == [(2, "broker-2", 9092, "rack-b")]


@pytest.mark.parametrize("version", range(0, 18))
def test_fetch_response_decodes_with_every_supported_version(tmp_path, version):
    records = b"R" * 100
    path = tmp_path / "segment"
    path.write_bytes(b"xx" + records)
    with open(path, "rb") as f:
        region = FileRegion(f.fileno(), 2, 100)
        parts = [FetchPartitionResult(0, 0, 10, 10, 0, [region]),
                 FetchPartitionResult(1, 6, 5, 5, 0, current_leader=(2, 9))]
        items = encode_fetch_response(version, 0, 0, [("orders", TOPIC_ID, parts)], node_endpoints=[LEADER])
        body = b"".join(bytes(i) if not isinstance(i, FileRegion) else records for i in items)
    response = decode(1, version, body)
    topic = response.responses[0]
    if version >= 13:
        assert topic.topic_id == TOPIC_ID
    else:
        assert topic.topic == "orders"
    first, second = topic.partitions
    assert first.high_watermark == 10 and first.records == records
    assert second.error_code == 6 and not second.records
    if version >= 11:
        assert first.preferred_read_replica == -1
    if version >= 16:  # KIP-951
        assert (second.current_leader.leader_id, second.current_leader.leader_epoch) == (2, 9)
        assert [(n.node_id, n.host, n.port, n.rack) for n in response.node_endpoints] == [(2, "broker-2", 9092, "rack-b")]


@pytest.mark.parametrize("version", range(4, 18))
def test_fetch_response_carries_aborted_transactions_read_committed(version):
    """KIP-98: null for READ_UNCOMMITTED, a (producer id, first offset) list for READ_COMMITTED."""
    parts = [FetchPartitionResult(0, 0, 10, 6, 0, [b"R" * 61], [(7, 1), (9, 4)]),
             FetchPartitionResult(1, 0, 5, 5, 0, None, []), FetchPartitionResult(2, 0, 5, 5, 0)]
    body = b"".join(encode_fetch_response(version, 0, 0, [("orders", TOPIC_ID, parts)]))
    first, empty, uncommitted = decode(1, version, body).responses[0].partitions
    assert first.last_stable_offset == 6
    assert [(a.producer_id, a.first_offset) for a in first.aborted_transactions] == [(7, 1), (9, 4)]
    assert list(empty.aborted_transactions) == [] and uncommitted.aborted_transactions is None


def kio_fetch_answer(version: int, partitions: list[dict], error: int = 0, session_id: int = 0) -> bytes:
    """A Fetch answer frame (correlation id, header tags, body) written by kio's own encoder,
    with the tagged fields a leader may add from v12 (diverging epoch, current leader)."""
    import dataclasses
    import datetime
    import importlib
    import io

    from kio.schema.errors import ErrorCode
    from kio.serial import entity_writer
    schema = importlib.import_module(f"kio.schema.fetch.v{version}.response")

    def entity(cls, **fields):  # the fields this version has
        return cls(**{k: v for k, v in fields.items() if k in {f.name for f in dataclasses.fields(cls)}})
    parts = []
    for p in partitions:
        aborted = p.get("aborted")
        parts.append(entity(
            schema.PartitionData, partition_index=p["index"], error_code=ErrorCode(p.get("error", 0)),
            high_watermark=p["hw"], last_stable_offset=p["hw"], log_start_offset=p["log_start"],
            diverging_epoch=version >= 12 and schema.EpochEndOffset(epoch=3, end_offset=p.get("diverge", -1)),
            current_leader=version >= 12 and schema.LeaderIdAndEpoch(leader_id=2, leader_epoch=4),
            aborted_transactions=None if aborted is None else tuple(
                schema.AbortedTransaction(producer_id=pid, first_offset=first) for pid, first in aborted),
            preferred_read_replica=-1, records=p["records"]))
    out = io.BytesIO()
    out.write((99).to_bytes(4, "big") + (b"\x00" if version >= 12 else b""))
    topic = entity(schema.FetchableTopicResponse, topic_id=TOPIC_ID, topic="orders", partitions=tuple(parts))
    entity_writer(schema.FetchResponse)(out, entity(
        schema.FetchResponse, throttle_time=datetime.timedelta(0), error_code=ErrorCode(error),
        session_id=session_id, responses=(topic,)))
    return out.getvalue()


@pytest.mark.parametrize("version", range(4, 18))
def test_fetch_answers_are_read_as_kio_writes_them(version):
    """As a follower (v13+, by topic id) and weir.spark's reader (v4-v12, by name) read them."""
    from weir.protocol.hot_responses import decode_fetch_response
    frame = memoryview(kio_fetch_answer(version, [
        {"index": 0, "hw": 10, "log_start": 2, "records": b"R" * 61, "aborted": [(7, 1), (9, 4)], "diverge": 5},
        {"index": 4, "hw": 5, "log_start": 0, "records": None, "error": 6},
        {"index": 1, "hw": 0, "log_start": 0, "records": b""}], session_id=1234567))
    answer = decode_fetch_response(version, frame)
    assert (answer.error_code, answer.session_id) == (0, 1234567 if version >= 7 else 0)
    [(topic, partitions)] = answer.topics
    assert topic == (TOPIC_ID if version >= 13 else "orders")
    first, failed, empty = partitions
    assert (first.partition_index, first.error_code, first.high_watermark) == (0, 0, 10)
    assert first.log_start_offset == (2 if version >= 5 else -1)
    assert first.aborted == [(7, 1), (9, 4)] and failed.aborted is None
    assert bytes(first.records) == b"R" * 61
    assert first.records.obj is frame.obj, "the records are a view of the frame, not a copy"
    assert (failed.partition_index, failed.error_code, failed.records) == (4, 6, None)
    assert empty.records is not None and len(empty.records) == 0


def test_a_fetch_answers_top_level_error_is_read():
    from weir.protocol.hot_responses import decode_fetch_response
    answer = decode_fetch_response(15, kio_fetch_answer(15, [], error=71))
    assert (answer.error_code, answer.session_id, answer.topics) == (71, 0, [(TOPIC_ID, [])])


def test_bytes_after_a_fetch_answer_are_refused():
    """Stricter than requests (whose trailing bytes are ignored, as Kafka's parser does for a
    client that sends them): a leader's answer is Weir's own, so extra bytes mean a misread."""
    from weir.protocol.hot_requests import Malformed
    from weir.protocol.hot_responses import decode_fetch_response
    frame = kio_fetch_answer(15, [{"index": 0, "hw": 10, "log_start": 0, "records": b"R" * 61}])
    with pytest.raises(Malformed, match="3 bytes after the Fetch answer"):
        decode_fetch_response(15, frame + b"xyz")


@pytest.mark.parametrize("cut", [5, 30, 60, -1])
def test_a_cut_fetch_answer_is_refused_not_misread(cut):
    from weir.protocol.hot_requests import Malformed
    from weir.protocol.hot_responses import decode_fetch_response
    frame = kio_fetch_answer(15, [{"index": 0, "hw": 10, "log_start": 0, "records": b"R" * 61}])
    with pytest.raises(Malformed):
        decode_fetch_response(15, frame[:cut])
