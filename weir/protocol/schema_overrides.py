"""Schemas of our own where kio's cannot carry what Kafka sends; the bytes are Kafka's.

- DescribeTransactions v0 response (KIP-664): `transaction_start_time_ms` is -1 for a transaction
  that has not started (Empty, an unknown id), as Kafka sends it; kio types the field as a datetime
  and its reader refuses a negative one. Here the field is a plain int64 of milliseconds, on the
  broker's side (encoding) and the client's (decoding).
- OffsetCommit v2-v4 requests: `retention_time_ms` is any int64 to Kafka; kio reads it as a
  timedelta, which overflows from about 2^56 ms, and the request could not be decoded. Here it is
  a plain int64 of milliseconds.
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.index import load_request_schema
from kio.schema.describe_transactions.v0 import response as _v0
from kio.static.primitive import i16, i32Timedelta, i64

from weir.protocol.versions import ApiKey


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedTransaction:
    __type__: ClassVar = _v0.TransactionState.__type__
    __version__: ClassVar = _v0.TransactionState.__version__
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar = _v0.TransactionState.__api_key__
    __header_schema__: ClassVar = _v0.TransactionState.__header_schema__
    error_code: _v0.ErrorCode = field(metadata={"kafka_type": "error_code"})
    transactional_id: str = field(metadata={"kafka_type": "string"})
    transaction_state: str = field(metadata={"kafka_type": "string"})
    transaction_timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    transaction_start_time: i64 = field(metadata={"kafka_type": "int64"})  # ms; -1: not started
    producer_id: i64 = field(metadata={"kafka_type": "int64"})
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    topics: tuple[_v0.TopicData, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTransactionsResponseV0:
    __type__: ClassVar = _v0.DescribeTransactionsResponse.__type__
    __version__: ClassVar = _v0.DescribeTransactionsResponse.__version__
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar = _v0.DescribeTransactionsResponse.__api_key__
    __header_schema__: ClassVar = _v0.DescribeTransactionsResponse.__header_schema__
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    transaction_states: tuple[DescribedTransaction, ...]


RESPONSE_SCHEMAS: dict[tuple[int, int], type] = {(ApiKey.DESCRIBE_TRANSACTIONS, 0): DescribeTransactionsResponseV0}


def _offset_commit_with_plain_retention(version: int) -> type:
    base = load_request_schema(ApiKey.OFFSET_COMMIT, version)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class OffsetCommitRequest(base):
        retention_time: i64 = field(metadata={"kafka_type": "int64"})  # ms; -1: the broker's retention
    OffsetCommitRequest.__qualname__ = f"OffsetCommitRequestV{version}"
    return OffsetCommitRequest


REQUEST_SCHEMAS: dict[tuple[int, int], type] = {
    (ApiKey.OFFSET_COMMIT, version): _offset_commit_with_plain_retention(version) for version in (2, 3, 4)}
