"""Request and response headers, read and written by hand.

The broker must know api key, version, correlation id and client id before it
picks a body decoder (or before it answers UNSUPPORTED_VERSION), so the header
is parsed here without kio. Layout (request header v1/v2):

    api_key int16 | api_version int16 | correlation_id int32 | client_id nullable int16-string
    [v2, flexible bodies only: tagged fields]
"""

import struct
from dataclasses import dataclass

from weir.protocol.varint import read_uvarint

_FIXED = struct.Struct(">hhih")
CORRELATION = struct.Struct(">i")


class MalformedHeader(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the body starts, once flexible tagged fields are known
    client_host: str = ""  # the connection's peer as Kafka shows it ("/127.0.0.1"): not in the bytes
    # Kafka's RequestContext, also not in the bytes: the listener the request came on (Metadata answers
    # with that listener's endpoints) and who sent it (authenticated by TLS or SASL), for an authorizer
    listener: str = ""
    principal: str = "User:ANONYMOUS"
    size: int = 0  # the request's bytes (Kafka's sizeInBytes: a Produce costs its client's quota that much)


def read_request_header(frame: bytes | memoryview, client_host: str = "", listener: str = "",
                        principal: str = "User:ANONYMOUS") -> RequestHeader:
    """Parse the header fields common to every request version (not the tagged section)."""
    if len(frame) < _FIXED.size:
        raise MalformedHeader(f"request of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id, client_id_len = _FIXED.unpack_from(frame, 0)
    offset = _FIXED.size
    client_id = None
    if client_id_len >= 0:
        end = offset + client_id_len
        if end > len(frame):
            raise MalformedHeader("client id runs past the end of the request")
        client_id = bytes(frame[offset:end]).decode("utf-8", "replace")
        offset = end
    elif client_id_len != -1:
        raise MalformedHeader(f"negative client id length {client_id_len}")
    return RequestHeader(api_key, api_version, correlation_id, client_id, offset, client_host, listener, principal,
                         len(frame))


def skip_tagged_fields(frame: bytes | memoryview, offset: int) -> int:
    """Skip a tagged-field section (the header's carries nothing we use)."""
    count, offset = read_uvarint(frame, offset)
    for _ in range(count):
        _tag, offset = read_uvarint(frame, offset)
        size, offset = read_uvarint(frame, offset)
        offset += size
        if offset > len(frame):
            raise MalformedHeader("tagged field runs past the end of the request")
    return offset


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v0 (correlation id) or v1 (plus an empty tagged section)."""
    return CORRELATION.pack(correlation_id) + (b"\x00" if flexible else b"")
