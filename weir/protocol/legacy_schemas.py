"""Request and response schemas of API versions Kafka 3.x speaks that kio does not ship (kio
follows Kafka 4, which removed them in KIP-896), written as kio's generated ones are.

- WriteTxnMarkers v0 (KIP-98): version 1 without the flexible encoding, same fields
  (WriteTxnMarkersRequest.json / WriteTxnMarkersResponse.json).
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.schema.types import ProducerId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32

from weir.protocol.versions import ApiKey


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerTopic:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(ApiKey.WRITE_TXN_MARKERS)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    partition_indexes: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarker:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(ApiKey.WRITE_TXN_MARKERS)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    producer_id: ProducerId = field(metadata={"kafka_type": "int64"})
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    transaction_result: bool = field(metadata={"kafka_type": "bool"})
    topics: tuple[WritableTxnMarkerTopic, ...]
    coordinator_epoch: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteTxnMarkersRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(ApiKey.WRITE_TXN_MARKERS)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    markers: tuple[WritableTxnMarker, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerPartitionResult:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(ApiKey.WRITE_TXN_MARKERS)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerTopicResult:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(ApiKey.WRITE_TXN_MARKERS)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[WritableTxnMarkerPartitionResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerResult:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(ApiKey.WRITE_TXN_MARKERS)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    producer_id: ProducerId = field(metadata={"kafka_type": "int64"})
    topics: tuple[WritableTxnMarkerTopicResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteTxnMarkersResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(ApiKey.WRITE_TXN_MARKERS)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    markers: tuple[WritableTxnMarkerResult, ...]


REQUESTS = {(ApiKey.WRITE_TXN_MARKERS, 0): WriteTxnMarkersRequest}
RESPONSES = {(ApiKey.WRITE_TXN_MARKERS, 0): WriteTxnMarkersResponse}
