"""One connection's SASL authentication, as Kafka's SaslServerAuthenticator: a pure state machine.

Rules it owns:
- On a SASL listener, before authentication only ApiVersions, SaslHandshake and SaslAuthenticate
  are served; any other request closes the connection (Kafka: "Unexpected Kafka request of type
  ... during SASL handshake").
- SaslHandshake picks an enabled mechanism; an unknown one is answered UNSUPPORTED_SASL_MECHANISM
  with the enabled list, and the connection closed.
- SaslAuthenticate carries the mechanism's tokens. PLAIN: one token, checked against the
  listener's users. SCRAM: client-first (the shell then looks the user's credential up, and calls
  `credential`), then client-final. A wrong password or unknown user is answered
  SASL_AUTHENTICATION_FAILED (58) and the connection closed after the answer.
- SaslHandshake v0 (Kafka before 1.0): the tokens that follow travel as raw size-prefixed frames,
  without a request header; a failure just closes the connection.
- KIP-368: with `connections.max.reauth.ms` > 0 a session lasts that long (SaslAuthenticate v1+
  says so in session_lifetime_ms); the client re-authenticates with SaslHandshake and
  SaslAuthenticate on the same connection, as the same principal and mechanism. A request other
  than SaslHandshake after the session expired closes the connection.

Theory of operation: states NEW → HANDSHAKEN (mechanism chosen) → AUTHENTICATED, and from
AUTHENTICATED through HANDSHAKEN again for a re-authentication; FAILED is final. The connection
feeds requests in with `now` (ms) and sends the answers it gets back; it never decides.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass

from weir.protocol.errors import ErrorCode
from weir.protocol.scram import MECHANISMS as SCRAM_MECHANISMS
from weir.protocol.scram import ScramCredential, ScramError, ScramServer
from weir.protocol.versions import ApiKey

SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
ALLOWED_BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
NEW, HANDSHAKEN, AUTHENTICATED, FAILED = "new", "handshaken", "authenticated", "failed"


@dataclass
class Answer:
    """What the connection does next: send `body` (a response dict; `raw` bytes after a v0
    handshake), then close if `close`; or, with `lookup`, fetch that user's SCRAM credential and
    call `Authenticator.credential` with it."""
    body: dict | None = None
    raw: bytes | None = None
    close: str | None = None  # the reason, when the connection ends after this answer
    lookup: tuple[str, str] | None = None  # (mechanism, user)


class Authenticator:
    def __init__(self, mechanisms: tuple[str, ...], plain_users: dict[str, str], reauth_ms: int,
                 nonce: Callable[[], str]) -> None:
        assert all(m in SUPPORTED_MECHANISMS for m in mechanisms), mechanisms
        self.mechanisms = mechanisms
        self.plain_users = plain_users
        self.reauth_ms = reauth_ms
        self._nonce = nonce
        self.state = NEW
        self.principal: str | None = None   # "User:<name>" once authenticated
        self.mechanism: str | None = None
        self.session_expires_ms: int | None = None  # None: never
        self.raw_tokens = False                      # a v0 handshake: tokens come as raw frames
        self.completed = 0                           # authentications that succeeded (the first, then re-)
        # what the last step finished, in Kafka's metric names (successful-authentication, failed-
        # reauthentication, ...); the connection counts it and clears it
        self.outcome: str | None = None
        self._version = 0                            # of the SaslAuthenticate being answered
        self._scram: ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.state == AUTHENTICATED

    def refuses(self, api_key: int, now_ms: int) -> str | None:
        """Why a request must close the connection before it is served, or None."""
        if self.state == AUTHENTICATED:
            if self.session_expires_ms is not None and now_ms >= self.session_expires_ms \
                    and api_key != ApiKey.SASL_HANDSHAKE:
                return "the SASL session expired (connections.max.reauth.ms) and the client did not re-authenticate"
            return None
        if api_key not in ALLOWED_BEFORE_AUTHENTICATION:
            return f"unexpected request (api {api_key}) during SASL authentication"
        return None

    # -- SaslHandshake --------------------------------------------------------------------------

    def handshake(self, version: int, mechanism: str, now_ms: int) -> Answer:
        if self.state not in (NEW, AUTHENTICATED):
            return self._fail_handshake(ErrorCode.illegal_sasl_state, "SaslHandshake out of turn")
        if mechanism not in self.mechanisms:
            return self._fail_handshake(ErrorCode.unsupported_sasl_mechanism,
                                        f"unsupported SASL mechanism {mechanism!r}")
        if self.state == AUTHENTICATED:  # KIP-368 re-authentication
            if version == 0:
                return self._fail_handshake(ErrorCode.illegal_sasl_state, "re-authentication needs SaslHandshake v1")
            if mechanism != self.mechanism:
                return self._fail_handshake(ErrorCode.illegal_sasl_state,
                                            f"re-authentication must keep the mechanism {self.mechanism}")
        self.mechanism = mechanism
        self.state = HANDSHAKEN
        self.raw_tokens = version == 0
        self._scram = ScramServer(mechanism, self._nonce()) if mechanism in SCRAM_MECHANISMS else None
        return Answer({"error_code": ErrorCode.none, "mechanisms": list(self.mechanisms)})

    def _fail_handshake(self, code: ErrorCode, reason: str) -> Answer:
        self.state = FAILED
        self.outcome = "failed-reauthentication" if self.completed else "failed-authentication"
        return Answer({"error_code": code, "mechanisms": list(self.mechanisms)}, close=reason)

    # -- SaslAuthenticate ------------------------------------------------------------------------

    def authenticate(self, version: int, auth_bytes: bytes, now_ms: int) -> Answer:
        """A SaslAuthenticate request (or, after a v0 handshake, a raw token with version -1)."""
        self._version = version
        if self.state != HANDSHAKEN:
            self.state = FAILED
            return self._answer(ErrorCode.illegal_sasl_state, "SaslAuthenticate before SaslHandshake",
                                close="SaslAuthenticate before SaslHandshake")
        if self.mechanism == "PLAIN":
            return self._plain(auth_bytes, now_ms)
        scram = self._scram
        if scram.username is None:
            try:
                user = scram.receive_client_first(auth_bytes)
            except ScramError as e:
                return self._failed(f"malformed SCRAM client-first message: {e}")
            return Answer(lookup=(self.mechanism, user))
        try:
            server_final = scram.receive_client_final(auth_bytes)
        except (ScramError, AssertionError) as e:
            return self._failed(f"SCRAM {e}")
        return self._succeed(f"User:{scram.username}", server_final, now_ms)

    def credential(self, credential: ScramCredential | None, now_ms: int) -> Answer:
        """The SCRAM credential of the user in client-first (None: no such user)."""
        if credential is None:
            return self._failed(f"no SCRAM credential of user {self._scram.username!r}")
        return self._answer(ErrorCode.none, None, self._scram.server_first(credential))

    def _plain(self, auth_bytes: bytes, now_ms: int) -> Answer:
        parts = auth_bytes.split(b"\0")
        if len(parts) != 3:
            return self._failed("malformed PLAIN token")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            return self._failed("PLAIN token is not UTF-8")
        expected = self.plain_users.get(user)
        if not user or expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            return self._failed(f"invalid PLAIN credentials of user {user!r}")
        if authzid and authzid != user:
            return self._failed("the authorization id must be the user name")
        return self._succeed(f"User:{user}", b"", now_ms)

    def _succeed(self, principal: str, auth_bytes: bytes, now_ms: int) -> Answer:
        if self.principal is not None and principal != self.principal:
            return self._failed(f"cannot change principals during re-authentication: {self.principal} → {principal}")
        self.principal = principal
        self.outcome = "successful-reauthentication" if self.completed else "successful-authentication"
        self.completed += 1
        self.state = AUTHENTICATED
        self.raw_tokens = False
        self._scram = None
        self.session_expires_ms = now_ms + self.reauth_ms if self.reauth_ms > 0 else None
        return self._answer(ErrorCode.none, None, auth_bytes, lifetime_ms=self.reauth_ms)

    def _failed(self, reason: str) -> Answer:
        """SASL_AUTHENTICATION_FAILED, then close (Kafka tells the client no more than this)."""
        self.state = FAILED
        self.outcome = "failed-reauthentication" if self.completed else "failed-authentication"
        message = (f"Authentication failed during authentication due to invalid credentials with SASL "
                   f"mechanism {self.mechanism}")
        return self._answer(ErrorCode.sasl_authentication_failed, message, close=f"authentication failed: {reason}")

    def _answer(self, code: ErrorCode, message: str | None, auth_bytes: bytes = b"", *, lifetime_ms: int = 0,
                close: str | None = None) -> Answer:
        if self._version < 0:  # a raw token after a v0 handshake: no error to send, a failure just closes
            return Answer(raw=None if code else auth_bytes, close=close)
        return Answer({"error_code": code, "error_message": message, "auth_bytes": auth_bytes,
                       "session_lifetime": lifetime_ms}, close=close)
