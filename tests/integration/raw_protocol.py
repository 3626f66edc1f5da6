"""Speaking the Kafka protocol by hand, for tests that must send what no client would: a raw
connection, requests built from kio entities, and checks that a broker is still healthy."""

import datetime
import io
import socket
import struct
import time

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v7.request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_reader, entity_writer

from weir.protocol.codec import response_schema
from weir.protocol.versions import SUPPORTED_VERSIONS

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 2, 3, 18, 19
PRODUCE_V, FETCH_V, LIST_OFFSETS_V, METADATA_V, CREATE_TOPICS_V = 9, 12, 7, 12, 7

# Kafka error codes, as numbers on the wire
NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
INVALID_TIMESTAMP = 32
UNSUPPORTED_VERSION = 35
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87

CLIENT_ID = b"bad-input-test"
TIMEOUT_S = 5.0  # every wait on the broker is bounded by this
LATEST = -1


# -- frames and a raw client ---------------------------------------------------

def header_bytes(api_key: int, version: int, correlation_id: int = 1, client_id: bytes = CLIENT_ID) -> bytes:
    """Request header v1 (api key, version, correlation id, client id); no tagged section."""
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def sized(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def request_payload(api_key: int, version: int, entity, correlation_id: int = 1) -> bytes:
    out = io.BytesIO()
    out.write(header_bytes(api_key, version, correlation_id))
    if type(entity).__flexible__:
        out.write(b"\x00")  # request header v2: empty tagged fields
    entity_writer(type(entity))(out, entity)  # the entity's own schema: kio's, or one of weir's schema_overrides
    return out.getvalue()


class BrokerClosed(Exception):
    pass


def recv_exact(sock: socket.socket, size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(size - len(buf))
        if not chunk:
            raise BrokerClosed(f"connection closed after {len(buf)} of {size} bytes")
        buf += chunk
    return bytes(buf)


class RawClient:
    """One TCP connection speaking the Kafka protocol by hand."""

    def __init__(self, port: int, timeout: float = TIMEOUT_S) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.correlation_id = 0

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()

    @property
    def log_name(self) -> str:
        """How the broker names this connection in its log."""
        return f"closing connection from ('127.0.0.1', {self.sock.getsockname()[1]})"

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def call(self, api_key: int, version: int, entity):
        self.correlation_id += 1
        self.send(sized(request_payload(api_key, version, entity, self.correlation_id)))
        return self.read_response(api_key, version, self.correlation_id)

    def read_response(self, api_key: int, version: int, correlation_id: int):
        size, = struct.unpack(">i", recv_exact(self.sock, 4))
        payload = recv_exact(self.sock, size)
        got, = struct.unpack_from(">i", payload)
        assert got == correlation_id, f"response to correlation id {got}, expected {correlation_id}"
        schema = response_schema(api_key, version)  # kio's, or one of weir's legacy_schemas
        offset = 4
        if schema.__flexible__ and api_key != API_VERSIONS:  # KIP-511: ApiVersions keeps header v0
            assert payload[4] == 0, "response header v1 carries an empty tagged section"
            offset = 5
        entity, used = entity_reader(schema)(payload, offset)
        assert offset + used == len(payload), "response has trailing bytes"
        return entity

    def assert_closed_by_broker(self) -> None:
        """The broker closes the connection, with no response, within TIMEOUT_S."""
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            return  # closed with unread input still queued at the broker: a reset
        except socket.timeout:
            raise AssertionError(f"connection still open after {TIMEOUT_S}s") from None
        assert data == b"", f"expected a close, got {len(data)} bytes: {data[:40]!r}"

    def api_versions_ok(self) -> bool:
        response = self.call(API_VERSIONS, 3, ApiVersionsRequest(client_software_name="weir-test",
                                                                  client_software_version="1"))
        return response.error_code == NONE and len(response.api_keys) == len(SUPPORTED_VERSIONS)


def wait_for_log(broker, *needles: str) -> str:
    """The broker's log line containing every needle (it reaches us through a pipe thread)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        for line in broker.output().splitlines():
            if all(n in line for n in needles):
                return line
        if time.monotonic() > deadline:
            raise AssertionError(f"no broker log line with {needles}:\n{broker.output()[-3000:]}")
        time.sleep(0.02)


def assert_healthy(broker) -> None:
    """Alive, answering a new client, and no handler crashed along the way."""
    assert broker.proc.poll() is None, "broker process exited"
    with RawClient(broker.port) as client:
        assert client.api_versions_ok()
    output = broker.output()
    assert "Traceback" not in output and "internal error" not in output, output[-3000:]


# -- requests built from kio entities -------------------------------------------

def create_topic(client: RawClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    response = client.call(CREATE_TOPICS, CREATE_TOPICS_V, CreateTopicsRequest(
        topics=(CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=(),
                               configs=tuple(CreatableTopicConfig(name=k, value=v)
                                             for k, v in (configs or {}).items())),),
        timeout=datetime.timedelta(seconds=30), validate_only=False))
    assert response.topics[0].error_code == NONE, response


def produce(client: RawClient, topic: str, records: bytes | None, partition: int = 0, acks: int = -1):
    """Produce v9 of one partition's records; the partition's response."""
    request = ProduceRequest(transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=10),
                             topic_data=(TopicProduceData(name=topic, partition_data=(
                                 PartitionProduceData(index=partition, records=records),)),))
    response = client.call(PRODUCE, PRODUCE_V, request)
    [topic_response] = response.responses
    assert topic_response.name == topic
    [partition_response] = topic_response.partition_responses
    assert partition_response.index == partition
    return partition_response


def list_offset(client: RawClient, topic: str, partition: int = 0, timestamp: int = LATEST):
    response = client.call(LIST_OFFSETS, LIST_OFFSETS_V, ListOffsetsRequest(
        replica_id=-1, isolation_level=0,
        topics=(ListOffsetsTopic(name=topic, partitions=(
            ListOffsetsPartition(partition_index=partition, timestamp=timestamp),)),)))
    return response.topics[0].partitions[0]


def fetch(client: RawClient, topic: str, offset: int, partition: int = 0, max_wait_ms: int = 0):
    response = client.call(FETCH, FETCH_V, FetchRequest(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1, max_bytes=10 << 20,
        topics=(FetchTopic(topic=topic, partitions=(
            FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=10 << 20),)),),
        forgotten_topics_data=(), rack_id=""))
    assert response.error_code == NONE
    return response.responses[0].partitions[0]


def metadata(client: RawClient, names: list[str] | None, auto_create: bool = True):
    topics = None if names is None else tuple(MetadataRequestTopic(topic_id=None, name=n) for n in names)
    return client.call(METADATA, METADATA_V, MetadataRequest(topics=topics, allow_auto_topic_creation=auto_create,
                                                             include_topic_authorized_operations=False))
