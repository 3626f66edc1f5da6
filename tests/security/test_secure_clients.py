"""Real Kafka clients over TLS and SASL against one broker with a listener of each protocol:

    PLAINTEXT        (the tests' back door, for setup)
    SSL              ssl.client.auth=requested (mTLS principal from the certificate)
    SASL_SSL         SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN
    SASL_PLAINTEXT   PLAIN and SCRAM-SHA-512

Users: `admin` (SCRAM, written to ZooKeeper before the broker starts, as `weir up --secure`
does), `alice` (SCRAM, created over the wire with AlterUserScramCredentials as admin), and the
PLAIN users of the listeners' JAAS config.
"""

import asyncio
import os
import socket
import ssl
import time

import pytest
from scraping import broker_metrics

from weir.client import AuthenticationFailed, BrokerConnection, ClientSecurity, ClusterClient
from weir.lab.local_cluster import BrokerProcess, SecureSetup
from weir.lab.zookeeper_server import free_port
from weir.protocol.errors import ErrorCode
from weir.protocol.scram import MECHANISM_TYPE_OF, salted_password
from weir.protocol.versions import ApiKey

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_bob="bob-secret" user_carol="carol-secret";')
COUNT = 200
NO_TOPICS = {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}

FAST = {"zookeeper.session.timeout.ms": "6000", "replica.fetch.backoff.ms": "200"}  # as tests/conftest.py's


def stop_all(started: list) -> None:
    for process in started:
        process.kill()
        print(process.output())  # shown by pytest when the test fails


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory, zookeeper):
    data_dir = tmp_path_factory.mktemp("secure")
    zookeeper_connect = f"{zookeeper.connect_string}/secure-clients"
    setup = SecureSetup(data_dir)
    setup.create_admin(zookeeper_connect)
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT")}
    overrides = {**FAST, **setup.overrides,
                          "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
                          "inter.broker.listener.name": "SASL_SSL",
                          "listener.name.ssl.ssl.client.auth": "requested",
                          "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
                          "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
                          "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
                          "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
                          "connections.max.idle.ms": "5000", "connections.max.reauth.ms": "2000",
                 "connection.failed.authentication.delay.ms": "10", "group.initial.rebalance.delay.ms": "0",
                 "metrics.port": "0", "allow.everyone.if.no.acl.found": "true"}  # ACLs: tests/security/test_acl_cluster.py
    broker = BrokerProcess(0, data_dir / "broker-0", zookeeper_connect, ports["PLAINTEXT"], overrides=overrides)
    broker.start()
    broker.ports, broker.setup = ports, setup
    try:
        asyncio.run(_create_alice(broker))
        yield broker
    finally:
        stop_all([broker])


async def _create_alice(broker) -> None:
    security = broker.setup.client_security()
    async with await BrokerConnection.open("127.0.0.1", broker.ports["SASL_SSL"], security=security) as conn:
        salt = os.urandom(24)
        response = await conn.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [], "upsertions": [
            {"name": "alice", "mechanism": MECHANISM_TYPE_OF[m], "iterations": 4096, "salt": salt,
             "salted_password": salted_password(m, "alice-secret", salt, 4096)}
            for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")]})
        assert [(r.user, r.error_code) for r in response.results] == [("alice", ErrorCode.none)]
        described = await conn.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": "alice"}]})
        assert [(i.mechanism, i.iterations) for i in described.results[0].credential_infos] == [(1, 4096), (2, 4096)]


def bootstrap(broker, listener: str) -> str:
    return f"127.0.0.1:{broker.ports[listener]}"


def confluent_config(broker, listener, mechanism=None, user=None, password=None) -> dict:
    config = {"bootstrap.servers": bootstrap(broker, listener), "security.protocol": listener}
    if "SSL" in listener:
        config["ssl.ca.location"] = str(broker.setup.ca_path)
    if "SASL" in listener:
        config.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    return config


def confluent_round_trip(config: dict, topic: str) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    producer = Producer({**config, "acks": "all"})
    for i in range(COUNT):
        producer.produce(topic, f"value-{i}".encode(), key=str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values, deadline = [], time.monotonic() + 30
    while len(values) < COUNT and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def kafka_python_round_trip(broker, listener, mechanism, user, password, topic) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer
    config = {"bootstrap_servers": bootstrap(broker, listener), "security_protocol": listener}
    if "SSL" in listener:
        config["ssl_cafile"] = str(broker.setup.ca_path)
    if "SASL" in listener:
        config.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
    producer = KafkaProducer(acks="all", **config)
    for i in range(COUNT):
        producer.send(topic, f"value-{i}".encode(), key=str(i).encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **config)
    values = [m.value for _, m in zip(range(COUNT), consumer)]
    consumer.close()
    return values


def aiokafka_round_trip(broker, listener, mechanism, user, password, topic) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def run() -> list[bytes]:
        config = {"bootstrap_servers": bootstrap(broker, listener), "security_protocol": listener}
        if "SSL" in listener:
            config["ssl_context"] = create_ssl_context(cafile=str(broker.setup.ca_path))
        if "SASL" in listener:
            config.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
        producer = AIOKafkaProducer(acks="all", **config)
        await producer.start()
        try:
            for i in range(COUNT):
                await producer.send(topic, f"value-{i}".encode(), key=str(i).encode())
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **config)
        await consumer.start()
        values = []
        try:
            async with asyncio.timeout(30):
                async for message in consumer:
                    values.append(message.value)
                    if len(values) == COUNT:
                        break
        finally:
            await consumer.stop()
        return values

    return asyncio.run(run())


EXPECTED = [f"value-{i}".encode() for i in range(COUNT)]


@pytest.mark.parametrize("listener,mechanism,user,password", [
    ("SASL_SSL", "SCRAM-SHA-512", "alice", "alice-secret"),
    ("SASL_SSL", "SCRAM-SHA-256", "admin", None),
    ("SSL", None, None, None),
    ("SASL_PLAINTEXT", "PLAIN", "bob", "bob-secret"),
])
def test_confluent_kafka(secure_broker, listener, mechanism, user, password):
    password = password or secure_broker.setup.admin_password
    topic = f"confluent-{listener}-{mechanism}".lower()
    assert confluent_round_trip(confluent_config(secure_broker, listener, mechanism, user, password), topic) == EXPECTED


@pytest.mark.parametrize("listener,mechanism,user,password", [
    ("SASL_SSL", "SCRAM-SHA-512", "alice", "alice-secret"),
    ("SASL_SSL", "PLAIN", "carol", "carol-secret"),
])
def test_kafka_python(secure_broker, listener, mechanism, user, password):
    topic = f"kafka-python-{listener}-{mechanism}".lower()
    assert kafka_python_round_trip(secure_broker, listener, mechanism, user, password, topic) == EXPECTED


def test_aiokafka(secure_broker):
    assert aiokafka_round_trip(secure_broker, "SASL_SSL", "SCRAM-SHA-512", "alice", "alice-secret",
                               "aiokafka-sasl-ssl") == EXPECTED


def test_wrong_password_fails_with_an_authentication_error(secure_broker, caplog):
    from confluent_kafka import KafkaError, Producer
    errors = []
    config = confluent_config(secure_broker, "SASL_SSL", "SCRAM-SHA-512", "alice", "wrong")
    producer = Producer({**config, "error_cb": errors.append})
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    del producer  # or librdkafka goes on trying in the background
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors

    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError
    with pytest.raises(KafkaPythonError):  # it retries until max_block_ms, logging each refusal
        KafkaProducer(bootstrap_servers=bootstrap(secure_broker, "SASL_SSL"), security_protocol="SASL_SSL",
                      ssl_cafile=str(secure_broker.setup.ca_path), sasl_mechanism="SCRAM-SHA-512",
                      sasl_plain_username="alice", sasl_plain_password="wrong", bootstrap_timeout_ms=2000)
    assert "[Error 58] SaslAuthenticationFailedError" in caplog.text

    async def ours() -> None:
        for mechanism, user in (("SCRAM-SHA-512", "alice"), ("SCRAM-SHA-512", "nobody"), ("PLAIN", "bob")):
            security = ClientSecurity("SASL_SSL", ssl.create_default_context(cafile=str(secure_broker.setup.ca_path)),
                                      mechanism, user, "wrong")
            with pytest.raises(AuthenticationFailed, match="sasl_authentication_failed"):
                await BrokerConnection.open("127.0.0.1", secure_broker.ports["SASL_SSL"], security=security)
        security = ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", "alice", "alice-secret")
        with pytest.raises(AuthenticationFailed, match="unsupported_sasl_mechanism.*enabled: PLAIN, SCRAM-SHA-512"):
            await BrokerConnection.open("127.0.0.1", secure_broker.ports["SASL_PLAINTEXT"], security=security)

    asyncio.run(ours())


def _closed(sock: socket.socket, timeout_s: float = 10) -> bool:
    sock.settimeout(timeout_s)
    try:
        while sock.recv(4096):
            pass
        return True
    except (ConnectionResetError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


def test_unauthenticated_requests_garbage_and_idle_clients_are_closed(secure_broker):
    """Only ApiVersions and the SASL requests before authentication; garbage in the TLS or SASL
    handshake and clients that never authenticate get closed; a client beside them is unaffected."""
    async def bystander():
        return await BrokerConnection.open("127.0.0.1", secure_broker.ports["SASL_SSL"],
                                           security=secure_broker.setup.client_security())

    async def run() -> None:
        healthy = await bystander()
        await healthy.api_versions()
        # a Metadata request before SaslHandshake: closed, as Kafka
        plain = await BrokerConnection.open("127.0.0.1", secure_broker.ports["SASL_PLAINTEXT"])
        await plain.api_versions()  # allowed
        with pytest.raises(Exception):
            await plain.request(ApiKey.METADATA, 12, NO_TOPICS, timeout_s=5)
        await plain.close()
        # garbage where the TLS ClientHello belongs, and garbage SASL tokens on the plain SASL port
        for port, payload in ((secure_broker.ports["SASL_SSL"], os.urandom(300)),
                              (secure_broker.ports["SSL"], b"\x16\x03\x01\x00\x05hello" * 20),
                              (secure_broker.ports["SASL_PLAINTEXT"], b"\x00\x00\x00\x10" + os.urandom(16))):
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(payload)
                assert await asyncio.to_thread(_closed, sock)
        # a frame larger than sasl.server.max.receive.size before authentication: closed unread
        with socket.create_connection(("127.0.0.1", secure_broker.ports["SASL_PLAINTEXT"])) as sock:
            sock.sendall(b"\x00\x10\x00\x00" + b"\x00" * 1024)  # announces 1 MiB
            assert await asyncio.to_thread(_closed, sock)
        sasl = await BrokerConnection.open("127.0.0.1", secure_broker.ports["SASL_PLAINTEXT"])
        await sasl.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})
        answer = await sasl.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": os.urandom(40)})  # not SCRAM
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        with pytest.raises(Exception):  # and closed after the answer
            await sasl.request(ApiKey.API_VERSIONS, 3, {}, timeout_s=5)
        await sasl.close()
        # the bystander was never disturbed
        response = await healthy.request(ApiKey.METADATA, 12, NO_TOPICS)
        assert [b.port for b in response.brokers] == [secure_broker.ports["SASL_SSL"]]
        await healthy.close()
        # a client that connects and never authenticates: closed after connections.max.idle.ms (5 s)
        # (which closes any connection idle that long, as Kafka's: hence the bystander's check first)
        with socket.create_connection(("127.0.0.1", secure_broker.ports["SASL_PLAINTEXT"])) as sock:
            started = time.monotonic()
            assert await asyncio.to_thread(_closed, sock, 15)
            assert 4 < time.monotonic() - started < 10

    asyncio.run(run())


def test_reauthentication_kip_368(secure_broker):
    """connections.max.reauth.ms=2000: the session lifetime is announced; a client that re-authenticates
    keeps its connection, one that does not is closed at its next request."""
    async def run() -> None:
        security = secure_broker.setup.client_security("alice", "alice-secret")
        conn = await BrokerConnection.open("127.0.0.1", secure_broker.ports["SASL_SSL"], security=security)
        again = await BrokerConnection.open("127.0.0.1", secure_broker.ports["SASL_SSL"], security=security)
        lifetime = await conn.authenticate(security)  # re-authenticate at once: allowed, same principal
        assert lifetime == 2000
        conn._reauthenticate_at = None  # this one forgets to re-authenticate (weir's client would)
        bystander = await BrokerConnection.open("127.0.0.1", secure_broker.ports["SASL_SSL"], security=security)
        await asyncio.sleep(2.2)
        await bystander.request(ApiKey.METADATA, 12, NO_TOPICS)  # re-authenticates by itself first
        assert await again.authenticate(security) == 2000  # re-authenticating after expiry is still fine
        await again.request(ApiKey.METADATA, 12, NO_TOPICS)
        with pytest.raises(Exception):  # the session expired: closed
            await conn.request(ApiKey.METADATA, 12, NO_TOPICS, timeout_s=5)
        # changing principals during re-authentication fails
        with pytest.raises(AuthenticationFailed):
            await again.authenticate(secure_broker.setup.client_security())
        await conn.close()
        await again.close()
        await bystander.close()

    asyncio.run(run())
    counts = authentication_metrics(secure_broker)
    assert counts[("SASL_SSL", "successful-authentication")] >= 3
    assert counts[("SASL_SSL", "successful-reauthentication")] >= 3
    assert counts[("SASL_SSL", "failed-reauthentication")] >= 1  # the change of principal


def authentication_metrics(broker) -> dict[tuple[str, str], float]:
    samples = broker_metrics(broker)
    return {(labels["listener"], labels["outcome"]): value
            for labels, value in samples["kafka_server_socket_server_metrics_authentication_total"]}


def test_mtls_principal_and_cluster_client(secure_broker, tmp_path):
    """A client certificate on the SSL listener (ssl.client.auth=requested) is accepted; weir's own
    ClusterClient works over SASL_SSL (the admin tools' path)."""
    from weir.security.certificates import CertificateAuthority
    ca = CertificateAuthority.load(secure_broker.setup.ca_path)
    keystore = ca.issue(tmp_path / "client.pem", "reader", organizational_unit="eng")
    context = ssl.create_default_context(cafile=str(secure_broker.setup.ca_path))
    context.load_cert_chain(keystore)

    async def run() -> None:
        async with await BrokerConnection.open("127.0.0.1", secure_broker.ports["SSL"],
                                               security=ClientSecurity("SSL", context)) as conn:
            await conn.api_versions()
        async with ClusterClient(bootstrap(secure_broker, "SASL_SSL"),
                                 security=secure_broker.setup.client_security()) as client:
            response = await client.refresh_metadata()
            assert [b.port for b in response.brokers] == [secure_broker.ports["SASL_SSL"]]

    asyncio.run(run())


def test_v0_handshake_then_raw_tokens(secure_broker):
    """Kafka before 1.0: SaslHandshake v0, then the PLAIN token as a raw size-prefixed frame, then requests."""
    import struct

    from integration.raw_protocol import RawClient, recv_exact, request_payload, sized
    from kio.schema.sasl_handshake.v0 import SaslHandshakeRequest
    with RawClient(secure_broker.ports["SASL_PLAINTEXT"]) as raw:
        raw.sock.sendall(sized(request_payload(ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN"))))
        size = struct.unpack(">i", recv_exact(raw.sock, 4))[0]
        assert b"PLAIN" in recv_exact(raw.sock, size)
        raw.sock.sendall(sized(b"\0bob\0bob-secret"))
        assert struct.unpack(">i", recv_exact(raw.sock, 4))[0] == 0  # PLAIN's empty answer
    with RawClient(secure_broker.ports["SASL_PLAINTEXT"]) as raw:  # a wrong password: just closed
        raw.sock.sendall(sized(request_payload(ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN"))))
        size = struct.unpack(">i", recv_exact(raw.sock, 4))[0]
        recv_exact(raw.sock, size)
        raw.sock.sendall(sized(b"\0bob\0wrong"))
        assert _closed(raw.sock)


def test_spark_source_and_sink_options_pass_security_through(secure_broker):
    """kafka.security.protocol, kafka.sasl.* and kafka.ssl.* as Spark's Kafka connector takes them: the
    source's partitions are listed over SASL_SSL; the sink's producer gets librdkafka's names."""
    from weir.spark.log_reader import discover_partitions
    from weir.spark.options import parse_read_options, parse_write_options
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
            'password="alice-secret";')
    options = {"kafka.bootstrap.servers": bootstrap(secure_broker, "SASL_SSL"), "subscribe": "spark-options",
               "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
               "kafka.sasl.jaas.config": jaas, "kafka.ssl.truststore.type": "PEM",
               "kafka.ssl.truststore.location": str(secure_broker.setup.ca_path)}
    written = parse_write_options({k: v for k, v in options.items() if k != "subscribe"})
    assert written.producer_config == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                                       "sasl.username": "alice", "sasl.password": "alice-secret",
                                       "ssl.ca.location": str(secure_broker.setup.ca_path)}
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap(secure_broker, "SASL_SSL"), **written.producer_config})
    producer.produce("spark-options", b"x")
    assert producer.flush(30) == 0
    opts = parse_read_options(options, streaming=False)
    assert discover_partitions(opts) == [("spark-options", 0)]


def test_large_fetches_over_tls_are_copied_not_sendfiled(secure_broker):
    """A fetch answer far above SENDFILE_MIN_BYTES: zero-copy cannot go through TLS, so the broker
    copies the file regions; the consumer reads every byte intact."""
    from confluent_kafka import Consumer, Producer
    payloads = [os.urandom(64 * 1024) for _ in range(48)]  # 3 MiB in one partition
    producer = Producer({"bootstrap.servers": bootstrap(secure_broker, "PLAINTEXT"), "acks": "all",
                         "linger.ms": 50, "batch.size": 1_000_000})
    for payload in payloads:
        producer.produce("large-over-tls", payload)
    assert producer.flush(30) == 0
    consumer = Consumer({**confluent_config(secure_broker, "SSL"), "group.id": "large", "auto.offset.reset": "earliest",
                         "fetch.max.bytes": 8 * 1024 * 1024, "max.partition.fetch.bytes": 8 * 1024 * 1024})
    consumer.subscribe(["large-over-tls"])
    got, deadline = [], time.monotonic() + 30
    while len(got) < len(payloads) and time.monotonic() < deadline:
        got += [m.value() for m in consumer.consume(100, timeout=0.5) if m.error() is None]
    consumer.close()
    assert got == payloads
