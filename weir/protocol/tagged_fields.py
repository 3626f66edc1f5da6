"""Walking Kafka messages by their schema: checking their framing, and removing unknown tagged
fields from flexible versions.

:func:`check_framing` runs before kio's compiled (Rust) reader sees a request: that reader
reserves memory for an array from its declared count before reading it, so a 100-byte request
claiming two billion elements made it allocate tens of GB and abort the broker (found by the
produce fuzzer). The walk rejects any count that the bytes left cannot hold.

Kafka's flexible message versions (KIP-482) end every struct with a *tagged
field section*::

    uvarint count
    count * (uvarint tag, uvarint size, size bytes of payload)

The protocol says a reader must skip tags it does not know, so that newer
clients can add optional fields without bumping the version. kio 0.6.5's
compiled reader instead raises ``KeyError('Unknown tagged field tag: N')``.

:func:`strip_unknown_tagged_fields` is the slow-path workaround: it walks a
message body with the schema that kio's dataclasses describe and returns a
copy in which every tagged field section, at every nesting depth, keeps only
the tags the schema knows. The copy can then be decoded with kio's normal
fast reader.

The walker only needs to know how many bytes each field occupies, so it is
deliberately permissive about values (it does not, for example, reject a
null in a non-nullable string); validating values is left to kio's reader,
which decodes the returned copy. What it does reject, with
:class:`MalformedMessage`, is anything that makes the framing impossible to
follow: truncation, lengths that point past the end of the buffer, over-long
varints, or a known tagged field whose value does not fill exactly the size
its header declares.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, TypeAlias

from kio.serial._introspect import (EntityField, EntityTupleField, PrimitiveField, PrimitiveTupleField, classify_field,
                                    get_field_tag, get_schema_field_type, is_optional)

from weir.protocol.varint import write_uvarint

__all__ = ("MalformedMessage", "check_framing", "strip_unknown_tagged_fields")


class MalformedMessage(ValueError):
    """The bytes cannot be a valid encoding of the given message type."""


# --------------------------------------------------------------------------
# Schema description: one "codec" per field, telling the walker how the
# field is framed on the wire.
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Fixed:
    """A fixed-width value (ints, floats, bools, uuids, ...)."""

    size: int


@dataclass(frozen=True, slots=True)
class _Varint:
    """A variable-length integer of at most ``max_bytes`` bytes."""

    max_bytes: int


@dataclass(frozen=True, slots=True)
class _CompactBytes:
    """Compact string/bytes: uvarint (length + 1, 0 = null), then the data."""


@dataclass(frozen=True, slots=True)
class _LegacyBytes:
    """Legacy string (int16 length) or bytes (int32 length); -1 means null."""

    length_size: int


@dataclass(frozen=True, slots=True)
class _Struct:
    """A nested entity; nullable ones are preceded by an int8 marker."""

    entity_type: type
    nullable: bool


@dataclass(frozen=True, slots=True)
class _Array:
    """Compact (uvarint length + 1) or legacy (int32 length) array; null only if nullable."""

    item: _Codec
    compact: bool
    nullable: bool = False


_Codec: TypeAlias = _Fixed | _Varint | _CompactBytes | _LegacyBytes | _Struct | _Array

_FIXED_SIZES: Final[Mapping[str, int]] = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}

_VARINT_SIZES: Final[Mapping[str, int]] = {
    "uvarint": 5,
    "varint": 5,
    "uvarlong": 10,
    "varlong": 10,
}

# kio encodes nullable structs with a leading int8: -1 for null, anything
# else (1 by convention, KIP-893) for present. kio's reader treats every
# value other than -1 as "present", and so do we.
_NULL_STRUCT_MARKER: Final = 0xFF


def _primitive_codec(kafka_type: str, flexible: bool) -> _Codec:
    if kafka_type in _FIXED_SIZES:
        return _Fixed(_FIXED_SIZES[kafka_type])
    if kafka_type in _VARINT_SIZES:
        return _Varint(_VARINT_SIZES[kafka_type])
    if kafka_type in ("string", "bytes", "records"):
        if flexible:
            return _CompactBytes()
        return _LegacyBytes(2 if kafka_type == "string" else 4)
    raise TypeError(f"Unsupported kafka_type {kafka_type!r}")


def _field_codec(
    field: dataclasses.Field,
    *,
    flexible: bool,
    is_tag: bool,
    is_request_header: bool,
) -> _Codec:
    # Mirrors kio.serial._serialize.get_field_writer.
    if is_request_header and field.name == "client_id":
        # RequestHeader.client_id always uses the legacy string format.
        return _LegacyBytes(2)
    field_class = classify_field(field)
    match field_class:
        case PrimitiveField():
            return _primitive_codec(get_schema_field_type(field), flexible)
        case PrimitiveTupleField():
            item = _primitive_codec(get_schema_field_type(field), flexible)
            return _Array(item, compact=flexible, nullable=is_optional(field))
        case EntityField(entity_type):
            # Tagged fields are optional through the presence of the tag, so
            # kio never writes a null marker for them.
            nullable = not is_tag and is_optional(field)
            return _Struct(entity_type, nullable=nullable)
        case EntityTupleField(entity_type):
            return _Array(_Struct(entity_type, nullable=False), compact=flexible, nullable=is_optional(field))
    raise TypeError(f"Unsupported field {field.name!r}: {field_class!r}")


@dataclass(frozen=True, slots=True)
class _EntitySchema:
    flexible: bool
    # Untagged fields in wire order (dataclass declaration order).
    fields: tuple[_Codec, ...]
    # Tag number -> codec, for tags the schema knows.
    tags: Mapping[int, _Codec]


@functools.cache
def _entity_schema(entity_type: type) -> _EntitySchema:
    try:
        flexible = bool(entity_type.__flexible__)  # type: ignore[attr-defined]
        entity_fields = dataclasses.fields(entity_type)
    except (AttributeError, TypeError) as exception:
        raise TypeError(f"{entity_type!r} is not a kio entity class") from exception

    is_request_header = entity_type.__name__ == "RequestHeader"
    untagged = []
    tags = {}
    for field in entity_fields:
        tag = get_field_tag(field)
        codec = _field_codec(
            field,
            flexible=flexible,
            is_tag=tag is not None,
            is_request_header=is_request_header,
        )
        if tag is None:
            untagged.append(codec)
        else:
            tags[int(tag)] = codec
    if tags and not flexible:
        raise TypeError(f"{entity_type!r} has tagged fields but is not flexible")
    return _EntitySchema(flexible=flexible, fields=tuple(untagged), tags=tags)


def _contains_struct(codec: _Codec) -> bool:
    """Whether a value of this codec can contain tagged field sections."""
    if isinstance(codec, _Struct):
        return True
    if isinstance(codec, _Array):
        return _contains_struct(codec.item)
    return False


# --------------------------------------------------------------------------
# The walker.
# --------------------------------------------------------------------------


class _Walker:
    """Reads ``buf`` from ``pos`` up to ``end``, appending the stripped copy to
    the ``out`` buffers passed to its methods."""

    def __init__(self, buf: memoryview, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)

    # -- low-level reads ---------------------------------------------------

    def _fail(self, what: str) -> MalformedMessage:
        return MalformedMessage(f"{what} (at byte offset {self.pos})")

    def _take(self, n: int, what: str) -> memoryview:
        if n < 0 or n > self.end - self.pos:
            raise self._fail(
                f"truncated {what}: needs {n} bytes, {self.end - self.pos} left"
            )
        start = self.pos
        self.pos += n
        return self.buf[start : self.pos]

    def _uvarint(self, what: str, max_bytes: int = 5) -> int:
        result = 0
        for index in range(max_bytes):
            if self.pos >= self.end:
                raise self._fail(f"truncated varint in {what}")
            byte = self.buf[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << (7 * index)
            if not byte & 0x80:
                return result
        raise self._fail(f"varint in {what} longer than {max_bytes} bytes")

    def _signed_int(self, size: int, what: str) -> int:
        return int.from_bytes(self._take(size, what), "big", signed=True)

    def _check_count(self, count: int, min_item_size: int, what: str) -> None:
        # Every element occupies at least one byte in any real schema, so a
        # count larger than the bytes left can never be valid. This bounds the
        # work done for absurd counts.
        if count * max(min_item_size, 1) > self.end - self.pos:
            raise self._fail(
                f"{what} claims {count} elements but only "
                f"{self.end - self.pos} bytes are left"
            )

    # -- structure ---------------------------------------------------------

    def walk(self, codec: _Codec, out: bytearray) -> None:
        """Consume one value of ``codec``, appending its stripped copy to out."""
        start = self.pos
        if isinstance(codec, _Struct):
            if codec.nullable:
                marker = self._take(1, "nullable struct marker")[0]
                out += self.buf[start : self.pos]
                if marker == _NULL_STRUCT_MARKER:
                    return
            self.walk_entity(codec.entity_type, out)
        elif isinstance(codec, _Array) and _contains_struct(codec.item):
            count = self._array_length(codec)
            self._check_count(count, 1, "array")
            out += self.buf[start : self.pos]
            for _ in range(count):
                self.walk(codec.item, out)
        else:
            # Values without structs inside cannot hold tagged fields, so
            # they are copied verbatim.
            self.skip(codec)
            out += self.buf[start : self.pos]

    def skip(self, codec: _Codec) -> None:
        """Consume one value of a codec that contains no structs."""
        match codec:
            case _Fixed(size):
                self._take(size, "fixed-width field")
            case _Varint(max_bytes):
                self._uvarint("varint field", max_bytes)
            case _CompactBytes():
                length = self._uvarint("compact string/bytes length")
                if length:
                    self._take(length - 1, "compact string/bytes")
            case _LegacyBytes(length_size):
                length = self._signed_int(length_size, "string/bytes length")
                if length < -1:
                    raise self._fail(f"negative string/bytes length {length}")
                if length > 0:
                    self._take(length, "string/bytes")
            case _Array(_Fixed(size)):
                count = self._array_length(codec)
                self._check_count(count, size, "array")
                self._take(count * size, "array")
            case _Array(item) if not _contains_struct(item):
                count = self._array_length(codec)
                self._check_count(count, 1, "array")
                for _ in range(count):
                    self.skip(item)
            case _:
                raise TypeError(f"cannot skip {codec!r}")

    def _array_length(self, codec: _Array) -> int:
        """Read an array length; null arrays are reported as empty, and refused where the schema
        does not allow null (as Kafka's parser does: handlers iterate such arrays)."""
        count = self._uvarint("compact array length") - 1 if codec.compact else self._signed_int(4, "array length")
        if count < -1:
            raise self._fail(f"negative array length {count}")
        if count == -1 and not codec.nullable:
            raise self._fail("null for an array that cannot be null")
        return max(count, 0)

    def walk_entity(self, entity_type: type, out: bytearray) -> None:
        schema = _entity_schema(entity_type)
        for codec in schema.fields:
            self.walk(codec, out)
        if schema.flexible:
            self.walk_tagged_section(schema.tags, out)

    def walk_tagged_section(self, known: Mapping[int, _Codec], out: bytearray) -> None:
        start = self.pos
        count = self._uvarint("tagged field count")
        # Each tagged field needs at least two bytes (tag and size).
        self._check_count(count, 2, "tagged field section")
        kept: list[tuple[int, bytes]] = []
        changed = False
        for _ in range(count):
            tag = self._uvarint("tag")
            size = self._uvarint(f"size of tagged field {tag}")
            payload_start = self.pos
            payload = self._take(size, f"value of tagged field {tag}")
            codec = known.get(tag)
            if codec is None:
                changed = True
                continue
            if _contains_struct(codec):
                new_payload = self._rewrite_payload(codec, payload_start, tag)
                if new_payload != payload:
                    changed = True
                kept.append((tag, new_payload))
            else:
                kept.append((tag, bytes(payload)))
        if not changed:
            out += self.buf[start : self.pos]
            return
        out += write_uvarint(len(kept))
        for tag, payload in kept:
            out += write_uvarint(tag)
            out += write_uvarint(len(payload))
            out += payload

    def _rewrite_payload(self, codec: _Codec, payload_start: int, tag: int) -> bytes:
        """Strip the value of a known tagged field that holds structs."""
        payload_end = self.pos
        saved_end = self.end
        self.pos, self.end = payload_start, payload_end
        try:
            new_payload = bytearray()
            self.walk(codec, new_payload)
            if self.pos != payload_end:
                raise self._fail(
                    f"tagged field {tag} declares {payload_end - payload_start} "
                    f"bytes but its value occupies {self.pos - payload_start}"
                )
        finally:
            self.pos, self.end = payload_end, saved_end
        return bytes(new_payload)


def strip_unknown_tagged_fields(
    entity_type: type,
    buffer: bytes | bytearray | memoryview,
    offset: int = 0,
) -> bytes:
    """Return a copy of the message body at ``buffer[offset:]`` without unknown
    tagged fields.

    ``entity_type`` is the kio entity class (e.g. a request class) describing
    the body. Every tagged field section in the body — top level, in nested
    structs at any depth, in array elements, and inside known tagged fields
    that hold structs — keeps only the tags that the schema of the struct it
    belongs to knows, in their original order, with the count rewritten.
    Known tags' payloads are copied unchanged, except that unknown tags nested
    inside a known struct-valued tag are removed too (and its size rewritten).
    Sections without unknown tags are copied byte for byte, and so are any
    bytes following the end of the message.

    Non-flexible messages cannot carry tagged fields and are returned as
    ``bytes(buffer[offset:])`` without being inspected.

    The result starts at the beginning of the message: decode it with
    ``entity_reader(entity_type)(result, 0)``.

    :raises MalformedMessage: if the bytes cannot be framed according to the
        schema (truncated data, lengths or counts exceeding the buffer,
        over-long varints, a known tagged field whose value does not fill its
        declared size).
    :raises TypeError: if ``entity_type`` is not a kio entity class.
    """
    schema = _entity_schema(entity_type)
    view = memoryview(buffer).cast("B")
    if offset < 0:
        raise ValueError(f"offset must not be negative, got {offset}")
    if offset > len(view):
        raise MalformedMessage(
            f"offset {offset} is past the end of a {len(view)}-byte buffer"
        )
    if not schema.flexible:
        return bytes(view[offset:])
    walker = _Walker(view, offset)
    out = bytearray()
    walker.walk_entity(entity_type, out)
    out += view[walker.pos :]
    return bytes(out)


class _Discard:
    """An `out` buffer for walks that only check: appending is free."""

    def __iadd__(self, other):
        return self


@functools.cache
def _fixed_prefix(entity_type: type) -> int | None:
    """The bytes of a struct's untagged fields if every one is fixed-width, else None."""
    codecs = _entity_schema(entity_type).fields
    return sum(c.size for c in codecs) if all(isinstance(c, _Fixed) for c in codecs) else None


class _FramingChecker(_Walker):
    """A walk that copies nothing, with a fast path for arrays of structs of fixed-width fields
    (a follower's Fetch names each of its partitions that way)."""

    def walk(self, codec: _Codec, out) -> None:
        if isinstance(codec, _Array) and isinstance(codec.item, _Struct) and not codec.item.nullable:
            prefix = _fixed_prefix(codec.item.entity_type)
            if prefix is not None:
                schema = _entity_schema(codec.item.entity_type)
                count = self._array_length(codec)
                self._check_count(count, prefix + schema.flexible, "array")
                if not schema.flexible:
                    self._take(count * prefix, "array")
                    return
                buf, end = self.buf, self.end
                for _ in range(count):
                    after = self.pos + prefix
                    if after < end and buf[after] == 0:  # the usual empty tagged section
                        self.pos = after + 1
                        continue
                    self._take(prefix, "struct")
                    self.walk_tagged_section(schema.tags, out)
                return
        super().walk(codec, out)


def check_framing(entity_type: type, buffer: bytes | bytearray | memoryview, offset: int = 0) -> None:
    """Raise MalformedMessage unless the message at ``buffer[offset:]`` can be framed by its
    schema (flexible or not): every length and count fits the bytes left, no varint is over-long.
    Bytes after the message are allowed."""
    view = memoryview(buffer).cast("B")
    if not 0 <= offset <= len(view):
        raise MalformedMessage(f"offset {offset} is outside a {len(view)}-byte buffer")
    _FramingChecker(view, offset).walk_entity(entity_type, _Discard())
