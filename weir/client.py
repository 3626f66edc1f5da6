"""A small asyncio client of the Kafka wire protocol.

Two layers:

- `BrokerConnection`: one TCP connection to one broker. Requests are written
  as soon as they are made (pipelining); the broker answers them in order and
  each answer is matched to its request by correlation id. Request headers are
  written by hand; bodies are encoded and decoded with kio, from kio entities
  or from plain dicts (filled in with `codec.build`, which ignores keys a
  version lacks, so one dict serves every version).
- `ClusterClient`: bootstrap from "host:port[,host:port]", learn brokers,
  controller and partition leaders from Metadata, keep one connection per
  broker, and retry a request on the errors that mean "your metadata is stale"
  (NOT_LEADER_OR_FOLLOWER, NOT_CONTROLLER, ...).

Used by inter-broker replication, the controller, the admin CLI and the Spark
source; it imports nothing but `weir.protocol` and kio.

    conn = await BrokerConnection.open("127.0.0.1", 9092)
    await conn.api_versions()
    version = conn.pick_version(ApiKey.METADATA, 12)
    response = await conn.request(ApiKey.METADATA, version, {"topics": None})
    await conn.close()
"""

from __future__ import annotations

import asyncio
import io
import logging
import random
import secrets
import ssl
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer

from weir.protocol import legacy_schemas
from weir.protocol.codec import build
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.header import skip_tagged_fields
from weir.protocol.schema_overrides import RESPONSE_SCHEMAS
from weir.protocol.scram import MECHANISMS as SCRAM_MECHANISMS
from weir.protocol.scram import ScramClient, ScramError
from weir.protocol.security_protocols import SecurityProtocolOf
from weir.protocol.tagged_fields import strip_unknown_tagged_fields
from weir.protocol.versions import ApiKey
from weir.transport.frame_receiver import FrameReceiver

__all__ = [
    "BrokerConnection", "ClusterClient", "ClientError", "ConnectionClosed", "BrokerUnreachable",
    "RequestTimedOut", "UnsupportedVersion", "KafkaError", "ErrorCode", "Node",
    "PartitionInfo", "TopicInfo", "parse_bootstrap", "check_error", "highest_known_version",
    "REFRESH_ERRORS", "encode_request", "decode_response", "ClientSecurity", "AuthenticationFailed",
]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")
_CORRELATION = struct.Struct(">i")
_ERROR = struct.Struct(">h")

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_RESPONSE_BYTES = 200 * 1024 * 1024


# -- errors --------------------------------------------------------------------

class ClientError(Exception):
    """Base of the client's own failures (not errors answered by a broker)."""


class ConnectionClosed(ClientError, ConnectionError):
    """The connection ended (or was closed) while requests were in flight."""


class BrokerUnreachable(ConnectionClosed):
    """The connection could not be opened at all."""


class RequestTimedOut(ClientError, TimeoutError):
    """No response arrived within the request's timeout."""


class UnsupportedVersion(ClientError):
    """The broker and this client share no version of an API."""


class AuthenticationFailed(ConnectionClosed):
    """SASL authentication failed (the broker closes the connection after saying so)."""


@dataclass(frozen=True)
class ClientSecurity(SecurityProtocolOf):
    """How to connect, as Kafka's client settings say: `security.protocol` (PLAINTEXT, SSL,
    SASL_PLAINTEXT, SASL_SSL), a TLS context for the SSL ones, and the SASL mechanism (PLAIN,
    SCRAM-SHA-256, SCRAM-SHA-512) with a user name and password for the SASL ones."""
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str = ""
    username: str = ""
    password: str = ""


PLAINTEXT = ClientSecurity()


def check_error(code, message: str | None = None) -> None:
    """Raise KafkaError(code, message) unless `code` is NONE (0)."""
    code = ErrorCode(code)
    if code != ErrorCode.none:
        raise KafkaError(code, message)


# -- schemas, readers, writers ----------------------------------------------------

@cache
def _request_schema(api_key: int, version: int) -> type:
    return legacy_schemas.REQUESTS.get((api_key, version)) or load_request_schema(api_key, version)


@cache
def _response_schema(api_key: int, version: int) -> type:
    return (RESPONSE_SCHEMAS.get((api_key, version)) or legacy_schemas.RESPONSES.get((api_key, version))
            or load_response_schema(api_key, version))


@cache
def _writer(api_key: int, version: int):
    return entity_writer(_request_schema(api_key, version))


@cache
def _reader(api_key: int, version: int):
    return entity_reader(_response_schema(api_key, version))


@cache
def highest_known_version(api_key: int) -> int:
    """The highest version of `api_key` that kio (hence this client) can encode."""
    return max(schema_name_map[api_key_map[api_key]])


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None, body) -> bytes:
    """A complete request frame: size, header v1/v2, body."""
    schema = _request_schema(api_key, version)
    if isinstance(body, dict):
        body = build(schema, body)
    elif not isinstance(body, (schema, bytes)):
        raise TypeError(f"body for api {api_key} v{version} must be a dict or {schema.__qualname__}, "
                        f"not {type(body).__qualname__}")
    raw = b"" if client_id is None else client_id.encode()
    header = _HEADER.pack(api_key, version, correlation_id, -1 if client_id is None else len(raw)) + raw
    if schema.__flexible__:
        header += b"\x00"  # request header v2: empty tagged fields
    if not isinstance(body, bytes):  # bytes: encoded by hand (weir.protocol.hot_requests)
        out = io.BytesIO()
        _writer(api_key, version)(out, body)
        body = out.getvalue()
    return b"".join((_SIZE.pack(len(header) + len(body)), header, body))


def decode_response(api_key: int, version: int, frame: bytes):
    """Decode a response frame (without the size prefix, with the header)."""
    offset = _CORRELATION.size
    if api_key == ApiKey.API_VERSIONS:
        # Response header v0 always (KIP-511). A broker that does not support
        # our version answers with a v0 body carrying UNSUPPORTED_VERSION.
        if (len(frame) >= offset + 2 and _ERROR.unpack_from(frame, offset)[0] == ErrorCode.unsupported_version
                and version != 0):
            version = 0
    elif _response_schema(api_key, version).__flexible__:
        offset = skip_tagged_fields(frame, offset)
    try:
        entity, _size = _reader(api_key, version)(frame, offset)
    except KeyError:
        # kio 0.6.5 raises KeyError on unknown tagged fields, which must be skipped.
        body = strip_unknown_tagged_fields(_response_schema(api_key, version), frame, offset)
        entity, _size = _reader(api_key, version)(body, 0)
    return entity


# -- one connection ---------------------------------------------------------------

@dataclass
class _Pending:
    api_key: int
    version: int
    future: asyncio.Future
    decode: Callable | None = None  # (version, frame) -> the response; None: kio's decode_response


class _ResponseFrames(FrameReceiver):
    """The socket side of a BrokerConnection: cuts what arrives into response frames for it
    (weir.transport.frame_receiver), and holds its writers back while the transport's buffer is full. A
    protocol rather than a StreamReader and a reading task: a response reaches its waiter in the
    loop turn it arrives."""

    MIN_FRAME = 4  # a correlation id

    def __init__(self, max_response_bytes: int) -> None:
        super().__init__()
        self.max_response_bytes = max_response_bytes
        self.connection: BrokerConnection | None = None  # set once the connection exists
        self.transport: asyncio.Transport | None = None
        self.paused = False  # the transport's write buffer is over its high-water mark
        self._drained: asyncio.Future | None = None
        self.lost = asyncio.get_running_loop().create_future()  # done when the transport is gone

    def connection_made(self, transport) -> None:
        self.transport = transport

    def cutting(self) -> bool:
        return self.connection is not None  # nothing asked before: kept for the connection, which will find it bad

    def frame_limit(self) -> int:
        return self.max_response_bytes

    def frame_received(self, frame: bytes | memoryview) -> None:
        self.connection._dispatch(frame)

    def frame_refused(self, size: int, limit: int) -> None:
        conn = self.connection
        conn._fail_all(ConnectionClosed(f"connection to {conn.host}:{conn.port} bad response size {size}"))

    def connection_lost(self, exc) -> None:
        conn = self.connection
        if conn is not None:
            reason = "closed by the broker" if exc is None else f"lost: {exc}"
            conn._fail_all(ConnectionClosed(f"connection to {conn.host}:{conn.port} {reason}"))
        self._wake_writers(exc or ConnectionResetError("connection lost"))
        if not self.lost.done():
            self.lost.set_result(None)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake_writers(None)

    def _wake_writers(self, exc: BaseException | None) -> None:
        waiter, self._drained = self._drained, None
        if waiter is not None and not waiter.done():
            if exc is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(exc)
                waiter.exception()  # retrieved: every writer waiting may have been cancelled

    async def drain(self) -> None:
        """Return once the transport takes more writes; ConnectionResetError if it is gone."""
        if self.lost.done():
            raise ConnectionResetError("connection lost")
        if self.paused:
            if self._drained is None:
                self._drained = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._drained)


class BrokerConnection:
    """One connection to one broker, with pipelined requests.

    Use `await BrokerConnection.open(host, port)`; then `await request(...)`
    from any number of tasks at once. A dead connection fails every request in
    flight (and every later one) with ConnectionClosed.
    """

    def __init__(self, frames: _ResponseFrames, *, host: str, port: int, client_id: str | None,
                 timeout_s: float | None, max_response_bytes: int) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes
        self.versions: dict[int, tuple[int, int]] | None = None  # from api_versions()
        self._frames = frames
        self._transport = frames.transport
        self._pending: dict[int, _Pending] = {}  # insertion order = send order
        self._next_correlation = 1
        self._closed_error: ConnectionClosed | None = None
        self._security: ClientSecurity | None = None  # once authenticated: to re-authenticate (KIP-368)
        self._reauthenticate_at: float | None = None   # loop time
        self._reauthentication = asyncio.Lock()

    @classmethod
    async def open(cls, host: str, port: int, client_id: str | None = "weir",
                   timeout_s: float | None = DEFAULT_TIMEOUT_S, *,
                   connect_timeout_s: float | None = None,
                   max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                   security: ClientSecurity = PLAINTEXT) -> BrokerConnection:
        """Connect (with TLS and SASL authentication, as `security` says); BrokerUnreachable if
        the broker cannot be reached in time, AuthenticationFailed if it refuses us."""
        connect_timeout = connect_timeout_s if connect_timeout_s is not None else timeout_s
        tls = security.ssl_context if security.uses_tls else None
        if security.uses_tls and tls is None:
            tls = ssl.create_default_context()
        try:
            async with asyncio.timeout(connect_timeout):  # not wait_for: see request
                _, frames = await asyncio.get_running_loop().create_connection(
                    lambda: _ResponseFrames(max_response_bytes), host, port, ssl=tls,
                    server_hostname=host if tls is not None else None)
        except (OSError, asyncio.TimeoutError) as e:
            reason = "timed out" if isinstance(e, asyncio.TimeoutError) else (e.strerror or str(e))
            raise BrokerUnreachable(f"cannot connect to {host}:{port}: {reason}") from e
        conn = frames.connection = cls(frames, host=host, port=port, client_id=client_id, timeout_s=timeout_s,
                                       max_response_bytes=max_response_bytes)
        if frames.lost.done():  # the broker hung up before we listened
            conn._fail_all(ConnectionClosed(f"connection to {host}:{port} closed by the broker"))
        if security.uses_sasl:
            try:
                await conn.authenticate(security)
            except BaseException:
                await conn.close()
                raise
        return conn

    async def authenticate(self, security: ClientSecurity) -> int:
        """SaslHandshake v1 and SaslAuthenticate (PLAIN or SCRAM); returns the session lifetime in
        ms the broker gave (KIP-368; 0: no limit). AuthenticationFailed if refused."""
        mechanism = security.sasl_mechanism
        handshake = await self.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        if handshake.error_code != ErrorCode.none:
            raise AuthenticationFailed(f"{self.host}:{self.port}: {ErrorCode(handshake.error_code).name}: "
                                       f"{mechanism} is not enabled (enabled: {', '.join(handshake.mechanisms)})")

        async def step(auth_bytes: bytes):
            answer = await self.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": auth_bytes})
            if answer.error_code != ErrorCode.none:
                raise AuthenticationFailed(f"{self.host}:{self.port}: {ErrorCode(answer.error_code).name}: "
                                           f"{answer.error_message}")
            return answer

        if mechanism == "PLAIN":
            answer = await step(f"\0{security.username}\0{security.password}".encode())
        elif mechanism in SCRAM_MECHANISMS:
            scram = ScramClient(mechanism, security.username, security.password, secrets.token_urlsafe(18))
            first = await step(scram.client_first())
            try:
                answer = await step(scram.client_final(first.auth_bytes))
                scram.verify(answer.auth_bytes)
            except ScramError as e:
                raise AuthenticationFailed(f"{self.host}:{self.port}: SCRAM: {e}") from None
        else:
            raise ValueError(f"SASL mechanism {mechanism!r}: this client speaks PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")
        lifetime = answer.session_lifetime
        lifetime_ms = int(lifetime.total_seconds() * 1000) if hasattr(lifetime, "total_seconds") else int(lifetime)
        self._security = security
        # KIP-368: re-authenticate at 85-95% of the session's life, as Kafka's clients do
        self._reauthenticate_at = (asyncio.get_running_loop().time() + lifetime_ms * random.uniform(0.85, 0.95) / 1000
                                   if lifetime_ms > 0 else None)
        return lifetime_ms

    async def _maybe_reauthenticate(self) -> None:
        """Re-authenticate once the session is near its end; requests wait meanwhile (the broker
        serves nothing else between SaslHandshake and the end of SaslAuthenticate)."""
        async with self._reauthentication:
            due = self._reauthenticate_at
            if due is not None and asyncio.get_running_loop().time() >= due:
                self._reauthenticate_at = None
                await self.authenticate(self._security)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self._pending)} in flight"
        return f"<BrokerConnection {self.host}:{self.port} {state}>"

    @property
    def closed(self) -> bool:
        return self._closed_error is not None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def __aenter__(self) -> BrokerConnection:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # -- requests ----------------------------------------------------------------

    def _correlation_id(self) -> int:
        cid = self._next_correlation
        self._next_correlation = cid + 1 if cid < 0x7FFFFFFF else 1
        return cid

    def send(self, api_key: int, version: int, body) -> asyncio.Future:
        """Write a request now; the returned future resolves to the response entity.

        Low level: it has no timeout. Most callers want `request`.
        """
        return self._send(api_key, version, body)[1]

    def _send(self, api_key: int, version: int, body, decode: Callable | None = None) -> tuple[int, asyncio.Future]:
        if self._closed_error is not None:
            raise ConnectionClosed(str(self._closed_error))
        cid = self._correlation_id()
        frame = encode_request(int(api_key), version, cid, self.client_id, body)
        future = asyncio.get_running_loop().create_future()
        self._pending[cid] = _Pending(int(api_key), version, future, decode)
        self._transport.write(frame)
        return cid, future

    async def request(self, api_key: int, version: int, body, *, timeout_s: float | None = ...,
                      decode: Callable | None = None):
        """Send one request and return the decoded response entity.

        `body` is a kio request entity of this api/version, a plain dict, or the encoded body;
        `decode(version, frame)`, if given, decodes the answer instead of kio.
        RequestTimedOut after `timeout_s` (default: the connection's), and
        ConnectionClosed if the connection dies first.
        """
        timeout = self.timeout_s if timeout_s is ... else timeout_s
        if (self._reauthenticate_at is not None or self._reauthentication.locked()) \
                and api_key not in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            await self._maybe_reauthenticate()
        cid, future = self._send(api_key, version, body, decode)
        # The deadline fails the future itself. Not asyncio.wait_for: on Python 3.11 it returns the
        # result, and the caller's task loses its cancellation, when the answer and the cancel come
        # in the same loop iteration (a replica fetcher cancelled at shutdown went on fetching for
        # ever); nor asyncio.timeout, which costs a replica fetcher more per request.
        timer = None if timeout is None else asyncio.get_running_loop().call_later(
            timeout, self._time_out, future, api_key, version, timeout)
        try:
            if self._frames.paused:
                try:
                    async with asyncio.timeout(timeout):
                        await self._drain()
                except TimeoutError:
                    self._time_out(future, api_key, version, timeout)
            return await future
        finally:
            # timed out or cancelled: forget it, so a late answer is dropped
            self._pending.pop(cid, None)
            if not future.done():
                future.cancel()
            if timer is not None:
                timer.cancel()

    def _time_out(self, future: asyncio.Future, api_key: int, version: int, timeout: float) -> None:
        if not future.done():
            future.set_exception(RequestTimedOut(f"{_api_name(api_key)} v{version} to {self.host}:{self.port} got "
                                                 f"no response within {timeout:g}s"))

    async def send_no_response(self, api_key: int, version: int, body) -> None:
        """Send a request that gets no response (Produce with acks=0)."""
        if self._closed_error is not None:
            raise ConnectionClosed(str(self._closed_error))
        frame = encode_request(int(api_key), version, self._correlation_id(), self.client_id, body)
        self._transport.write(frame)
        await self._drain()

    async def _drain(self) -> None:
        try:
            await self._frames.drain()
        except (OSError, RuntimeError) as e:
            self._fail_all(ConnectionClosed(f"connection to {self.host}:{self.port} lost: {e}"))
            raise self._closed_error from e

    # -- version negotiation -----------------------------------------------------

    async def api_versions(self, version: int = 3) -> dict[int, tuple[int, int]]:
        """Ask the broker which versions it supports; remembered for pick_version."""
        response = await self.request(ApiKey.API_VERSIONS, version, {
            "client_software_name": "weir", "client_software_version": "0.1.0"})
        if response.error_code == ErrorCode.unsupported_version and version > 0:
            broker_max = next((k.max_version for k in response.api_keys if k.api_key == ApiKey.API_VERSIONS), 0)
            return await self.api_versions(min(broker_max, version - 1))
        check_error(response.error_code, "ApiVersions failed")
        self.versions = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
        return self.versions

    def supports(self, api_key: int) -> bool:
        if self.versions is None:
            raise RuntimeError("call api_versions() first")
        return int(api_key) in self.versions

    def pick_version(self, api_key: int, highest_we_support: int | None = None, lowest_we_support: int = 0) -> int:
        """The highest version both sides support; UnsupportedVersion if none."""
        if self.versions is None:
            raise RuntimeError("call api_versions() first")
        ours_high = highest_known_version(api_key) if highest_we_support is None else highest_we_support
        ours_high = min(ours_high, highest_known_version(api_key))
        span = self.versions.get(int(api_key))
        if span is None:
            raise UnsupportedVersion(f"broker {self.host}:{self.port} does not support {_api_name(api_key)}")
        version = min(span[1], ours_high)
        if version < max(span[0], lowest_we_support):
            raise UnsupportedVersion(
                f"{_api_name(api_key)}: broker {self.host}:{self.port} supports v{span[0]}-v{span[1]}, "
                f"this client v{lowest_we_support}-v{ours_high}")
        return version

    async def call(self, api_key: int, body, *, max_version: int | None = None, min_version: int = 0,
                   timeout_s: float | None = ..., decode: Callable | None = None):
        """pick_version (negotiating first if needed) and request in one step."""
        if self.versions is None:
            await self.api_versions()
        version = self.pick_version(api_key, max_version, min_version)
        return await self.request(api_key, version, body, timeout_s=timeout_s, decode=decode)

    # -- reading -------------------------------------------------------------------

    def _dispatch(self, frame: bytes) -> None:
        cid = _CORRELATION.unpack_from(frame, 0)[0]
        pending = self._pending.pop(cid, None)
        if pending is None:
            log.debug("dropping a response to correlation id %d (timed out or unknown)", cid)
            return
        if pending.future.done():
            return
        try:
            entity = (pending.decode(pending.version, frame) if pending.decode is not None
                      else decode_response(pending.api_key, pending.version, frame))
        except Exception as e:  # a bad body fails its request, not the connection
            pending.future.set_exception(ClientError(
                f"cannot decode {_api_name(pending.api_key)} v{pending.version} response: {e!r}"))
            return
        pending.future.set_result(entity)

    def _fail_all(self, error: ConnectionClosed) -> None:
        if self._closed_error is None:
            self._closed_error = error
            self._transport.close()
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(ConnectionClosed(str(self._closed_error)))
                p.future.exception()  # mark retrieved: the waiter may have gone

    async def close(self) -> None:
        """Close; requests still in flight fail with ConnectionClosed."""
        if self._closed_error is None:
            self._fail_all(ConnectionClosed(f"connection to {self.host}:{self.port} closed"))
        await asyncio.wait([self._frames.lost])  # a cancellation of the caller's own still reaches it


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        name = api_key_map.get(int(api_key))
        return "".join(w.capitalize() for w in name.split("_")) if name else f"api {api_key}"


# -- the cluster -------------------------------------------------------------------

# Errors that mean our picture of the cluster is stale: refresh and retry.
REFRESH_ERRORS = frozenset({
    ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available, ErrorCode.not_controller,
    ErrorCode.unknown_topic_or_partition, ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
    ErrorCode.not_coordinator, ErrorCode.broker_not_available, ErrorCode.replica_not_available,
    ErrorCode.unknown_topic_id, ErrorCode.offset_not_available,
})


def parse_bootstrap(bootstrap: str | Iterable[str]) -> list[tuple[str, int]]:
    """"host:port[,host:port]" (or a list of them) -> [(host, port)]; [v6]:port works too."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"bad bootstrap server {item!r}: expected host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1: no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error_code: ErrorCode = ErrorCode.none


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    error_code: ErrorCode = ErrorCode.none


class ClusterClient:
    """Brokers, controller and leaders from Metadata; one connection per broker.

        async with ClusterClient("127.0.0.1:9092") as client:
            await client.refresh_metadata()
            conn = await client.controller()
            leader = client.leader_for("t", 0)
    """

    METADATA_MAX_VERSION = 12  # v13 only adds a top-level error code

    def __init__(self, bootstrap: str | Iterable[str], *, client_id: str | None = "weir",
                 timeout_s: float | None = DEFAULT_TIMEOUT_S, retries: int = 5, retry_backoff_s: float = 0.1,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.bootstrap_servers = parse_bootstrap(bootstrap)
        self.security = security
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.retries = retries
        self.retry_backoff_s = retry_backoff_s
        self.brokers: dict[int, Node] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self._connections: dict[int, BrokerConnection] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        self._lock = asyncio.Lock()  # serialises connection opening

    async def __aenter__(self) -> ClusterClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        conns = list(self._connections.values())
        if self._bootstrap_conn is not None:
            conns.append(self._bootstrap_conn)
        self._connections.clear()
        self._bootstrap_conn = None
        for conn in conns:
            await conn.close()

    # -- connections -----------------------------------------------------------

    async def _open(self, host: str, port: int) -> BrokerConnection:
        conn = await BrokerConnection.open(host, port, self.client_id, self.timeout_s, security=self.security)
        try:
            await conn.api_versions()
        except BaseException:
            await conn.close()
            raise
        return conn

    async def any_connection(self) -> BrokerConnection:
        """A live connection to some broker: a known one, else a bootstrap server."""
        async with self._lock:
            for conn in self._connections.values():
                if not conn.closed:
                    return conn
            if self._bootstrap_conn is not None and not self._bootstrap_conn.closed:
                return self._bootstrap_conn
            errors = []
            candidates = [(b.host, b.port) for b in self.brokers.values()] + self.bootstrap_servers
            for host, port in candidates:
                try:
                    self._bootstrap_conn = await self._open(host, port)
                    return self._bootstrap_conn
                except (ConnectionClosed, RequestTimedOut) as e:
                    errors.append(str(e))
            raise BrokerUnreachable("no broker reachable: " + "; ".join(errors))

    async def connection(self, broker_id: int) -> BrokerConnection:
        """The connection to broker `broker_id` (opened on first use)."""
        async with self._lock:
            conn = self._connections.get(broker_id)
            if conn is not None and not conn.closed:
                return conn
            info = self.brokers.get(broker_id)
            if info is None:
                raise KafkaError(ErrorCode.broker_not_available, f"broker {broker_id} is not in the metadata")
            conn = await self._open(info.host, info.port)
            self._connections[broker_id] = conn
            return conn

    # -- metadata ----------------------------------------------------------------

    async def refresh_metadata(self, topics: Iterable[str] | None = None, *,
                               allow_auto_topic_creation: bool = False):
        """Metadata for `topics` (None: all); updates brokers, controller, leaders. Returns the response."""
        names = None if topics is None else list(topics)
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            conn = await self.any_connection()
            try:
                version = conn.pick_version(ApiKey.METADATA, self.METADATA_MAX_VERSION)
                if names is None:
                    topic_list = [] if version == 0 else None
                else:
                    topic_list = [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names]
                response = await conn.request(ApiKey.METADATA, version, {
                    "topics": topic_list, "allow_auto_topic_creation": allow_auto_topic_creation,
                    "include_cluster_authorized_operations": False,
                    "include_topic_authorized_operations": False})
            except ConnectionClosed as e:
                last = e
                await self._backoff(attempt)
                continue
            self._apply_metadata(response, full=names is None)
            return response
        raise last  # type: ignore[misc]

    def _apply_metadata(self, response, full: bool) -> None:
        self.brokers = {int(b.node_id): Node(int(b.node_id), b.host, int(b.port), getattr(b, "rack", None))
                        for b in response.brokers}
        self.cluster_id = getattr(response, "cluster_id", None)
        self.controller_id = int(getattr(response, "controller_id", -1))
        if full:
            self.topics = {}
        for t in response.topics:
            if t.name is None:
                continue
            if t.error_code != ErrorCode.none:
                self.topics.pop(t.name, None)
                continue
            partitions = {}
            for p in t.partitions:
                partitions[int(p.partition_index)] = PartitionInfo(
                    topic=t.name, partition=int(p.partition_index), leader=int(p.leader_id),
                    leader_epoch=int(getattr(p, "leader_epoch", -1)),
                    replicas=tuple(int(r) for r in p.replica_nodes), isr=tuple(int(r) for r in p.isr_nodes),
                    offline_replicas=tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                    error_code=ErrorCode(p.error_code))
            topic_id = getattr(t, "topic_id", None)
            self.topics[t.name] = TopicInfo(t.name, topic_id if topic_id != uuid.UUID(int=0) else None,
                                            bool(getattr(t, "is_internal", False)), partitions)
        # forget connections to brokers that left the cluster
        for broker_id in [b for b in self._connections if b not in self.brokers]:
            conn = self._connections.pop(broker_id)
            asyncio.get_running_loop().create_task(conn.close())

    def leader_for(self, topic: str, partition: int) -> int | None:
        """The leader's broker id from the cached metadata (None: unknown or no leader)."""
        info = self.topics.get(topic)
        p = info.partitions.get(partition) if info else None
        if p is None or p.leader < 0:
            return None
        return p.leader

    async def leader_connection(self, topic: str, partition: int) -> BrokerConnection:
        """The connection to a partition's leader, refreshing metadata when it is unknown."""
        for attempt in range(self.retries + 1):
            leader = self.leader_for(topic, partition)
            if leader is not None and leader in self.brokers:
                return await self.connection(leader)
            if attempt:
                await self._backoff(attempt)
            await self.refresh_metadata([topic])
        info = self.topics.get(topic)
        if info is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {topic!r} not found")
        if partition not in info.partitions:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic}-{partition} not found")
        raise KafkaError(ErrorCode.leader_not_available, f"{topic}-{partition} has no leader")

    async def controller(self) -> BrokerConnection:
        """The connection to the active controller."""
        for attempt in range(self.retries + 1):
            if self.controller_id >= 0 and self.controller_id in self.brokers:
                return await self.connection(self.controller_id)
            if attempt:
                await self._backoff(attempt)
            await self.refresh_metadata([])
        raise KafkaError(ErrorCode.not_controller, "no controller is known")

    # -- requests with retry ------------------------------------------------------

    async def call_controller(self, api_key: int, body, *, max_version: int | None = None,
                              errors: Callable[[object], Iterable] | None = None):
        """Send to the controller; refresh and retry on NOT_CONTROLLER or a lost connection.

        `errors(response)` yields the response's error codes (default: its
        top-level `error_code`, if any); a retry happens when one of them is
        NOT_CONTROLLER. Other errors are left in the response for the caller.
        """
        return await self._call(lambda: self.controller(), api_key, body, max_version, errors,
                                {ErrorCode.not_controller})

    async def call_leader(self, topic: str, partition: int, api_key: int, body, *,
                          max_version: int | None = None, errors: Callable[[object], Iterable] | None = None):
        """Send to a partition's leader; refresh and retry on REFRESH_ERRORS or a lost connection."""
        return await self._call(lambda: self.leader_connection(topic, partition), api_key, body, max_version,
                                errors, REFRESH_ERRORS, topic)

    async def call_any(self, api_key: int, body, *, max_version: int | None = None):
        """Send to any broker (Metadata-like requests); retry once on a lost connection."""
        return await self._call(self.any_connection, api_key, body, max_version, lambda r: (), frozenset())

    async def _call(self, target, api_key, body, max_version, errors, retry_on, topic: str | None = None):
        errors = errors or _top_level_error
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                await self._backoff(attempt)
            try:
                conn = await target()
                response = await conn.call(api_key, body, max_version=max_version)
            except ConnectionClosed as e:
                last = e
                self._forget_closed()
                await self._refresh_quietly(topic)
                continue
            codes = {ErrorCode(c) for c in errors(response)}
            stale = codes & retry_on
            if not stale:
                return response
            last = KafkaError(next(iter(stale)), f"{_api_name(api_key)}: {next(iter(stale)).name} "
                                                  f"after {attempt + 1} attempts")
            await self._refresh_quietly(topic)
            if attempt == self.retries:
                return response  # the caller sees the error in the response
        raise last  # type: ignore[misc]

    async def _refresh_quietly(self, topic: str | None) -> None:
        try:
            await self.refresh_metadata(None if topic is None else [topic])
        except (ClientError, KafkaError) as e:
            log.debug("metadata refresh failed: %s", e)

    def _forget_closed(self) -> None:
        for broker_id in [b for b, c in self._connections.items() if c.closed]:
            del self._connections[broker_id]

    async def _backoff(self, attempt: int) -> None:
        await asyncio.sleep(self.retry_backoff_s * min(2 ** attempt, 32) * (0.8 + 0.4 * random.random()))


def _top_level_error(response) -> Iterable:
    code = getattr(response, "error_code", None)
    return () if code is None else (code,)
