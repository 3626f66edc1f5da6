"""Replication on a secured three-broker cluster (`weir up --secure`'s setup): SASL_SSL listeners,
SCRAM-SHA-512 between brokers as `admin`, sessions re-authenticated every 3 s (KIP-368). Followers
fetch, the ISR fills, a killed leader's partitions move, and nothing acknowledged is lost. Its
znodes (`zookeeper.set.acl`) are the brokers' to change: a client without their ZooKeeper login
can neither change nor delete them, nor read the SCRAM credentials; DescribeConfigs does not show
the brokers' ZooKeeper password."""

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from waiting import wait_until

from weir.lab.local_cluster import LocalCluster, SecureSetup

TOPIC = "secured"
PARTITIONS = 3
COUNT = 300

FAST = {"zookeeper.session.timeout.ms": "6000", "replica.fetch.backoff.ms": "200"}  # as tests/conftest.py's


def assert_znodes_protected(cluster: LocalCluster, secure: SecureSetup) -> None:
    stranger = KazooClient(hosts=cluster.zookeeper_connect)
    stranger.start(timeout=10)
    try:
        broker, _ = stranger.get("/brokers/ids/0")  # world-readable, as Kafka's
        assert b"SASL_SSL" in broker
        for change in (lambda: stranger.set("/brokers/ids/0", b"{}"), lambda: stranger.delete("/brokers/ids/0"),
                       lambda: stranger.set("/controller", b"{}"), lambda: stranger.delete("/controller"),
                       lambda: stranger.create("/brokers/ids/7", b"{}"), lambda: stranger.get("/config/users/admin"),
                       lambda: stranger.create("/config/users/mallory", b"{}")):
            with pytest.raises(NoAuthError):
                change()
    finally:
        stranger.stop()
        stranger.close()
    brokers_login = secure.zookeeper_security.client(cluster.zookeeper_connect)
    brokers_login.start(timeout=10)
    try:
        assert b"SCRAM-SHA-512" in brokers_login.get("/config/users/admin")[0]
    finally:
        brokers_login.stop()
        brokers_login.close()


def stop_all(started: list) -> None:
    for process in started:
        process.kill()
        print(process.output())  # shown by pytest when the test fails


def test_replication_and_failover_on_a_secured_cluster(tmp_path, zookeeper_connect):
    secure = SecureSetup(tmp_path)
    cluster = LocalCluster(tmp_path, 3, zookeeper_connect=zookeeper_connect, secure=secure,
                           overrides={**FAST, "replica.lag.time.max.ms": "3000", "connections.max.reauth.ms": "3000"})
    try:
        cluster.start()
        assert_znodes_protected(cluster, secure)
        config = {"bootstrap.servers": cluster.bootstrap, **secure.client_config()}
        admin = AdminClient(config)
        broker_0 = ConfigResource(ResourceType.BROKER, "0")
        login = admin.describe_configs([broker_0])[broker_0].result(30)["zookeeper.digest.jaas.config"]
        assert login.is_sensitive and login.value is None
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)

        def isrs() -> dict[int, tuple[int, list[int]]]:
            metadata = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
            return {p.id: (p.leader, sorted(p.isrs)) for p in metadata.partitions.values()}

        producer = Producer({**config, "acks": "all", "enable.idempotence": True})
        for i in range(COUNT):
            producer.produce(TOPIC, f"{i}".encode(), partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        wait_until(lambda: all(isr == [0, 1, 2] for _, isr in isrs().values()), what="full ISRs over SASL_SSL")
        victim = isrs()[0][0]
        cluster.brokers[victim].kill()
        wait_until(lambda: all(leader not in (victim, -1) for leader, _ in isrs().values()), what="new leaders")
        for i in range(COUNT, 2 * COUNT):
            producer.produce(TOPIC, f"{i}".encode(), partition=i % PARTITIONS)
        assert producer.flush(30) == 0

        consumer = Consumer({**config, "group.id": "check", "enable.auto.commit": False})
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got, deadline = [], time.monotonic() + 30
        while len(got) < 2 * COUNT and time.monotonic() < deadline:
            got += [int(m.value()) for m in consumer.consume(1000, timeout=1) if m.error() is None]
        consumer.close()
        assert sorted(got) == list(range(2 * COUNT))
        assert "SASL_SSL://127.0.0.1" in cluster.brokers[1].output()
        # KIP-368 every 3 s: the brokers' fetchers and the clients re-authenticated in time
        assert "SASL session expired" not in cluster.output()
    finally:
        stop_all([cluster])
