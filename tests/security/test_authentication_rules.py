"""The pure parts: SCRAM against RFC 7677's test vector, the authenticator's rules, JAAS lines,
and the mTLS principal of a real TLS handshake."""

import asyncio
import base64
import ssl

import pytest

from weir.protocol.errors import ErrorCode
from weir.protocol.scram import ScramClient, ScramCredential, ScramError, ScramServer
from weir.protocol.versions import ApiKey
from weir.security.authenticator import AUTHENTICATED, Authenticator
from weir.security.certificates import CertificateAuthority
from weir.security.jaas import JaasError, parse_jaas, plain_users
from weir.security.tls import ANONYMOUS, principal_of, server_context

SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def test_scram_sha_256_rfc_7677_vector():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", "rOprNGfwEbeRWgbNEkqO")
    server = ScramServer("SCRAM-SHA-256", SERVER_NONCE)
    assert server.receive_client_first(client.client_first()) == "user"
    server_first = server.server_first(ScramCredential.from_password("SCRAM-SHA-256", "pencil", SALT, 4096))
    assert server_first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    client_final = client.client_final(server_first)
    assert client_final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    server_final = server.receive_client_final(client_final)
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    client.verify(server_final)


def test_scram_refuses_a_wrong_password_and_keeps_kafkas_credential_format():
    credential = ScramCredential.from_password("SCRAM-SHA-512", "right", b"salt" * 4, 4096)
    assert ScramCredential.decode(credential.encode()) == credential
    assert credential.encode().startswith("salt=c2FsdHNhbHRzYWx0c2FsdA==,stored_key=")
    assert credential.encode().endswith(",iterations=4096")
    client = ScramClient("SCRAM-SHA-512", "a,b=c", "wrong", "nonce")
    server = ScramServer("SCRAM-SHA-512", "server")
    assert server.receive_client_first(client.client_first()) == "a,b=c"  # saslname escaping
    with pytest.raises(ScramError, match="invalid proof"):
        server.receive_client_final(client.client_final(server.server_first(credential)))
    for garbage in (b"", b"x", b"n,,", b"p,,n=u,r=x", b"n,,n=u", b"\xff\xfe"):
        with pytest.raises(ScramError):
            ScramServer("SCRAM-SHA-512", "s").receive_client_first(garbage)


def _authenticator(reauth_ms=0):
    return Authenticator(("PLAIN", "SCRAM-SHA-512"), {"bob": "secret"}, reauth_ms, lambda: "servernonce")


def test_only_sasl_requests_before_authentication_and_unknown_mechanisms():
    auth = _authenticator()
    assert auth.refuses(ApiKey.API_VERSIONS, 0) is None
    assert "during SASL authentication" in auth.refuses(ApiKey.METADATA, 0)
    answer = auth.handshake(1, "GSSAPI", 0)
    assert answer.body == {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": ["PLAIN", "SCRAM-SHA-512"]}
    assert answer.close
    auth = _authenticator()
    answer = auth.authenticate(1, b"\0bob\0secret", 0)  # before SaslHandshake
    assert answer.body["error_code"] == ErrorCode.illegal_sasl_state and answer.close


def test_plain_then_reauthentication_with_session_lifetime():
    auth = _authenticator(reauth_ms=1000)
    assert auth.handshake(1, "PLAIN", 0).body["error_code"] == ErrorCode.none
    answer = auth.authenticate(1, b"\0bob\0secret", 10)
    assert answer.body["error_code"] == ErrorCode.none and answer.body["session_lifetime"] == 1000
    assert auth.state == AUTHENTICATED and auth.principal == "User:bob"
    assert auth.refuses(ApiKey.PRODUCE, 500) is None
    assert "expired" in auth.refuses(ApiKey.PRODUCE, 1010)
    assert auth.refuses(ApiKey.SASL_HANDSHAKE, 1010) is None
    assert auth.handshake(1, "PLAIN", 1010).body["error_code"] == ErrorCode.none
    assert auth.authenticate(1, b"\0bob\0secret", 1020).body["error_code"] == ErrorCode.none
    assert auth.refuses(ApiKey.PRODUCE, 1500) is None
    # wrong password: SASL_AUTHENTICATION_FAILED, then closed
    auth = _authenticator()
    auth.handshake(1, "PLAIN", 0)
    answer = auth.authenticate(2, b"\0bob\0nope", 0)
    assert answer.body["error_code"] == ErrorCode.sasl_authentication_failed and answer.close


def test_scram_client_first_extensions_are_kafkas():
    """Kafka's ClientFirstMessage takes extensions after the nonce (`,name=value`) and its
    ScramSaslServer ignores those it does not know; tokenauth=true asks for a delegation token.
    Weir refused any extension as a malformed attribute, so a client sending one could not log in."""
    credential = ScramCredential.from_password("SCRAM-SHA-256", "pw", b"0123456789abcdef")
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", "clientnonce")
    client._client_first_bare += ",traceid=abc=1,tokenauth=false"  # signed as part of client-first-bare
    server = ScramServer("SCRAM-SHA-256", "servernonce")
    assert server.receive_client_first(client.client_first()) == "alice"
    client.verify(server.receive_client_final(client.client_final(server.server_first(credential))))
    for refused in (b"n,,n=alice,r=x,tokenauth=true", b"n,,n=alice,r=x,bad", b"n,,n=alice,r=x,9=1",
                    b"n,,r=x,n=alice"):
        with pytest.raises(ScramError):
            ScramServer("SCRAM-SHA-256", "s").receive_client_first(refused)


def test_scram_through_the_authenticator_with_a_credential_lookup():
    auth = _authenticator()
    auth.handshake(1, "SCRAM-SHA-512", 0)
    client = ScramClient("SCRAM-SHA-512", "alice", "pw", "clientnonce")
    answer = auth.authenticate(1, client.client_first(), 0)
    assert answer.lookup == ("SCRAM-SHA-512", "alice")
    first = auth.credential(ScramCredential.from_password("SCRAM-SHA-512", "pw", b"0123456789abcdef"), 0)
    final = auth.authenticate(1, client.client_final(first.body["auth_bytes"]), 0)
    client.verify(final.body["auth_bytes"])
    assert auth.principal == "User:alice"
    unknown = _authenticator()
    unknown.handshake(1, "SCRAM-SHA-512", 0)
    unknown.authenticate(1, ScramClient("SCRAM-SHA-512", "nobody", "pw", "n").client_first(), 0)
    assert unknown.credential(None, 0).body["error_code"] == ErrorCode.sasl_authentication_failed


def test_v0_handshake_tokens_are_raw():
    auth = _authenticator()
    auth.handshake(0, "PLAIN", 0)
    assert auth.raw_tokens
    answer = auth.authenticate(-1, b"\0bob\0secret", 0)
    assert answer.body is None and answer.raw == b"" and answer.close is None and auth.authenticated


def test_jaas_lines():
    options = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
                         '  username="admin" password="a \\"quoted\\" one" user_admin="x" user_bob=plain;')
    assert options["password"] == 'a "quoted" one'
    assert plain_users(options) == {"admin": "x", "bob": "plain"}
    with pytest.raises(JaasError):
        parse_jaas('username="admin"')


def test_mtls_principal_is_the_certificate_subject(tmp_path):
    ca = CertificateAuthority.create(tmp_path / "ca.pem")
    server_pem = ca.issue(tmp_path / "server.pem", "broker", ["127.0.0.1"])
    client_pem = ca.issue(tmp_path / "client.pem", "writer", organizational_unit="eng")
    settings = {"ssl.keystore.location": str(server_pem), "ssl.keystore.type": "PEM", "ssl.key.password": "",
                "ssl.keystore.key": "", "ssl.keystore.certificate.chain": "", "ssl.truststore.location": str(ca.path),
                "ssl.truststore.type": "PEM", "ssl.truststore.certificates": "", "ssl.client.auth": "requested",
                "ssl.enabled.protocols": "TLSv1.2,TLSv1.3", "ssl.cipher.suites": ""}
    context = server_context(settings.get)
    principals = []

    async def run(client_context) -> None:
        async def on_client(reader, writer):
            principals.append(principal_of(writer.get_extra_info("ssl_object")))
            writer.close()
        server = await asyncio.start_server(on_client, "127.0.0.1", 0, ssl=context)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context)
        await reader.read()
        writer.close()
        server.close()

    with_certificate = ssl.create_default_context(cafile=str(ca.path))
    with_certificate.load_cert_chain(client_pem)
    asyncio.run(run(with_certificate))
    asyncio.run(run(ssl.create_default_context(cafile=str(ca.path))))
    assert principals == ["User:CN=writer,OU=eng", ANONYMOUS]


def _tls_settings(**overrides):
    settings = {"ssl.keystore.location": "", "ssl.keystore.type": "PEM", "ssl.key.password": "",
                "ssl.keystore.password": "", "ssl.keystore.key": "", "ssl.keystore.certificate.chain": "",
                "ssl.truststore.location": "", "ssl.truststore.type": "PEM", "ssl.truststore.password": "",
                "ssl.truststore.certificates": "", "ssl.client.auth": "none", "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
                "ssl.cipher.suites": "", "ssl.endpoint.identification.algorithm": "https"}
    settings.update(overrides)
    return settings.get


async def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> str:
    """Connect a TLS client to a TLS server; the server's view of the client's principal."""
    seen = []

    async def on_client(reader, writer):
        seen.append(principal_of(writer.get_extra_info("ssl_object")))
        writer.write(b"ok")
        await writer.drain()
        writer.close()
    listening = await asyncio.start_server(on_client, "127.0.0.1", 0, ssl=server)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", listening.sockets[0].getsockname()[1], ssl=client)
        assert await reader.read() == b"ok"
        writer.close()
    finally:
        listening.close()
    return seen[0]


def test_key_stores_in_pem_text_and_pkcs12_and_required_client_certificates(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    from weir.security.tls import TlsConfigError, client_context
    ca = CertificateAuthority.create(tmp_path / "ca.pem")
    pem = ca.issue(tmp_path / "broker.pem", "broker", ["127.0.0.1"]).read_text()
    key_text = pem[:pem.index("-----END PRIVATE KEY-----") + 25]
    chain_text = pem[len(key_text):]
    # PEM text in the config, client certificates required
    server = server_context(_tls_settings(**{"ssl.keystore.key": key_text, "ssl.keystore.certificate.chain": chain_text,
                                            "ssl.truststore.certificates": ca.path.read_text(),
                                            "ssl.client.auth": "required", "ssl.enabled.protocols": "TLSv1.3"}))
    client_pem = ca.issue(tmp_path / "client.pem", "broker-2")
    client = client_context(_tls_settings(**{"ssl.truststore.location": str(ca.path),
                                            "ssl.keystore.location": str(client_pem)}))
    assert asyncio.run(_handshake(server, client)) == "User:CN=broker-2"
    anonymous = ssl.create_default_context(cafile=str(ca.path))
    with pytest.raises((ssl.SSLError, ConnectionError, AssertionError, IndexError)):
        asyncio.run(_handshake(server, anonymous))  # no certificate: refused
    tls12_only = ssl.create_default_context(cafile=str(ca.path))
    tls12_only.maximum_version = ssl.TLSVersion.TLSv1_2
    tls12_only.load_cert_chain(client_pem)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        asyncio.run(_handshake(server, tls12_only))  # ssl.enabled.protocols=TLSv1.3
    # a PKCS12 key store
    key = serialization.load_pem_private_key(key_text.encode(), None)
    from cryptography import x509
    certificate = x509.load_pem_x509_certificate(chain_text.encode())
    p12 = tmp_path / "broker.p12"
    p12.write_bytes(pkcs12.serialize_key_and_certificates(b"broker", key, certificate, None,
                                                         serialization.BestAvailableEncryption(b"secret")))
    server = server_context(_tls_settings(**{"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(p12),
                                            "ssl.keystore.password": "secret"}))
    assert asyncio.run(_handshake(server, ssl.create_default_context(cafile=str(ca.path)))) == ANONYMOUS
    with pytest.raises(TlsConfigError, match="needs ssl.keystore.location"):
        server_context(_tls_settings())
    with pytest.raises(TlsConfigError, match="ssl.enabled.protocols"):
        server_context(_tls_settings(**{"ssl.enabled.protocols": "TLSv1.1"}))


def test_listener_settings_that_cannot_work_stop_the_broker_with_a_readable_message():
    from weir.config.broker_config import BrokerConfig
    from weir.config.settings import ConfigError
    from weir.security.broker_security import inter_broker_security, listener_security
    config = BrokerConfig({"listeners": "SASL_PLAINTEXT://:9092"})
    with pytest.raises(ConfigError, match="GSSAPI: Weir serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"):
        listener_security(config, config.listeners[0])
    config = BrokerConfig({"listeners": "SASL_PLAINTEXT://:9092", "sasl.enabled.mechanisms": "PLAIN",
                           "sasl.mechanism.inter.broker.protocol": "PLAIN",
                           "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                               'org.apache.kafka.common.security.plain.PlainLoginModule required '
                               'username="broker" password="pw" user_broker="pw" user_bob="b";'})
    assert listener_security(config, config.listeners[0]).plain_users == {"broker": "pw", "bob": "b"}
    peer = inter_broker_security(config)
    assert (peer.protocol, peer.sasl_mechanism, peer.username, peer.password) == ("SASL_PLAINTEXT", "PLAIN", "broker", "pw")
    config = BrokerConfig({"listeners": "SASL_PLAINTEXT://:9092", "sasl.enabled.mechanisms": "PLAIN",
                           "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"})
    with pytest.raises(ConfigError, match="scram-sha-512.sasl.jaas.config with username and password"):
        inter_broker_security(config)


def test_users_add_config_syntax():
    from weir.cli.common import UsageError
    from weir.cli.users import parse_add_config
    assert parse_add_config("SCRAM-SHA-512=[iterations=8192,password=a-secret],SCRAM-SHA-256=[password=b]") == {
        "SCRAM-SHA-512": ("a-secret", 8192), "SCRAM-SHA-256": ("b", 4096)}
    with pytest.raises(UsageError):
        parse_add_config("SCRAM-SHA-1=[password=x]")
    with pytest.raises(UsageError):
        parse_add_config("SCRAM-SHA-512=[iterations=4096]")


def test_ssl_principal_mapping_rules_as_kafkas_examples():
    from weir.security.tls import NoRuleApplies, TlsConfigError, map_principal, parse_principal_rules
    rules = parse_principal_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
                                  "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, DEFAULT")
    assert map_principal("CN=kafka-admin,OU=ServiceUsers,O=Unknown", rules) == "kafka-admin"
    assert map_principal("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", rules) == "duke@javasoft"
    assert map_principal("CN=else", rules) == "CN=else"
    with pytest.raises(NoRuleApplies):
        map_principal("CN=else", parse_principal_rules("RULE:^CN=(.*),OU=x$/$1/U"))
    assert map_principal("CN=svc,OU=x", parse_principal_rules("RULE:^CN=(.*),OU=x$/$1/U")) == "SVC"
    with pytest.raises(TlsConfigError):
        parse_principal_rules("RULE:unterminated")
