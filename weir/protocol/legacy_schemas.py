"""Request and response schemas of API versions Kafka 3.9 serves that kio does not ship (kio follows
Kafka 4, which removed them in KIP-896), built as kio's generated ones are.

The broker decodes Produce and Fetch by hand (weir.protocol.hot_requests), every version; their
schemas here (v0-v2 and v0-v3: message formats 0 and 1, weir.protocol.legacy_records) serve the
tests' clients and fuzzers.

A version whose bytes are those of the next one (Kafka's JSON says "the same as version N") is
served by kio's class for that version. The others are written here as field lists, in wire order,
with kio's field names where kio has the field, so one handler reads every version; a field the
older version lacks is absent from its request (handlers read it with its Kafka default), and
`codec.build` leaves out of a response what the version does not carry.

Field types: a kio `kafka_type` ("int32", "string", ...), with "?" for a nullable one and "[...]"
for an array of it; a list of fields is an array of nested entities.
"""

from dataclasses import field, make_dataclass

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import Records, TZAware, i8, i16, i32, i32Timedelta, i64

from weir.protocol.versions import ApiKey

_PYTHON_TYPES = {"int8": i8, "int16": i16, "int32": i32, "int64": i64, "string": str, "bool": bool,
                 "bytes": bytes, "error_code": ErrorCode,
                 "timedelta_i32": i32Timedelta, "records": Records, "datetime_i64": TZAware}


def _entity(name: str, api_key: int, version: int, kind: EntityType, fields: list) -> type:
    header = RequestHeader if kind == EntityType.request else ResponseHeader
    nested_kind = EntityType.nested
    members = []
    for field_name, spec in fields:
        if isinstance(spec, list):
            nested = _entity(f"{name}_{field_name}", api_key, version, nested_kind, spec)
            members.append((field_name, tuple[nested, ...]))
            continue
        nullable, kafka_type = spec.endswith("?"), spec.rstrip("?")
        python_type = _PYTHON_TYPES[kafka_type.strip("[]")]
        if kafka_type.startswith("["):
            python_type = tuple[python_type, ...]
        members.append((field_name, python_type | None if nullable else python_type,
                        field(metadata={"kafka_type": kafka_type.strip("[]")})))
    namespace = {"__type__": kind, "__version__": i16(version), "__flexible__": False,
                 "__api_key__": i16(api_key), "__header_schema__": header}
    cls = make_dataclass(name, members, frozen=True, slots=True, kw_only=True)
    for key, value in namespace.items():  # ClassVars, set after: make_dataclass would take them as fields
        setattr(cls, key, value)
    return cls


def _request(api_key: ApiKey, version: int, fields: list) -> type:
    return _entity(f"{api_key.name.title().replace('_', '')}RequestV{version}", api_key, version,
                   EntityType.request, fields)


def _response(api_key: ApiKey, version: int, fields: list) -> type:
    return _entity(f"{api_key.name.title().replace('_', '')}ResponseV{version}", api_key, version,
                   EntityType.response, fields)


_TXN_MARKER_TOPICS = [("name", "string"), ("partition_indexes", "[int32]")]
_OFFSET_COMMIT_RESPONSE = [("topics", [("name", "string"), ("partitions", [
    ("partition_index", "int32"), ("error_code", "error_code")])])]
_OFFSET_FOR_EPOCH_REQUEST = [("topics", [("topic", "string"), ("partitions", [
    ("partition", "int32"), ("leader_epoch", "int32")])])]
_ACL_FILTER = [("resource_type_filter", "int8"), ("resource_name_filter", "string?"),
               ("principal_filter", "string?"), ("host_filter", "string?"), ("operation", "int8"),
               ("permission_type", "int8")]
_ACL_ENTRY = [("principal", "string"), ("host", "string"), ("operation", "int8"), ("permission_type", "int8")]

_PRODUCE_REQUEST = [("acks", "int16"), ("timeout", "timedelta_i32"), ("topic_data", [
    ("name", "string"), ("partition_data", [("index", "int32"), ("records", "records?")])])]
_FETCH_PARTITIONS = ("partitions", [("partition", "int32"), ("fetch_offset", "int64"),
                                    ("partition_max_bytes", "int32")])


def _produce_response(version: int) -> list:
    partition = [("index", "int32"), ("error_code", "error_code"), ("base_offset", "int64")]
    partition += [("log_append_time", "datetime_i64?")] if version >= 2 else []
    fields = [("responses", [("name", "string"), ("partition_responses", partition)])]
    return fields + ([("throttle_time", "timedelta_i32")] if version >= 1 else [])


def _fetch_request(version: int) -> list:
    limit = [("max_bytes", "int32")] if version >= 3 else []
    return [("replica_id", "int32"), ("max_wait", "timedelta_i32"), ("min_bytes", "int32"), *limit,
            ("topics", [("topic", "string"), _FETCH_PARTITIONS])]


def _fetch_response(version: int) -> list:
    throttle = [("throttle_time", "timedelta_i32")] if version >= 1 else []
    return [*throttle, ("responses", [("topic", "string"), ("partitions", [
        ("partition_index", "int32"), ("error_code", "error_code"), ("high_watermark", "int64"),
        ("records", "records?")])])]


REQUESTS: dict[tuple[int, int], type] = {
    **{(ApiKey.PRODUCE, v): _request(ApiKey.PRODUCE, v, _PRODUCE_REQUEST) for v in range(3)},
    **{(ApiKey.FETCH, v): _request(ApiKey.FETCH, v, _fetch_request(v)) for v in range(4)},
    # WriteTxnMarkers v0 (KIP-98): version 1 without the flexible encoding
    (ApiKey.WRITE_TXN_MARKERS, 0): _request(ApiKey.WRITE_TXN_MARKERS, 0, [("markers", [
        ("producer_id", "int64"), ("producer_epoch", "int16"), ("transaction_result", "bool"),
        ("topics", _TXN_MARKER_TOPICS), ("coordinator_epoch", "int32")])]),
    # OffsetCommit v0 (offsets Kafka kept in ZooKeeper) and v1 (with the generation, a commit time)
    (ApiKey.OFFSET_COMMIT, 0): _request(ApiKey.OFFSET_COMMIT, 0, [("group_id", "string"), ("topics", [
        ("name", "string"), ("partitions", [("partition_index", "int32"), ("committed_offset", "int64"),
                                            ("committed_metadata", "string?")])])]),
    (ApiKey.OFFSET_COMMIT, 1): _request(ApiKey.OFFSET_COMMIT, 1, [
        ("group_id", "string"), ("generation_id_or_member_epoch", "int32"), ("member_id", "string"),
        ("topics", [("name", "string"), ("partitions", [
            ("partition_index", "int32"), ("committed_offset", "int64"), ("commit_timestamp", "int64"),
            ("committed_metadata", "string?")])])]),
    (ApiKey.OFFSET_FETCH, 0): load_request_schema(ApiKey.OFFSET_FETCH, 1),
    # ListOffsets v0: how many offsets to list ("old style": offsets before the timestamp)
    (ApiKey.LIST_OFFSETS, 0): _request(ApiKey.LIST_OFFSETS, 0, [("replica_id", "int32"), ("topics", [
        ("name", "string"), ("partitions", [("partition_index", "int32"), ("timestamp", "int64"),
                                            ("max_num_offsets", "int32")])])]),
    # CreateTopics v0: v1 without validate_only; v1: v2's bytes
    (ApiKey.CREATE_TOPICS, 0): _request(ApiKey.CREATE_TOPICS, 0, [("topics", [
        ("name", "string"), ("num_partitions", "int32"), ("replication_factor", "int16"),
        ("assignments", [("partition_index", "int32"), ("broker_ids", "[int32]")]),
        ("configs", [("name", "string"), ("value", "string?")])]), ("timeout", "timedelta_i32")]),
    (ApiKey.CREATE_TOPICS, 1): load_request_schema(ApiKey.CREATE_TOPICS, 2),
    (ApiKey.DELETE_TOPICS, 0): load_request_schema(ApiKey.DELETE_TOPICS, 1),
    # DescribeConfigs v0: no synonyms asked for
    (ApiKey.DESCRIBE_CONFIGS, 0): _request(ApiKey.DESCRIBE_CONFIGS, 0, [("resources", [
        ("resource_type", "int8"), ("resource_name", "string"), ("configuration_keys", "[string]?")])]),
    # OffsetForLeaderEpoch v0-v1: no current leader epoch (KIP-320), no replica id
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, 0): _request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, _OFFSET_FOR_EPOCH_REQUEST),
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, 1): _request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 1, _OFFSET_FOR_EPOCH_REQUEST),
    # ACLs v0: literal resource names only (pattern types came with KIP-290, v1)
    (ApiKey.DESCRIBE_ACLS, 0): _request(ApiKey.DESCRIBE_ACLS, 0, _ACL_FILTER),
    (ApiKey.CREATE_ACLS, 0): _request(ApiKey.CREATE_ACLS, 0, [("creations", [
        ("resource_type", "int8"), ("resource_name", "string"), *_ACL_ENTRY])]),
    (ApiKey.DELETE_ACLS, 0): _request(ApiKey.DELETE_ACLS, 0, [("filters", _ACL_FILTER)]),
    (ApiKey.DESCRIBE_LOG_DIRS, 0): load_request_schema(ApiKey.DESCRIBE_LOG_DIRS, 1),
    (ApiKey.ALTER_REPLICA_LOG_DIRS, 0): load_request_schema(ApiKey.ALTER_REPLICA_LOG_DIRS, 1),
}

RESPONSES: dict[tuple[int, int], type] = {
    **{(ApiKey.PRODUCE, v): _response(ApiKey.PRODUCE, v, _produce_response(v)) for v in range(3)},
    **{(ApiKey.FETCH, v): _response(ApiKey.FETCH, v, _fetch_response(v)) for v in range(4)},
    (ApiKey.WRITE_TXN_MARKERS, 0): _response(ApiKey.WRITE_TXN_MARKERS, 0, [("markers", [
        ("producer_id", "int64"), ("topics", [("name", "string"), ("partitions", [
            ("partition_index", "int32"), ("error_code", "error_code")])])])]),
    (ApiKey.OFFSET_COMMIT, 0): load_response_schema(ApiKey.OFFSET_COMMIT, 2),
    (ApiKey.OFFSET_COMMIT, 1): load_response_schema(ApiKey.OFFSET_COMMIT, 2),
    (ApiKey.OFFSET_FETCH, 0): load_response_schema(ApiKey.OFFSET_FETCH, 1),
    (ApiKey.LIST_OFFSETS, 0): _response(ApiKey.LIST_OFFSETS, 0, [("topics", [("name", "string"), ("partitions", [
        ("partition_index", "int32"), ("error_code", "error_code"), ("old_style_offsets", "[int64]")])])]),
    (ApiKey.CREATE_TOPICS, 0): _response(ApiKey.CREATE_TOPICS, 0, [("topics", [
        ("name", "string"), ("error_code", "error_code")])]),
    (ApiKey.CREATE_TOPICS, 1): _response(ApiKey.CREATE_TOPICS, 1, [("topics", [
        ("name", "string"), ("error_code", "error_code"), ("error_message", "string?")])]),
    (ApiKey.DELETE_TOPICS, 0): _response(ApiKey.DELETE_TOPICS, 0, [("responses", [
        ("name", "string"), ("error_code", "error_code")])]),
    (ApiKey.DESCRIBE_CONFIGS, 0): _response(ApiKey.DESCRIBE_CONFIGS, 0, [("throttle_time", "timedelta_i32"), ("results", [
        ("error_code", "error_code"), ("error_message", "string?"), ("resource_type", "int8"),
        ("resource_name", "string"), ("configs", [("name", "string"), ("value", "string?"), ("read_only", "bool"),
                                                  ("is_default", "bool"), ("is_sensitive", "bool")])])]),
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, 0): _response(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, [("topics", [
        ("topic", "string"), ("partitions", [("error_code", "error_code"), ("partition", "int32"),
                                             ("end_offset", "int64")])])]),
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, 1): _response(ApiKey.OFFSET_FOR_LEADER_EPOCH, 1, [("topics", [
        ("topic", "string"), ("partitions", [("error_code", "error_code"), ("partition", "int32"),
                                             ("leader_epoch", "int32"), ("end_offset", "int64")])])]),
    (ApiKey.DESCRIBE_ACLS, 0): _response(ApiKey.DESCRIBE_ACLS, 0, [
        ("throttle_time", "timedelta_i32"), ("error_code", "error_code"), ("error_message", "string?"),
        ("resources", [("resource_type", "int8"), ("resource_name", "string"), ("acls", _ACL_ENTRY)])]),
    (ApiKey.CREATE_ACLS, 0): load_response_schema(ApiKey.CREATE_ACLS, 1),
    (ApiKey.DELETE_ACLS, 0): _response(ApiKey.DELETE_ACLS, 0, [("throttle_time", "timedelta_i32"), ("filter_results", [
        ("error_code", "error_code"), ("error_message", "string?"), ("matching_acls", [
            ("error_code", "error_code"), ("error_message", "string?"), ("resource_type", "int8"),
            ("resource_name", "string"), *_ACL_ENTRY])])]),
    (ApiKey.DESCRIBE_LOG_DIRS, 0): load_response_schema(ApiKey.DESCRIBE_LOG_DIRS, 1),
    (ApiKey.ALTER_REPLICA_LOG_DIRS, 0): load_response_schema(ApiKey.ALTER_REPLICA_LOG_DIRS, 1),
}
