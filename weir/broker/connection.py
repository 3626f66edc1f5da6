"""One client connection: framing, in-order dispatch, and response writing.

Requests on a connection are handled in order and answered in order, as Kafka
does. A request that waits (a long-polling fetch, a large sendfile, an admin
change) holds back the frames behind it, and reading pauses once they are many.
One exception: an acks=all Produce is appended at once and only its answer
waits for the ISR (`InOrder`), so pipelined produce requests replicate
together instead of one round trip each; answers still leave in request order.
Bad input closes only this connection; the broker goes on serving the others.

On a TLS listener the asyncio transport does the TLS; zero-copy sendfile cannot go through it, so
file regions are copied there. On a SASL listener the connection feeds SaslHandshake and
SaslAuthenticate to its `Authenticator` (weir.security.authenticator), which decides; the
connection serves nothing else until it says the client is authenticated, and closes a client
that has not authenticated within `connections.max.idle.ms`.

As Kafka's socket server, a connection with no request read and no answer written for
`connections.max.idle.ms` is closed (a client that vanished without closing would otherwise hold
it for ever); one with a request in progress is not idle. Clients reconnect when they next need to.
"""

import asyncio
import inspect
import logging
import os
import secrets
import socket
import struct
import time
from collections import deque
from collections.abc import Coroutine

from weir.broker.apis import CloseConnection, InOrder, fetching_replica
from weir.broker.throttles import Throttled
from weir.clock import now_ms
from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.protocol.header import MalformedHeader, RequestHeader, read_request_header, response_header
from weir.protocol.hot_responses import FileRegion, with_throttle_time
from weir.protocol.versions import ApiKey, is_supported
from weir.security.authenticator import HANDSHAKEN, Answer, Authenticator
from weir.security.tls import ANONYMOUS, NoRuleApplies, principal_of
from weir.transport.frame_receiver import FrameReceiver

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
SENDFILE_MIN_BYTES = 256 * 1024  # below this, copying beats sendfile's per-call cost
MAX_QUEUED_FRAMES = 64



class Connection(FrameReceiver):
    def __init__(self, apis, max_request_bytes: int, listener: str = "", security=None,
                 idle_ms: int = 600_000) -> None:
        """`apis`: `.handlers` by api key, `.api_versions_body(error)` for UNSUPPORTED_VERSION,
        `.metrics` (weir.broker.metrics.BrokerMetrics) for request times, and
        `.scram_credential(mechanism, user)` (awaitable) for SASL/SCRAM. `listener`: the name of
        the listener this connection came on (requests carry it, for Metadata's endpoints);
        `security`: that listener's weir.security.broker_security.ListenerSecurity, if not PLAINTEXT;
        `idle_ms`: connections.max.idle.ms (negative: never closed for idleness)."""
        super().__init__()
        self.apis = apis
        self.listener = listener
        self.security = security
        self.tls = security is not None and security.ssl_context is not None
        self.principal = ANONYMOUS  # who is on the other end, once TLS or SASL says (Kafka's KafkaPrincipal)
        self.auth: Authenticator | None = None
        self._auth_timer: asyncio.TimerHandle | None = None
        self.max_request_bytes = max_request_bytes
        self.transport: asyncio.Transport | None = None
        self.peer = None
        self._client_host = ""
        self._frames: deque[tuple[float, bytes | memoryview]] = deque()  # (when it arrived, the frame)
        # id(header) → api, arrived, started, local time, exempt from request_percentage (a follower's fetch)
        self._timings: dict[int, tuple[int, float, float, float, bool]] = {}
        self._busy = False
        self._in_order: deque[list] = deque()  # [header, task or None, body]: answers not yet written
        self._in_order_drained = asyncio.Event()
        self._in_order_drained.set()
        self._reading_paused = False
        self._closed = False
        self._close_reason: str | None = None  # set by a bad frame size: close when the queue drains
        self._close_delay_s: float | None = None  # after a failed authentication, how long the close waits
        self._idle_s = idle_ms / 1000 if idle_ms >= 0 else None
        self._last_active = time.monotonic()  # a request read or an answer written
        self._idle_timer: asyncio.TimerHandle | None = None
        self._muted_until = 0.0  # KIP-219: a throttled client's next request is read after this (loop time)
        self._unmute_timer: asyncio.TimerHandle | None = None

    # -- asyncio callbacks ---------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        if self._idle_s is not None:
            self._idle_timer = asyncio.get_running_loop().call_later(self._idle_s, self._close_if_idle)
        self.peer = transport.get_extra_info("peername")
        self._client_host = f"/{self.peer[0]}" if self.peer else ""
        throttles = self.apis.throttles
        if throttles is not None and self.peer and throttles.connections.enabled:
            hold_ms = throttles.connection_created(self.peer[0])
            if hold_ms:  # KIP-612: not served; closed once the throttle time is over
                transport.pause_reading()
                self._close_reason = f"connection_creation_rate of {self.peer[0]} exceeded"
                asyncio.get_running_loop().call_later(hold_ms / 1000, self.close, self._close_reason, logging.INFO)
                return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        security = self.security
        if security is None:
            return
        if security.listener.protocol == "SSL":
            try:
                self.principal = principal_of(transport.get_extra_info("ssl_object"), security.principal_rules)
            except NoRuleApplies as e:
                self.close(str(e))
                return
        if security.listener.uses_sasl:
            self.auth = Authenticator(security.mechanisms, security.plain_users, security.reauth_ms,
                                      lambda: secrets.token_urlsafe(18))
            self._auth_timer = asyncio.get_running_loop().call_later(
                security.idle_ms / 1000, self._authentication_timed_out)

    def _authentication_timed_out(self) -> None:
        if self.auth is not None and not self.auth.authenticated:
            self.close(f"did not authenticate within connections.max.idle.ms ({self.security.idle_ms} ms)")

    def connection_lost(self, exc) -> None:
        if not self._closed and self.incomplete_bytes:
            # The client went away mid-frame: tell the operator, as for other bad input.
            log.warning("connection from %s ended mid-frame: %d bytes of an incomplete request discarded",
                        self.peer, self.incomplete_bytes)
        self._closed = True
        if self._auth_timer is not None:
            self._auth_timer.cancel()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self._unmute_timer is not None:
            self._unmute_timer.cancel()

    def _close_if_idle(self) -> None:
        idle_for = time.monotonic() - self._last_active
        if idle_for < self._idle_s:  # active since: look again when it could first be idle
            wait = self._idle_s - idle_for
        elif self._busy or self._in_order or self._frames:  # a request in progress is not idle
            wait = self._idle_s
        else:
            self.close(f"idle for more than connections.max.idle.ms ({self._idle_s * 1000:g} ms)", logging.INFO)
            return
        self._idle_timer = asyncio.get_running_loop().call_later(wait, self._close_if_idle)

    # -- frames (weir.transport.frame_receiver) ----------------------------------------------

    def _limit(self) -> tuple[int, str]:
        if self.auth is not None and not self.auth.authenticated and self.auth.completed == 0:
            # Kafka's bound on what an unauthenticated client may make the broker buffer
            return self.security.max_receive_before_authentication, "sasl.server.max.receive.size"
        return self.max_request_bytes, "socket.request.max.bytes"

    def frame_limit(self) -> int:
        return self._limit()[0]

    def frame_received(self, frame: bytes | memoryview) -> None:
        self._last_active = time.monotonic()
        self._frames.append((time.perf_counter(), frame))

    def frames_cut(self) -> None:
        self._process()

    def frame_refused(self, size: int, limit: int) -> None:
        """Read no further; close once the complete requests ahead of it are answered."""
        self._close_reason = (f"frame of {size} bytes exceeds {self._limit()[1]} {limit}" if size > limit
                              else f"negative frame size {size}")
        self.transport.pause_reading()

    # -- processing ----------------------------------------------------------

    def _process(self) -> None:
        while self._frames and not self._busy and not self._closed and self._unmute_timer is None:
            pending = self._handle(*self._frames.popleft())
            if isinstance(pending, tuple):  # (header, a future of its answer): no task for it
                self._busy = True
                pending[1].add_done_callback(lambda done, header=pending[0]: self._answer_when_done(header, done))
            elif pending is not None:
                self._busy = True
                asyncio.get_running_loop().create_task(self._finish(pending))
        if self._close_reason is not None:
            if not self._frames and not self._busy and not self._in_order:
                if self._close_delay_s is None:
                    self.close(self._close_reason)
                elif self._close_delay_s > 0:  # after a failed authentication: the answer first, then the close
                    asyncio.get_running_loop().call_later(self._close_delay_s, self.close, self._close_reason)
                    self._close_delay_s = 0
            return
        self._throttle_reading()

    def _answer_when_done(self, header: RequestHeader, done: asyncio.Future) -> None:
        if done.cancelled():  # the broker is stopping
            return
        try:
            sending = self._respond(header, done.result())
        except Exception:
            self._failed()
            sending = None
        if sending is not None:  # a sendfile answer the socket did not take at once
            asyncio.get_running_loop().create_task(self._finish(sending))
            return
        self._busy = False
        self._process()

    def _failed(self) -> None:
        """In an except block: a request's handling raised; log it and drop the connection."""
        log.exception("request from %s failed", self.peer)
        self.close("internal error")

    async def _finish(self, pending: Coroutine) -> None:
        try:
            await pending
        except Exception:
            self._failed()
        finally:
            self._busy = False
        self._process()

    def _throttle_reading(self) -> None:
        if self._closed or self.transport is None:
            return
        queued = len(self._frames)
        if queued >= MAX_QUEUED_FRAMES and not self._reading_paused:
            self.transport.pause_reading()
            self._reading_paused = True
        elif queued < MAX_QUEUED_FRAMES // 2 and self._reading_paused and self._unmute_timer is None:
            self.transport.resume_reading()
            self._reading_paused = False

    def _handle(self, arrived: float, frame: bytes | memoryview
                ) -> Coroutine | tuple[RequestHeader, asyncio.Future] | None:
        """Answer one request now, or return a coroutine that will, or (its header, a future of
        its answer) for a long poll, which costs no task."""
        started = time.perf_counter()
        auth = self.auth
        if auth is not None and auth.raw_tokens and auth.state == HANDSHAKEN:
            return self._raw_sasl_token(frame)  # after a v0 SaslHandshake: a token without a header
        try:
            header = read_request_header(frame, self._client_host, self.listener, self.principal)
        except MalformedHeader as e:
            self.close(f"malformed request header: {e}")
            return None
        api_key, version = header.api_key, header.api_version
        if auth is not None:
            refused = auth.refuses(api_key, now_ms())
            if refused is not None:
                self.close(f"{refused} (client {header.client_id!r})")
                return None
        if not is_supported(api_key, version):
            if api_key == ApiKey.API_VERSIONS:
                # KIP-511: answer with a v0 body listing what we support.
                body = codec.encode_response(api_key, 0, header.correlation_id,
                                             self.apis.api_versions_body(ErrorCode.unsupported_version))
                self._write_frame([body])
            else:
                self.close(f"unsupported api {api_key} version {version} from client {header.client_id!r}")
            return None
        try:
            request = codec.decode_request(header, frame)
        except codec.MalformedRequest as e:
            self.close(f"{e} (request starts {bytes(frame[:48]).hex()})")
            return None
        try:
            if api_key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
                body = self._sasl(header, request)
            else:
                body = self.apis.handlers[api_key](header, request)
            throttles = self.apis.throttles  # a follower's fetch is not held to request_percentage
            exempt = (throttles is not None and throttles.request.enabled and api_key == ApiKey.FETCH
                      and fetching_replica(header, request)[0] >= 0)
            self._timings[id(header)] = (api_key, arrived, started, time.perf_counter() - started, exempt)
        except CloseConnection as e:
            self.close(str(e))
            return None
        except Exception:
            log.exception("api %d v%d from %s failed", api_key, version, self.peer)
            self.close("internal error")
            return None
        if isinstance(body, InOrder):
            self._queue_answer(header, asyncio.ensure_future(body.awaitable))
            return None
        if isinstance(body, asyncio.Future) and not self._in_order:
            return header, body  # a long poll with nothing owed before it: _process answers it when done
        if inspect.isawaitable(body) or (self._in_order and isinstance(body, list)):
            # a long poll; or buffers (a Fetch answer, perhaps for sendfile, which the in-order
            # writer cannot do) owed after answers still waiting
            return self._respond_later(header, body)
        if self._in_order:
            self._queue_answer(header, None, body)
            return None
        return self._respond(header, body)  # a coroutine only when sendfile must be awaited

    # -- SASL ----------------------------------------------------------------------

    def _sasl(self, header: RequestHeader, request):
        """SaslHandshake or SaslAuthenticate: the authenticator's answer (a dict, or a coroutine
        when a SCRAM credential must be looked up or a failure is answered late)."""
        auth = self.auth
        if auth is None:  # not a SASL listener, as Kafka's KafkaApis answers
            if header.api_key == ApiKey.SASL_HANDSHAKE:
                return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []}
            return {"error_code": ErrorCode.illegal_sasl_state, "auth_bytes": b"",
                    "error_message": f"SaslAuthenticate on listener {self.listener}, which does not use SASL"}
        now = now_ms()
        if header.api_key == ApiKey.SASL_HANDSHAKE:
            answer = auth.handshake(header.api_version, request.mechanism, now)
        else:
            answer = auth.authenticate(header.api_version, bytes(request.auth_bytes), now)
        self._count_outcome()
        if answer.lookup is None and answer.close is None:
            self._authentication_step_done()
            return answer.body
        return self._sasl_later(answer)

    async def _looked_up(self, answer: Answer) -> Answer:
        """The authenticator's next answer once the SCRAM credential it asked for is read."""
        if answer.lookup is None:
            return answer
        mechanism, user = answer.lookup
        try:
            credential = await self.apis.scram_credential(mechanism, user)
        except Exception as e:  # ZooKeeper unreachable: this attempt fails; the client may try again
            log.warning("cannot read the SCRAM credential of %r: %r", user, e)
            credential = None
        answer = self.auth.credential(credential, now_ms())
        self._count_outcome()
        return answer

    def _count_outcome(self) -> None:
        outcome, self.auth.outcome = self.auth.outcome, None
        if outcome is not None:
            self.apis.metrics.authentications.labels(self.listener, outcome).inc()

    async def _sasl_later(self, answer: Answer):
        answer = await self._looked_up(answer)
        if answer.close is not None:
            self._failed_authentication(answer.close)
        self._authentication_step_done()
        return answer.body

    def _failed_authentication(self, reason: str) -> None:
        """Answer, then close after connection.failed.authentication.delay.ms (as Kafka, it slows a
        client that tries password after password; the answer leaves at once, so that a client
        reads it before the connection ends); read nothing more from this client."""
        self._close_reason = reason
        self._close_delay_s = max(self.security.failed_authentication_delay_ms / 1000, 0.001)
        self._frames.clear()
        if self.transport is not None and not self._closed:
            self.transport.pause_reading()

    def _authentication_step_done(self) -> None:
        if self.auth.authenticated and self.principal != self.auth.principal:
            self.principal = self.auth.principal
            log.debug("%s authenticated as %s with %s on listener %s", self.peer, self.principal,
                     self.auth.mechanism, self.listener)
        if self.auth.authenticated and self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None

    def _raw_sasl_token(self, frame: bytes) -> Coroutine | None:
        """A SASL token after a v0 SaslHandshake (Kafka before 1.0): answered with a raw frame."""
        answer = self.auth.authenticate(-1, bytes(frame), now_ms())
        self._count_outcome()

        async def finish(answer: Answer) -> None:
            answer = await self._looked_up(answer)
            if answer.close is not None:
                self._failed_authentication(answer.close)
                return
            self._authentication_step_done()
            self._write_frame([answer.raw or b""])

        if answer.lookup is not None:
            return finish(answer)
        if answer.close is not None:
            self._failed_authentication(answer.close)
            return None
        self._authentication_step_done()
        self._write_frame([answer.raw or b""])
        return None

    def _queue_answer(self, header: RequestHeader, task: asyncio.Future | None, body=None) -> None:
        """Answer after the answers queued before it (a task's result, or `body` when ready)."""
        self._in_order.append([header, task, body])
        self._in_order_drained.clear()
        if task is not None:
            task.add_done_callback(lambda _: self._write_in_order())

    def _write_in_order(self) -> None:
        while self._in_order and (self._in_order[0][1] is None or self._in_order[0][1].done()):
            header, task, body = self._in_order.popleft()
            if task is not None:
                try:
                    body = task.result()
                except Exception:
                    self._failed()
                    return
            sending = self._respond(header, body)
            assert sending is None, "in-order answers are never sendfile responses"
        if not self._in_order:
            self._in_order_drained.set()
            if self._close_reason is not None:
                self._process()

    def _respond(self, header: RequestHeader, body) -> Coroutine | None:
        """Write a handler's answer: a dict for kio, bytes, a list of buffers, or None (no answer),
        perhaps Throttled; then, if the client is over a quota, read nothing more from it for the
        throttle time (KIP-219)."""
        api_key, arrived, started, local_s, exempt = self._timings.pop(id(header))
        self.apis.metrics.observe_request(api_key, started - arrived, local_s, time.perf_counter() - arrived)
        throttle_ms = 0
        if isinstance(body, Throttled):
            body, throttle_ms = body.body, body.throttle_ms
        throttles = self.apis.throttles
        if throttles is not None and not exempt and throttles.request.enabled:
            request_ms = throttles.handled(header, local_s)
            if request_ms > throttle_ms:
                throttle_ms = request_ms
                if isinstance(body, dict):
                    body = {**body, "throttle_time": throttle_ms}
                elif body is not None and api_key in (ApiKey.PRODUCE, ApiKey.FETCH):
                    body = with_throttle_time(api_key, header.api_version, body, throttle_ms)
        if throttle_ms:
            self._mute(throttle_ms)
        if body is None:
            return
        if isinstance(body, dict):
            self._write_frame([codec.encode_response(header.api_key, header.api_version, header.correlation_id,
                                                     body)])
        elif isinstance(body, list):
            items = [self._header(header), *body]
            regions = sum(i.size for i in items if isinstance(i, FileRegion))
            if regions >= SENDFILE_MIN_BYTES and not self.tls and hasattr(self.transport, "_sock"):
                return self._sendfile_frame(items)
            self._write_frame(items)
        else:
            self._write_frame([self._header(header), body])

    async def _respond_later(self, header: RequestHeader, pending) -> None:
        """Answer with `pending` (an awaitable's result, or a body) once the answers owed
        before it are written."""
        await self._in_order_drained.wait()
        sending = self._respond(header, await pending if inspect.isawaitable(pending) else pending)
        if sending is not None:
            await sending

    @staticmethod
    def _header(header: RequestHeader) -> bytes:
        return response_header(header.correlation_id, codec.is_flexible(header.api_key, header.api_version)
                               and header.api_key != ApiKey.API_VERSIONS)

    # -- writing ---------------------------------------------------------------

    def _write_frame(self, items: list) -> None:
        """Write one response, copying any file regions (small ones)."""
        if self._closed:
            return
        self._last_active = time.monotonic()
        buffers = [os.pread(i.fd, i.size, i.position) if isinstance(i, FileRegion) else i for i in items]
        size = sum(len(b) for b in buffers)
        # one write: each extra send() wakes the client once more
        self.transport.write(b"".join([_SIZE.pack(size), *buffers]))

    def _sendfile_frame(self, items: list) -> Coroutine | None:
        """Write one response, sending file regions with zero-copy sendfile: straight to the
        socket while it takes them, a coroutine for whatever it does not take now."""
        size = sum(i.size if isinstance(i, FileRegion) else len(i) for i in items)
        self._last_active = time.monotonic()
        self.transport.write(_SIZE.pack(size))
        for n, item in enumerate(items):
            if not isinstance(item, FileRegion):
                self.transport.write(item)
                continue
            sent = self._sendfile_now(item)
            if sent < item.size:
                rest = FileRegion(item.fd, item.position + sent, item.size - sent)
                return self._sendfile_later([rest, *items[n + 1:]])
        return None

    def _sendfile_now(self, region: FileRegion) -> int:
        """Bytes of `region` the socket took at once; none while the transport still holds
        bytes, which must go first (as loop.sendfile, which waits for them)."""
        if self._closed or self.transport.get_write_buffer_size():
            return 0
        sent = 0
        try:
            while sent < region.size:
                n = os.sendfile(self.transport.get_extra_info("socket").fileno(), region.fd,
                                region.position + sent, region.size - sent)
                if n == 0:  # the file ended early: _sendfile_later finds so too, and closes
                    break
                sent += n
        except OSError:  # it would block, or failed: loop.sendfile waits, or raises the failure
            pass
        return sent

    async def _sendfile_later(self, items: list) -> None:
        loop = asyncio.get_running_loop()
        for item in items:
            if self._closed:
                return
            if isinstance(item, FileRegion):
                # item.fd is the log's SegmentFile: holding it keeps the file open
                # even if retention deletes the segment meanwhile.
                sent = await loop.sendfile(self.transport, item.fd, item.position, item.size)
                if sent < item.size:  # cut while being sent (a follower's truncation): the frame cannot be whole
                    self.close(f"a log segment ended {item.size - sent} bytes short of a fetch answer being sent")
                    return
            else:
                self.transport.write(item)

    def _mute(self, throttle_ms: int) -> None:
        """Read no request of this client's for `throttle_ms` (a later throttle may make it longer)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000
        if until <= self._muted_until or self._closed:
            return
        self._muted_until = until
        if self._unmute_timer is not None:
            self._unmute_timer.cancel()
        self._unmute_timer = loop.call_at(until, self._unmute)
        self.transport.pause_reading()

    def _unmute(self) -> None:
        self._unmute_timer = None
        if self._closed:
            return
        if not self._reading_paused and self._close_reason is None:
            self.transport.resume_reading()
        self._process()

    def close(self, reason: str, level: int = logging.WARNING) -> None:
        if not self._closed:
            log.log(level, "closing connection from %s: %s", self.peer, reason)
            self._closed = True
            self._frames.clear()
            if self.transport is not None:
                self.transport.close()
