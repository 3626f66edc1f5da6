"""Request decoding with kio's compiled readers (Produce and Fetch by hand: `hot_requests`);
generic response encoding.

Readers and writers are cached per (api key, version): building one costs far
more than using it. Responses of the cold APIs are built from plain dicts by
`build`, which fills the version's kio dataclass and ignores keys that the
version lacks, so one handler serves every version. The hot responses (Produce,
Fetch) are encoded by hand in `hot_responses`.
"""

import datetime
import io
import types
import typing
import uuid
from dataclasses import MISSING, fields, is_dataclass
from functools import cache

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from weir.protocol import legacy_schemas
from weir.protocol.errors import ErrorCode, wire_message
from weir.protocol.header import RequestHeader, response_header, skip_tagged_fields
from weir.protocol.hot_requests import decode_fetch_request, decode_produce_request
from weir.protocol.schema_overrides import REQUEST_SCHEMAS, RESPONSE_SCHEMAS
from weir.protocol.tagged_fields import check_framing, strip_unknown_tagged_fields
from weir.protocol.versions import ApiKey


class MalformedRequest(ValueError):
    pass


# The hot requests, decoded by hand (hot_requests): (version, frame, body offset) -> request
_HAND_DECODED = {0: decode_produce_request, 1: decode_fetch_request}


@cache
def request_schema(api_key: int, version: int) -> type:
    return (REQUEST_SCHEMAS.get((api_key, version)) or legacy_schemas.REQUESTS.get((api_key, version))
            or load_request_schema(api_key, version))


@cache
def response_schema(api_key: int, version: int) -> type:
    return (RESPONSE_SCHEMAS.get((api_key, version)) or legacy_schemas.RESPONSES.get((api_key, version))
            or load_response_schema(api_key, version))


@cache
def _reader(api_key: int, version: int):
    return entity_reader(request_schema(api_key, version))


@cache
def _writer(api_key: int, version: int):
    return entity_writer(response_schema(api_key, version))


# the first flexible version of the hand-decoded requests, whose oldest versions kio lacks
_FLEXIBLE_FROM = {0: 9, 1: 12}


def is_flexible(api_key: int, version: int) -> bool:
    first = _FLEXIBLE_FROM.get(api_key)
    return version >= first if first is not None else request_schema(api_key, version).__flexible__


def decode_request(header: RequestHeader, frame: bytes | memoryview):
    """Decode the body of a supported request; MalformedRequest on bad bytes."""
    api_key, version = header.api_key, header.api_version
    try:
        offset = header.body_offset
        if is_flexible(api_key, version):
            offset = skip_tagged_fields(frame, offset)
        hand_decoded = _HAND_DECODED.get(api_key)
        if hand_decoded is not None:
            return hand_decoded(version, frame, offset)
        check_framing(request_schema(api_key, version), frame, offset)  # before kio's reader: see there
        try:
            entity, _ = _reader(api_key, version)(frame, offset)
        except KeyError:
            # kio 0.6.5 raises KeyError on a tagged field it does not know; the
            # protocol says to ignore those, so strip them and decode again.
            body = strip_unknown_tagged_fields(request_schema(api_key, version), frame, offset)
            entity, _ = _reader(api_key, version)(body, 0)
    except MalformedRequest:
        raise
    except Exception as exc:  # kio raises a variety of errors on bad bytes
        raise MalformedRequest(f"cannot decode api {api_key} v{version}: {exc!r}") from exc
    # Bytes after the body are ignored, as Kafka's parser does: librdkafka 2.x sends three
    # extra bytes after some Metadata v13 requests, and a real client must keep working.
    return entity


def encode_response(api_key: int, version: int, correlation_id: int, body: dict) -> bytes:
    """Header plus a kio-encoded body built from `body` for this version."""
    schema = response_schema(api_key, version)
    out = io.BytesIO()
    # ApiVersions answers with header v0 even in flexible versions (KIP-511).
    flexible_header = schema.__flexible__ and api_key != ApiKey.API_VERSIONS
    out.write(response_header(correlation_id, flexible_header))
    _writer(api_key, version)(out, build(schema, body))
    return out.getvalue()


def build(schema: type, values: dict):
    """Fill the kio dataclass `schema` from `values`, coercing plain Python values."""
    kwargs = {}
    for name, coerce, required in _plan(schema):
        if name in values:
            value = values[name]
            kwargs[name] = None if value is None else coerce(value)
        elif required:
            raise KeyError(f"{schema.__qualname__} v{schema.__version__} needs {name!r}")
    return schema(**kwargs)


@cache
def _plan(schema: type) -> tuple:
    """Per field of `schema`: (name, coercion of a non-None value, required). Worked out once:
    introspecting the annotations on every call made large requests slow to build."""
    return tuple((f.name, wire_message if f.name.endswith("error_message") else
                  _coercion(f.type, f.metadata.get("kafka_type")),
                  f.default is MISSING and f.default_factory is MISSING) for f in fields(schema))


def _nested_type(annotation):
    """The dataclass inside `X`, `X | None` or `tuple[X, ...]`, else None."""
    if is_dataclass(annotation):
        return annotation
    for arg in typing.get_args(annotation):
        if arg is not Ellipsis and arg is not type(None):
            found = _nested_type(arg)
            if found is not None:
                return found
    return None


def _is_tuple(annotation) -> bool:
    if typing.get_origin(annotation) is tuple:
        return True
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return any(_is_tuple(a) for a in typing.get_args(annotation))
    return False


def _coercion(annotation, kafka_type):
    nested = _nested_type(annotation)
    if _is_tuple(annotation):
        if nested is not None:
            return lambda value: tuple(v if isinstance(v, nested) else build(nested, v) for v in value)
        return lambda value: tuple(_coerce_scalar(kafka_type, v) for v in value)
    if nested is not None:
        return lambda value: build(nested, value) if isinstance(value, dict) else value
    return lambda value: _coerce_scalar(kafka_type, value)


def _coerce_scalar(kafka_type, value):
    if kafka_type == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(value)
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type in ("datetime_i64",) and isinstance(value, int):
        if value < 0:
            return None
        return datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
    if kafka_type == "uuid" and isinstance(value, bytes):
        return uuid.UUID(bytes=value)
    return value
