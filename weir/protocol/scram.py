"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them: pure, no I/O.

    client → server   client-first   n,,n=alice,r=<client nonce>
    server → client   server-first   r=<client nonce><server nonce>,s=<salt, base64>,i=4096
    client → server   client-final   c=biws,r=<nonce>,p=<ClientProof, base64>
    server → client   server-final   v=<ServerSignature, base64>

The server keeps only a salted credential (`ScramCredential`: salt, StoredKey, ServerKey,
iterations), written in ZooKeeper in Kafka's format
(`salt=...,stored_key=...,server_key=...,iterations=4096`); it never sees the password. The
client proves it knows the password without sending it, and the server proves it knows the
credential. Nonces come from the caller (a random source in), so a test replays an exchange.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's ScramMechanism bounds
# AlterUserScramCredentials / DescribeUserScramCredentials number the mechanisms
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_TYPE_OF = {name: number for number, name in MECHANISM_TYPES.items()}


class ScramError(ValueError):
    """The exchange failed: a malformed message, or a proof that does not match."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise ScramError("bad base64") from None


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i): PBKDF2 with the mechanism's HMAC over the password's UTF-8 bytes. As
    Kafka's ScramFormatter (and librdkafka), no SASLprep: a credential set by one client must match
    the login of any other."""
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode(), salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
        hash_name = MECHANISMS[mechanism]
        client_key = _hmac(hash_name, salted, b"Client Key")
        return cls(salt, hashlib.new(hash_name, client_key).digest(), _hmac(hash_name, salted, b"Server Key"),
                   iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, salt: bytes, iterations: int = MIN_ITERATIONS
                      ) -> ScramCredential:
        return cls.from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations),
                                        salt, iterations)

    def encode(self) -> str:
        """Kafka's ZooKeeper form (ScramCredentialUtils.credentialToString)."""
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def decode(cls, text: str) -> ScramCredential:
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            return cls(_unb64(fields["salt"]), _unb64(fields["stored_key"]), _unb64(fields["server_key"]),
                       int(fields["iterations"]))
        except (KeyError, ValueError) as e:
            raise ScramError(f"not a SCRAM credential: {e}") from None


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for item in message.split(","):
        if len(item) < 2 or item[1] != "=":
            raise ScramError(f"malformed attribute {item[:20]!r}")
        out.setdefault(item[0], item[2:])
    return out


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _unsaslname(name: str) -> str:
    if "=" in name.replace("=3D", "").replace("=2C", ""):
        raise ScramError("malformed user name")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One server side of an exchange: `receive_client_first` (→ the user to look up),
    `server_first(credential)`, `receive_client_final` (→ server-final, or ScramError)."""

    def __init__(self, mechanism: str, server_nonce: str) -> None:
        assert mechanism in MECHANISMS, mechanism
        self.mechanism = mechanism
        self.hash_name = MECHANISMS[mechanism]
        self.server_nonce = server_nonce
        self.username: str | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2_header = ""
        self._credential: ScramCredential | None = None

    def receive_client_first(self, data: bytes) -> str:
        try:
            message = data.decode()
        except UnicodeDecodeError:
            raise ScramError("client-first is not UTF-8") from None
        parts = message.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            raise ScramError("client-first: expected a gs2 header n,, (channel binding is not supported)")
        authzid = parts[1]
        self._gs2_header = f"{parts[0]},{authzid},"
        self._client_first_bare = parts[2]
        # Kafka's ClientFirstMessage: [m=...,]n=<user>,r=<nonce>[,<extension>=<value>]...
        items = parts[2].split(",")
        if items[0].startswith("m="):
            items = items[1:]
        if len(items) < 2 or not items[0].startswith("n=") or not items[1].startswith("r=") or len(items[1]) < 3:
            raise ScramError("client-first: no user name or nonce")
        extensions = {}
        for item in items[2:]:
            key, sep, value = item.partition("=")
            if not sep or not value or not (key.isascii() and key.isalpha()):
                raise ScramError(f"client-first: malformed extension {item[:20]!r}")
            extensions[key] = value
        # Kafka ignores the extensions it does not know; tokenauth=true asks for a delegation token,
        # which Weir has none of (Kafka: "Token Authentication failed: Invalid tokenId")
        if extensions.get("tokenauth", "").lower() == "true":
            raise ScramError("client-first: delegation token authentication (tokenauth) is not supported")
        self.username = _unsaslname(items[0][2:])
        nonce = items[1][2:]
        if authzid and authzid != f"a={_saslname(self.username)}":
            raise ScramError("the authorization id must be the user name")
        self._nonce = nonce + self.server_nonce
        return self.username

    def server_first(self, credential: ScramCredential) -> bytes:
        self._credential = credential
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        return self._server_first.encode()

    def receive_client_final(self, data: bytes) -> bytes:
        assert self._credential is not None, "server_first first"
        try:
            message = data.decode()
        except UnicodeDecodeError:
            raise ScramError("client-final is not UTF-8") from None
        without_proof, sep, proof = message.rpartition(",p=")
        if not sep:
            raise ScramError("client-final: no proof")
        attributes = _attributes(without_proof)
        if attributes.get("r") != self._nonce:
            raise ScramError("client-final: the nonce does not match")
        if _unb64(attributes.get("c", "")) != self._gs2_header.encode():
            raise ScramError("client-final: channel binding does not match")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self.hash_name, self._credential.stored_key, auth_message)
        client_proof = _unb64(proof)
        if len(client_proof) != len(signature):
            raise ScramError("invalid proof")
        client_key = bytes(a ^ b for a, b in zip(client_proof, signature))
        if not hmac.compare_digest(hashlib.new(self.hash_name, client_key).digest(), self._credential.stored_key):
            raise ScramError("invalid proof")
        return f"v={_b64(_hmac(self.hash_name, self._credential.server_key, auth_message))}".encode()


class ScramClient:
    """The client side: `client_first()`, `client_final(server_first)`, `verify(server_final)`."""

    def __init__(self, mechanism: str, username: str, password: str, client_nonce: str) -> None:
        assert mechanism in MECHANISMS, mechanism
        self.mechanism = mechanism
        self.hash_name = MECHANISMS[mechanism]
        self.password = password
        self._client_first_bare = f"n={_saslname(username)},r={client_nonce}"
        self._nonce = client_nonce
        self._server_signature = b""

    def client_first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def client_final(self, server_first: bytes) -> bytes:
        attributes = _attributes(server_first.decode())
        if "e" in attributes:
            raise ScramError(f"server error: {attributes['e']}")
        nonce, salt, iterations = attributes.get("r", ""), _unb64(attributes.get("s", "")), int(attributes.get("i", 0))
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ScramError("the server's nonce does not extend ours")
        if iterations < MIN_ITERATIONS:
            raise ScramError(f"{iterations} iterations are too few")
        salted = salted_password(self.mechanism, self.password, salt, iterations)
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first.decode()},{without_proof}".encode()
        client_key = _hmac(self.hash_name, salted, b"Client Key")
        signature = _hmac(self.hash_name, hashlib.new(self.hash_name, client_key).digest(), auth_message)
        self._server_signature = _hmac(self.hash_name, _hmac(self.hash_name, salted, b"Server Key"), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        attributes = _attributes(server_final.decode())
        if "e" in attributes:
            raise ScramError(f"server error: {attributes['e']}")
        if not hmac.compare_digest(_unb64(attributes.get("v", "")), self._server_signature):
            raise ScramError("the server's signature does not match: it does not hold our credential")
