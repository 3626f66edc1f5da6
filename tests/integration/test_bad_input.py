"""Bad input from one client costs that client an error code or its connection, never the broker.

Every test talks to a real broker process over raw sockets, sending frames
built by hand: malformed and truncated frames, unknown api keys, oversized and
negative frame sizes, corrupt record batches, unknown topics. For each, the
test checks what a client relies on (the Kafka error code, or that the
connection is closed rather than left hanging), that the broker logged the
reason for the operator, and that other clients are still served.
"""

import datetime
import importlib
import socket
import struct
import threading
import time
import uuid

import pytest
from clients import confluent_consume, confluent_produce, make_messages
from crc32c import crc32c
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.fetch.v13.request import FetchPartition as FetchPartitionV13
from kio.schema.fetch.v13.request import FetchRequest as FetchRequestV13
from kio.schema.fetch.v13.request import FetchTopic as FetchTopicV13
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v8.request import PartitionProduceData as PartitionProduceDataV8
from kio.schema.produce.v8.request import ProduceRequest as ProduceRequestV8
from kio.schema.produce.v8.request import TopicProduceData as TopicProduceDataV8
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v13.request import PartitionProduceData as PartitionProduceDataV13
from kio.schema.produce.v13.request import ProduceRequest as ProduceRequestV13
from kio.schema.produce.v13.request import TopicProduceData as TopicProduceDataV13
from log.batches import encode_record, make_batch, patched, raw_batch, record_values
from raw_protocol import (API_VERSIONS, CLIENT_ID, CORRUPT_MESSAGE, CREATE_TOPICS, FETCH, INVALID_RECORD,
                          INVALID_TIMESTAMP, INVALID_TOPIC_EXCEPTION, MESSAGE_TOO_LARGE, METADATA, METADATA_V, NONE,
                          PRODUCE, PRODUCE_V, TIMEOUT_S, UNKNOWN_TOPIC_OR_PARTITION, UNSUPPORTED_COMPRESSION_TYPE,
                          UNSUPPORTED_VERSION, RawClient, assert_healthy, create_topic, fetch, header_bytes,
                          list_offset, metadata, produce, request_payload, sized, wait_for_log)
from waiting import wait_until

from weir.protocol.versions import SUPPORTED_VERSIONS

UNKNOWN_TOPIC_ID = 100

# -- record batches, valid and not ---------------------------------------------

def with_fixed_crc(batch: bytearray) -> bytes:
    """Recompute the CRC after editing fields it covers (so the CRC is not what is wrong)."""
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def bad_crc() -> bytes:
    batch = bytearray(make_batch([b"payload"]))
    batch[-2] ^= 0xFF  # a byte of the record, covered by the CRC
    return bytes(batch)


def magic_1() -> bytes:
    batch = bytearray(make_batch([b"payload"]))
    batch[16] = 1
    return bytes(batch)


def with_attributes(attributes: int) -> bytes:
    batch = bytearray(make_batch([b"payload"]))
    struct.pack_into(">h", batch, 21, attributes)
    return with_fixed_crc(batch)


def wrong_record_count() -> bytes:
    batch = bytearray(make_batch([b"a", b"b"]))
    struct.pack_into(">i", batch, 57, 3)  # says 3 records, last offset delta says 2
    return with_fixed_crc(batch)


BAD_BATCHES = {
    "crc mismatch": (bad_crc, CORRUPT_MESSAGE),
    "truncated below a batch header": (lambda: make_batch([b"payload"])[:40], CORRUPT_MESSAGE),
    "batch length past its bytes": (lambda: make_batch([b"payload"])[:-3], CORRUPT_MESSAGE),
    "magic 1": (magic_1, INVALID_RECORD),
    "two batches for one partition": (lambda: make_batch([b"a"]) + make_batch([b"b"]), INVALID_RECORD),
    "null records": (lambda: None, INVALID_RECORD),
    "record count disagrees with offset delta": (wrong_record_count, INVALID_RECORD),
    "transactional batch": (lambda: with_attributes(0x10), INVALID_RECORD),
    "compression codec 5": (lambda: with_attributes(5), UNSUPPORTED_COMPRESSION_TYPE),
    # message.max.bytes defaults to 1048588
    "larger than message.max.bytes": (lambda: make_batch([b"x" * 1_100_000]), MESSAGE_TOO_LARGE),
    # CRC-valid batches whose records are not what the header says (weir.log.log_validator)
    "fewer records than the count": (lambda: patched(make_batch([b"a", b"b"]), record_count=3,
                                                     last_offset_delta=2), INVALID_RECORD),
    "offset deltas out of order": (lambda: raw_batch(encode_record(1, 0, b"k", b"a") + encode_record(0, 0, b"k", b"b"),
                                                     2), INVALID_RECORD),
    "bytes after the last record": (lambda: raw_batch(encode_record(0, 0, b"k", b"a") + b"\x00", 1), INVALID_RECORD),
    "gzip records that do not decompress": (lambda: raw_batch(b"\x1f\x8bnot gzip", 1, attributes=1), INVALID_RECORD),
    "control batch from a client": (lambda: with_attributes(0x20), INVALID_RECORD),
    "producer id without a sequence": (lambda: patched(make_batch([b"a"]), producer_id=5, producer_epoch=0),
                                       INVALID_RECORD),
    "timestamp two hours ahead": (lambda: make_batch([b"a"], timestamp=int(time.time() * 1000) + 7_200_000),
                                  INVALID_TIMESTAMP),
}


# -- malformed frames -------------------------------------------------------------

EMPTY_BODIES = {(18, 0), (18, 1), (18, 2), (16, 0), (16, 1), (16, 2), (16, 3)}  # ApiVersions, ListGroups


def garbage_frames() -> dict[str, bytes]:
    frames = {
        "empty frame": sized(b""),
        "frame shorter than a header": sized(b"\x00\x03\x00"),
        "client id past the end": sized(struct.pack(">hhih", METADATA, 1, 1, 50) + b"short"),
        "negative client id length": sized(struct.pack(">hhih", METADATA, 1, 1, -7)),
        # Produce v9: header tags, no transactional id, acks, timeout, then four billion topics
        "an array of four billion elements": sized(header_bytes(PRODUCE, PRODUCE_V) + b"\x00" + b"\x00\xff\xff"
                                                   + b"\x00\x00\x13\x88" + b"\xff\xff\xff\xff\x0f" + bytes(16)),
    }
    # garbage body for every api and version range end the broker supports
    for api_key, (low, high) in SUPPORTED_VERSIONS.items():
        for version in sorted({low, high}):
            if (api_key, version) in EMPTY_BODIES:
                continue  # an empty body: bytes after it are ignored, as Kafka does
            frames[f"garbage body for api {int(api_key)} v{version}"] = sized(
                header_bytes(api_key, version) + b"\xff\xfe\xfd\xfc\xfb\xfa\xf9")
    return frames


GARBAGE = garbage_frames()
GARBAGE_REASONS = {  # what the broker's log line says, for the frames not named by api
    "empty frame": "shorter than a header",
    "frame shorter than a header": "shorter than a header",
    "client id past the end": "client id runs past the end",
    "negative client id length": "negative client id length",
    "an array of four billion elements": "claims 4294967294 elements",
}


# -- the tests ---------------------------------------------------------------------

def test_garbage_body_closes_the_connection_and_real_clients_still_work(broker):
    with RawClient(broker.port) as bystander:
        assert bystander.api_versions_ok()
        for name, frame in GARBAGE.items():
            with RawClient(broker.port) as client:
                client.send(frame)
                client.assert_closed_by_broker()
                reason = GARBAGE_REASONS.get(name, name.removeprefix("garbage body for "))
                wait_for_log(broker, client.log_name, reason)
        # a connection opened before the bad ones is still served, and so are new ones
        assert bystander.api_versions_ok()
        create_topic(bystander, "after-garbage", 2)

    messages = make_messages(500, 2)
    confluent_produce(broker.bootstrap, "after-garbage", messages)
    received = confluent_consume(broker.bootstrap, "after-garbage", 2, len(messages))
    assert sorted((m.partition, m.key, m.value) for m in received) == sorted(
        (p, k, v) for p, k, v, _, _ in messages)
    assert_healthy(broker)


def test_good_requests_before_garbage_on_the_same_connection_are_answered(broker):
    """Requests pipelined ahead of the bad frame get their responses; then the close."""
    def good(correlation_id: int) -> bytes:
        return sized(request_payload(API_VERSIONS, 3, ApiVersionsRequest(
            client_software_name="x", client_software_version="1"), correlation_id))

    with RawClient(broker.port) as client:
        client.send(good(7) + good(8) + GARBAGE["garbage body for api 3 v13"] + good(9))
        assert client.read_response(API_VERSIONS, 3, 7).error_code == NONE
        assert client.read_response(API_VERSIONS, 3, 8).error_code == NONE
        client.assert_closed_by_broker()  # and request 9, behind the garbage, is not answered
        wait_for_log(broker, client.log_name, "api 3 v13")
    assert_healthy(broker)


@pytest.mark.parametrize("sent", [
    b"\x00\x00",  # half of the size prefix
    struct.pack(">i", 100) + header_bytes(METADATA, 12)[:6],  # size says 100, then 6 bytes
    struct.pack(">i", 5_000_000) + b"\x00" * 100_000,  # a large frame, cut short
], ids=["half a size prefix", "truncated header", "truncated large frame"])
@pytest.mark.parametrize("how", ["close", "half-close"])
def test_client_disconnecting_mid_frame_leaves_the_broker_unaffected(broker, sent, how):
    with RawClient(broker.port) as bystander:
        for _ in range(3):
            with RawClient(broker.port) as client:
                client.send(sent)
                # a frame still incomplete is left waiting, unanswered
                client.sock.settimeout(0.1)
                with pytest.raises(socket.timeout):
                    client.sock.recv(1)
                client.sock.settimeout(TIMEOUT_S)
                name = client.log_name.removeprefix("closing ")
                if how == "half-close":
                    client.sock.shutdown(socket.SHUT_WR)  # the frame can never be completed now
                    client.assert_closed_by_broker()
            wait_for_log(broker, name, f"ended mid-frame: {len(sent)} bytes of an incomplete request discarded")
        assert bystander.api_versions_ok()
    assert_healthy(broker)


@pytest.mark.parametrize("api_key, version, reason", [
    (999, 0, "unsupported api 999 version 0"),
    (-1, 0, "unsupported api -1 version 0"),
    (57, 0, "unsupported api 57 version 0"),  # a real Kafka api (UpdateFeatures) Weir lacks
    (56, 1, "unsupported api 56 version 1"),  # below the supported range (AlterPartition by topic name)
    (FETCH, 99, "unsupported api 1 version 99"),  # above it
])
def test_unknown_api_key_or_version_closes_the_connection(broker, api_key, version, reason):
    with RawClient(broker.port) as client:
        client.send(sized(header_bytes(api_key, version) + b"\x00" * 8))
        client.assert_closed_by_broker()
        line = wait_for_log(broker, client.log_name, reason)
        assert repr(CLIENT_ID.decode()) in line, "the operator can tell which client it was"
    assert_healthy(broker)


def test_api_versions_with_unsupported_version_lists_what_is_supported(broker):
    with RawClient(broker.port) as client:
        client.send(sized(header_bytes(API_VERSIONS, 99, correlation_id=42) + b"\x00\x01\x02"))
        response = client.read_response(API_VERSIONS, 0, 42)  # KIP-511: a v0 body
        assert response.error_code == UNSUPPORTED_VERSION
        keys = {v.api_key: (v.min_version, v.max_version) for v in response.api_keys}
        assert {PRODUCE, FETCH, METADATA} <= keys.keys()
        assert keys == {int(k): span for k, span in SUPPORTED_VERSIONS.items()}
        # the client retries with a version it now knows, on the same connection
        assert client.api_versions_ok()
    assert_healthy(broker)


def test_frames_beyond_socket_request_max_bytes_close_the_connection(start_broker):
    limit = 1000
    broker = start_broker(socket_request_max_bytes=str(limit))
    with RawClient(broker.port) as bystander:
        # only the size prefix is sent: the broker must not wait for the payload
        for size in (limit + 1, 2**31 - 1):
            with RawClient(broker.port) as client:
                client.send(struct.pack(">i", size))
                client.assert_closed_by_broker()
                wait_for_log(broker, client.log_name,
                             f"frame of {size} bytes exceeds socket.request.max.bytes {limit}")
        # ... and sending the payload anyway does not keep the connection open
        with RawClient(broker.port) as client:
            try:
                client.send(struct.pack(">i", 50_000) + b"\x00" * 50_000)
            except (BrokenPipeError, ConnectionResetError):
                pass
            client.assert_closed_by_broker()
        # requests pipelined ahead of the bad frame are answered first, as Kafka does
        with RawClient(broker.port) as client:
            ahead = b"".join(sized(request_payload(API_VERSIONS, 3, ApiVersionsRequest(
                client_software_name="x", client_software_version="1"), i)) for i in (1, 2))
            client.send(ahead + struct.pack(">i", limit + 1) + b"\x00" * 64)
            assert client.read_response(API_VERSIONS, 3, 1).error_code == NONE
            assert client.read_response(API_VERSIONS, 3, 2).error_code == NONE
            client.assert_closed_by_broker()
            wait_for_log(broker, client.log_name, f"frame of {limit + 1} bytes exceeds")
        for size in (-1, -2**31):
            with RawClient(broker.port) as client:
                client.send(struct.pack(">i", size) + b"\x00" * 16)
                client.assert_closed_by_broker()
                wait_for_log(broker, client.log_name, f"negative frame size {size}")

        # a request of exactly the limit is fine
        with RawClient(broker.port) as client:
            def request(names):
                return MetadataRequest(topics=tuple(MetadataRequestTopic(topic_id=None, name=n) for n in names),
                                       allow_auto_topic_creation=False, include_topic_authorized_operations=False)

            def names(last: int) -> list[str]:
                return ["a" * 240, "b" * 240, "c" * 240, "d" * last]

            last = 150  # names of 128-249 bytes all take a 2-byte length: size grows 1:1
            last += limit - len(request_payload(METADATA, METADATA_V, request(names(last))))
            assert 128 <= last <= 249
            entity = request(names(last))
            assert len(request_payload(METADATA, METADATA_V, entity)) == limit
            response = client.call(METADATA, METADATA_V, entity)
            assert [t.error_code for t in response.topics] == [UNKNOWN_TOPIC_OR_PARTITION] * 4
        assert bystander.api_versions_ok()
    assert_healthy(broker)



@pytest.mark.parametrize("case", BAD_BATCHES)
def test_bad_batch_is_refused_with_an_error_code_and_not_appended(broker, case):
    make, code = BAD_BATCHES[case]
    with RawClient(broker.port) as client:
        create_topic(client, "batches")
        result = produce(client, "batches", make())
        assert result.error_code == code, (case, result)
        assert result.base_offset == -1
        assert list_offset(client, "batches").offset == 0, "nothing was appended"
        # the same connection goes on; the next batch lands at offset 0
        assert produce(client, "batches", make_batch([b"good"])).error_code == NONE
        result = produce(client, "batches", make_batch([b"second", b"third"]))
        assert (result.error_code, result.base_offset) == (NONE, 1)
        assert list_offset(client, "batches").offset == 3
        fetched = fetch(client, "batches", 0)
        assert fetched.error_code == NONE and fetched.high_watermark == 3
        assert record_values(fetched.records) == [(0, b"good"), (1, b"second"), (2, b"third")]
    assert_healthy(broker)


def test_one_bad_partition_does_not_fail_the_others_in_a_request(broker):
    cases = list(BAD_BATCHES.values())
    with RawClient(broker.port) as client:
        create_topic(client, "mixed", len(cases) + 1)
        partitions = [PartitionProduceData(index=i, records=make()) for i, (make, _) in enumerate(cases)]
        partitions.append(PartitionProduceData(index=len(cases), records=make_batch([b"fine"])))
        response = client.call(PRODUCE, PRODUCE_V, ProduceRequest(
            transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
            topic_data=(TopicProduceData(name="mixed", partition_data=tuple(partitions)),)))
        by_index = {p.index: p for p in response.responses[0].partition_responses}
        assert [by_index[i].error_code for i in range(len(cases))] == [code for _, code in cases]
        assert (by_index[len(cases)].error_code, by_index[len(cases)].base_offset) == (NONE, 0)
        assert [list_offset(client, "mixed", i).offset for i in range(len(cases) + 1)] == [0] * len(cases) + [1]
    assert_healthy(broker)


def test_acks_0_produce_of_a_bad_batch_closes_the_connection(broker):
    """With acks=0 there is no response to carry the error: the close tells the client."""
    with RawClient(broker.port) as client:
        create_topic(client, "acks0")
        request = ProduceRequest(transactional_id=None, acks=0, timeout=datetime.timedelta(seconds=10),
                                 topic_data=(TopicProduceData(name="acks0", partition_data=(
                                     PartitionProduceData(index=0, records=bad_crc()),)),))
        client.send(sized(request_payload(PRODUCE, PRODUCE_V, request)))
        client.assert_closed_by_broker()
        wait_for_log(broker, client.log_name, "acks=0 produce failed")
    with RawClient(broker.port) as client:
        assert list_offset(client, "acks0").offset == 0
    assert_healthy(broker)


def test_requests_for_unknown_topics_get_unknown_topic_or_partition(broker):
    with RawClient(broker.port) as client:
        result = produce(client, "no-such-topic", make_batch([b"lost"]))
        assert (result.error_code, result.base_offset) == (UNKNOWN_TOPIC_OR_PARTITION, -1)

        # a long-polling fetch must answer the error at once, well inside the socket timeout
        started = time.monotonic()
        assert fetch(client, "no-such-topic", 0, max_wait_ms=30_000).error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert time.monotonic() - started < TIMEOUT_S

        assert list_offset(client, "no-such-topic").error_code == UNKNOWN_TOPIC_OR_PARTITION

        # a partition beyond a real topic's count is just as unknown
        create_topic(client, "one-partition")
        assert produce(client, "one-partition", make_batch([b"x"]), partition=1).error_code == \
            UNKNOWN_TOPIC_OR_PARTITION
        assert fetch(client, "one-partition", 0, partition=1).error_code == UNKNOWN_TOPIC_OR_PARTITION

        # none of that created a topic
        assert "no-such-topic" not in {t.name for t in metadata(client, None).topics}
        assert client.api_versions_ok()
    assert_healthy(broker)


def test_metadata_for_invalid_topic_names_is_refused_not_created(broker):
    invalid = ["bad name!", "..", "x" * 250, "slash/in/name"]
    with RawClient(broker.port) as client:
        response = metadata(client, invalid + ["fine-name"], auto_create=True)
        codes = {t.name: t.error_code for t in response.topics}
        assert codes == {**{n: INVALID_TOPIC_EXCEPTION for n in invalid}, "fine-name": NONE}
        listed = {t.name for t in metadata(client, None).topics}
        assert listed == {"fine-name"}, "only the valid name was auto-created"
        # a valid unknown name without auto-creation stays unknown
        response = metadata(client, ["not-created"], auto_create=False)
        assert [(t.name, t.error_code) for t in response.topics] == [("not-created", UNKNOWN_TOPIC_OR_PARTITION)]
    assert_healthy(broker)


def test_a_stream_of_bad_connections_does_not_disturb_a_producer(broker):
    """200+ garbage connections while confluent-kafka produces 10k records with acks=all."""
    frames = list(GARBAGE.values()) + [
        sized(header_bytes(999, 0)),
        struct.pack(">i", -1),
        struct.pack(">i", 2**31 - 1),
        sized(request_payload(PRODUCE, PRODUCE_V, ProduceRequest(
            transactional_id=None, acks=0, timeout=datetime.timedelta(seconds=1),
            topic_data=(TopicProduceData(name="busy", partition_data=(
                PartitionProduceData(index=0, records=bad_crc()),)),)))),
    ]
    attacking = threading.Event()
    done = threading.Event()
    failures: list[str] = []
    bad_connections = 0

    def attack() -> None:
        nonlocal bad_connections
        while not (done.is_set() and bad_connections >= 200):
            if bad_connections == 20:
                attacking.set()  # the producer starts once the attack is under way
            frame = frames[bad_connections % len(frames)]
            try:
                with RawClient(broker.port) as client:
                    client.send(frame)
                    client.assert_closed_by_broker()
            except Exception as e:  # noqa: BLE001 - reported by the main thread
                failures.append(f"{frame[:16]!r}: {e!r}")
                if len(failures) > 10:
                    return
            bad_connections += 1

    with RawClient(broker.port) as client:
        create_topic(client, "busy")
    attacker = threading.Thread(target=attack, daemon=True)
    attacker.start()
    try:
        assert attacking.wait(TIMEOUT_S), failures
        before = bad_connections
        confluent_produce(broker.bootstrap, "busy", make_messages(10_000, 1), acks="all")
        during = bad_connections - before
    finally:
        done.set()
        attacker.join(60)
    assert not attacker.is_alive()
    assert not failures, failures
    assert during > 0, "the bad connections overlapped the produce"
    assert bad_connections >= 200
    # the broker's log reaches us through a pipe thread, a little after the closes
    assert wait_until(lambda: broker.output().count("closing connection from") >= 200, "every close logged")
    with RawClient(broker.port) as client:
        assert list_offset(client, "busy").offset == 10_000
    assert broker.proc.poll() is None
    assert_healthy(broker)


def test_produce_and_fetch_by_the_zero_topic_id_get_unknown_topic_id(broker):
    """The hot requests' decoder reads the zero UUID as None; answering it raised in the encoder
    (a traceback, the connection closed). Kafka answers UNKNOWN_TOPIC_ID for an id it does not know."""
    zero = uuid.UUID(int=0)
    with RawClient(broker.port) as client:
        create_topic(client, "by-id")
        response = client.call(PRODUCE, 13, ProduceRequestV13(
            transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5), topic_data=(TopicProduceDataV13(
                topic_id=zero, partition_data=(PartitionProduceDataV13(index=0, records=make_batch([b"x"])),)),)))
        [topic] = response.responses
        assert (topic.topic_id, [p.error_code for p in topic.partition_responses]) == (None, [UNKNOWN_TOPIC_ID])  # kio: 0 is None
        response = client.call(FETCH, 13, FetchRequestV13(
            max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20, forgotten_topics_data=(), rack_id="",
            topics=(FetchTopicV13(topic_id=zero, partitions=(
                FetchPartitionV13(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),)),)))
        [topic] = response.responses
        assert (topic.topic_id, [p.error_code for p in topic.partitions]) == (None, [UNKNOWN_TOPIC_ID])
    assert_healthy(broker)


LONGEST_NAME = "w" * 0x7FFF  # the longest string a request can carry


def produce_v8_to(name: str):
    request = ProduceRequestV8(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=5),
                               topic_data=(TopicProduceDataV8(name=name, partition_data=(
                                   PartitionProduceDataV8(index=0, records=make_batch([b"x"])),)),))
    return PRODUCE, 8, request, lambda response: response.responses[0].partition_responses[0]


def create_topics(version: int, name: str):
    schema = importlib.import_module(f"kio.schema.create_topics.v{version}.request")
    request = schema.CreateTopicsRequest(topics=(schema.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=5), validate_only=False)
    return CREATE_TOPICS, version, request, lambda response: response.topics[0]


@pytest.mark.parametrize("make", [produce_v8_to, lambda name: create_topics(4, name),
                                  lambda name: create_topics(5, name)],
                         ids=["produce v8", "create topics v4 (legacy strings)", "create topics v5 (compact)"])
def test_an_error_message_quoting_the_longest_name_is_cut_to_fit_a_kafka_string(broker, make):
    """A message quoting a 32767-byte name does not fit a string of the protocol (legacy or
    compact: Kafka's parsers refuse more than 0x7fff bytes): it is cut and marked, and the
    client gets its error code."""
    api_key, version, request, result_of = make(LONGEST_NAME)
    with RawClient(broker.port) as client:
        result = result_of(client.call(api_key, version, request))
    assert result.error_code in (UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION)
    message = result.error_message.encode()
    assert len(message) <= 0x7FFF and message.endswith(b"...") and b"wwww" in message, message[:80]
    assert_healthy(broker)
