"""DescribeClientQuotas and AlterClientQuotas on the wire, as Kafka 3.9's ZooKeeper mode answers
them (kio-built requests), stored in Kafka's ZooKeeper layout beside the SCRAM credentials, applied
by every broker and kept over a restart."""

import datetime
import importlib
import json
import time

from kazoo.client import KazooClient
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.integration.raw_protocol import PRODUCE, PRODUCE_V, RawClient, assert_healthy
from tests.scraping import broker_metrics
from tests.waiting import wait_until
from weir.protocol.errors import ErrorCode
from weir.protocol.records import encode_batch

DESCRIBE, ALTER = 48, 49
CLIENT = "bad-input-test"  # RawClient's client id


def alter(client: RawClient, entries, validate_only: bool = False, version: int = 1) -> list[tuple[int, str]]:
    """entries: [([(type, name)], [(key, value or None to remove)])] → [(error, message)]."""
    kio = importlib.import_module(f"kio.schema.alter_client_quotas.v{version}.request")
    request = kio.AlterClientQuotasRequest(entries=tuple(kio.EntryData(
        entity=tuple(kio.EntityData(entity_type=t, entity_name=n) for t, n in entity),
        ops=tuple(kio.OpData(key=k, value=float(v or 0), remove=v is None) for k, v in ops))
        for entity, ops in entries), validate_only=validate_only)
    response = client.call(ALTER, version, request)
    return [(e.error_code, e.error_message) for e in response.entries]


def describe(client: RawClient, components=(), strict: bool = False, version: int = 1):
    """→ (error, {((type, name), ...): {key: value}})"""
    kio = importlib.import_module(f"kio.schema.describe_client_quotas.v{version}.request")
    response = client.call(DESCRIBE, version, kio.DescribeClientQuotasRequest(
        components=tuple(kio.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components),
        strict=strict))
    entries = {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
               for entry in response.entries or ()}
    return response.error_code, entries


def produce_throttle_ms(client: RawClient, size: int) -> int:
    """A Produce of `size` bytes (to a topic that need not exist): its throttle_time_ms."""
    response = client.call(PRODUCE, PRODUCE_V, ProduceRequest(
        transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=10),
        topic_data=(TopicProduceData(name="no-such-topic", partition_data=(
            PartitionProduceData(index=0, records=encode_batch([b"x" * size])),)),)))
    return int(response.throttle_time.total_seconds() * 1000)


def znode(zookeeper_connect: str, path: str):
    zk = KazooClient(hosts=zookeeper_connect)
    zk.start()
    try:
        if path.endswith("/"):
            return sorted(zk.get_children(path.rstrip("/")))
        return json.loads(zk.get(path)[0])
    finally:
        zk.stop()


def test_quotas_are_altered_and_described_as_kafka_and_stored_in_its_zookeeper_layout(broker, zookeeper_connect):
    with RawClient(broker.port) as client:
        for version in (0, 1):
            assert alter(client, [([("client-id", "c1")], [("producer_byte_rate", 1048576),
                                                          ("consumer_byte_rate", 2097152)])], version=version) == [
                (0, None)]
        assert alter(client, [
            ([("user", "user with spaces")], [("request_percentage", 12.5)]),
            ([("user", None), ("client-id", None)], [("producer_byte_rate", 1000)]),
            ([("ip", None)], [("connection_creation_rate", 10)]),
            ([("ip", "10.0.0.1")], [("connection_creation_rate", 5)]),
        ]) == [(0, None)] * 4
        assert alter(client, [([("client-id", "c2")], [("producer_byte_rate", 1)])], validate_only=True) == [(0, None)]
        bad = alter(client, [
            ([("client-id", "c3")], [("bogus", 1)]),
            ([("client-id", "c3")], [("producer_byte_rate", -5)]),
            ([("client-id", "c3")], [("producer_byte_rate", 10.5)]),
            ([("group", "g")], [("producer_byte_rate", 1)]),
            ([("user", "")], [("producer_byte_rate", 1)]),
            ([], [("producer_byte_rate", 1)]),
            ([("user", "u"), ("ip", "10.0.0.2")], [("producer_byte_rate", 1)]),
            ([("ip", "no such host")], [("connection_creation_rate", 1)]),
            ([("ip", "10.0.0.3")], [("producer_byte_rate", 1)]),
        ])
        assert [code for code, _ in bad] == [ErrorCode.invalid_request] * 9
        assert bad[0][1] == "Invalid configuration key bogus" and "must be greater than 0" in bad[1][1]

        code, everything = describe(client)
        assert code == 0 and everything == {
            (("client-id", "c1"),): {"consumer_byte_rate": 2097152.0, "producer_byte_rate": 1048576.0},
            (("user", "user with spaces"),): {"request_percentage": 12.5},
            (("client-id", None), ("user", None)): {"producer_byte_rate": 1000.0},
            (("ip", None),): {"connection_creation_rate": 10.0},
            (("ip", "10.0.0.1"),): {"connection_creation_rate": 5.0},
        }
        assert describe(client, [("client-id", 0, "c1")], strict=True)[1] == {
            (("client-id", "c1"),): {"consumer_byte_rate": 2097152.0, "producer_byte_rate": 1048576.0}}
        assert list(describe(client, [("user", 1, None)])[1]) == [(("client-id", None), ("user", None))]
        assert describe(client, [("other", 0, "x")]) == (ErrorCode.unsupported_version, {})
        assert describe(client, [("ip", 2, None), ("user", 2, None)]) == (ErrorCode.invalid_request, {})

        assert alter(client, [([("client-id", "c1")], [("consumer_byte_rate", None)])]) == [(0, None)]
        assert describe(client, [("client-id", 0, "c1")])[1] == {(("client-id", "c1"),): {"producer_byte_rate": 1048576.0}}
        assert alter(client, [([("user", None), ("client-id", None)], [("producer_byte_rate", None)])]) == [(0, None)]
        assert_healthy(broker)

    # Kafka's ZooKeeper layout: sanitized names, <default>, a notice per change
    assert znode(zookeeper_connect, "/config/clients/c1") == {"version": 1, "config": {"producer_byte_rate": "1048576"}}
    assert znode(zookeeper_connect, "/config/users/user%20with%20spaces") == {
        "version": 1, "config": {"request_percentage": "12.5"}}
    assert znode(zookeeper_connect, "/config/ips/<default>")["config"] == {"connection_creation_rate": "10"}
    assert znode(zookeeper_connect, "/config/users/") == ["user%20with%20spaces"]  # <default>/clients/<default> gone
    notices = znode(zookeeper_connect, "/config/changes/")
    assert len(notices) == 8 and all(n.startswith("config_change_") for n in notices)
    assert znode(zookeeper_connect, f"/config/changes/{notices[-1]}") == {
        "version": 2, "entity_path": "users/<default>/clients/<default>"}


def test_a_users_quotas_and_scram_credentials_share_its_znode(broker, zookeeper_connect):
    with RawClient(broker.port) as client:
        assert alter(client, [([("user", "alice")], [("producer_byte_rate", 5000)])]) == [(0, None)]
    zk = KazooClient(hosts=zookeeper_connect)
    zk.start()
    try:
        config = json.loads(zk.get("/config/users/alice")[0])["config"]
        config["SCRAM-SHA-256"] = "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096"
        zk.set("/config/users/alice", json.dumps({"version": 1, "config": config}).encode())
    finally:
        zk.stop()
    with RawClient(broker.port) as client:
        assert alter(client, [([("user", "alice")], [("producer_byte_rate", None), ("consumer_byte_rate", 7000)])]) == [
            (0, None)]
        assert describe(client, [("user", 0, "alice")], strict=True)[1] == {
            (("user", "alice"),): {"consumer_byte_rate": 7000.0}}
    assert znode(zookeeper_connect, "/config/users/alice")["config"] == {
        "consumer_byte_rate": "7000", "SCRAM-SHA-256": "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096"}


def test_a_quota_set_through_one_broker_holds_on_another_and_after_a_restart(start_broker):
    first, second = start_broker(0), start_broker(1, **{"metrics.port": "0"})
    with RawClient(first.port) as client:
        assert produce_throttle_ms(client, 64 * 1024) == 0  # no quotas: never throttled
        assert alter(client, [([("client-id", CLIENT)], [("producer_byte_rate", 1024)])]) == [(0, None)]

    def throttled_by(broker) -> bool:
        with RawClient(broker.port) as client:
            return produce_throttle_ms(client, 64 * 1024) > 0

    wait_until(lambda: throttled_by(second), "the quota set through broker 0 to hold on broker 1")
    metrics = broker_metrics(second)  # Kafka's kafka.server:type=Produce,user=,client-id= byte-rate, throttle-time
    [(labels, throttle)] = metrics["kafka_server_produce_throttle_time"]
    assert labels == {"user": "", "client_id": CLIENT} and throttle > 0
    assert metrics["kafka_server_produce_byte_rate"][0][1] > 1024
    second.stop()
    second.start()
    assert throttled_by(second), "the quota holds after a restart"


def create_topics(client: RawClient, version: int, topics: dict[str, int]):
    kio = importlib.import_module(f"kio.schema.create_topics.v{version}.request")
    response = client.call(19, version, kio.CreateTopicsRequest(
        topics=tuple(kio.CreatableTopic(name=name, num_partitions=n, replication_factor=1, assignments=(), configs=())
                     for name, n in topics.items()),
        timeout=datetime.timedelta(seconds=30), validate_only=False))
    return {t.name: t.error_code for t in response.topics}, int(response.throttle_time.total_seconds() * 1000)


def test_controller_mutations_over_the_quota_are_refused_or_throttled_as_kip_599(start_broker):
    broker = start_broker(controller_quota_window_num="2")  # a bucket of two seconds' worth: 2 partitions
    with RawClient(broker.port) as client:
        assert alter(client, [([("user", None)], [("controller_mutation_rate", 1)])]) == [(0, None)]
        errors, throttle = create_topics(client, 7, {"a": 2, "b": 1, "c": 1})
        # a empties the bucket, b overdraws it (one mutation may), c finds it below zero
        assert errors == {"a": 0, "b": 0, "c": ErrorCode.throttling_quota_exceeded}
        assert 500 <= throttle <= 1000
        errors, throttle = create_topics(client, 5, {"d": 3})  # before v6: created, and the client throttled
        assert errors == {"d": 0} and 2000 <= throttle <= 4000


def test_connections_over_an_ips_creation_rate_are_closed_unserved_as_kip_612(start_broker):
    broker = start_broker(quota_window_num="2")  # the rate over at least one second
    with RawClient(broker.port) as client:
        assert alter(client, [([("ip", "127.0.0.1")], [("connection_creation_rate", 1)])]) == [(0, None)]
    with RawClient(broker.port) as first:
        assert first.api_versions_ok()  # one a second is allowed
        with RawClient(broker.port) as second:
            second.send(b"\x00\x00\x00\x01\x00")  # read by nobody
            second.assert_closed_by_broker()
        assert first.api_versions_ok()
    assert "Traceback" not in broker.output()


def test_a_client_over_its_request_percentage_is_throttled_and_muted(broker):
    kio = importlib.import_module("kio.schema.describe_client_quotas.v1.request")

    def throttle_ms(client: RawClient) -> int:
        response = client.call(DESCRIBE, 1, kio.DescribeClientQuotasRequest(components=(), strict=False))
        return int(response.throttle_time.total_seconds() * 1000)

    with RawClient(broker.port) as client:
        assert alter(client, [([("client-id", CLIENT)], [("request_percentage", 0.001)])]) == [(0, None)]
        for _ in range(500):  # each takes the broker's loop some 0.1 ms: 0.01 %/s over ten seconds
            throttle = throttle_ms(client)
            if throttle:
                break
        assert 0 < throttle <= 1000  # bounded by one window, as Kafka's request quota
        answered = time.monotonic()
        throttle_ms(client)  # read only once the client is unmuted
        assert time.monotonic() - answered >= throttle / 1000 * 0.8
