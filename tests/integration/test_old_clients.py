"""Clients of the generations Kafka 3.9 serves: Sarama 1.22 (OffsetCommit v1), kafka-python 1.4
(its own classes of each API's oldest version) and 3, segmentio/kafka-go 0.2.1."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from clients import go_program, make_messages, sarama_group_consume, sarama_produce
from raw_protocol import RawClient, assert_healthy

OLD_KAFKA_PYTHON = "1.4.7"
OFFSET_FOR_LEADER_EPOCH = 23


def create_topic(bootstrap, topic, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic is created
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def committed(bootstrap, group, topic, partitions) -> list[int | None]:
    """The group's offsets as kafka-python 3 (the test process's) reads them."""
    from kafka import KafkaConsumer, TopicPartition
    reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return [reader.committed(TopicPartition(topic, p)) for p in range(partitions)]
    finally:
        reader.close()


def test_a_sarama_group_resumes_after_its_commits(broker):
    """Sarama 1.22 commits with OffsetCommit v1 (no retention set); the commits are there for
    another client, and a restarted member reads only what came after them."""
    topic = group = "sarama-resumes"
    create_topic(broker.bootstrap, topic, 3)
    first = make_messages(300, 3)
    sarama_produce(broker.bootstrap, topic, first)
    assert len(sarama_group_consume(broker.bootstrap, topic, group, len(first))) == len(first)
    ends = [sum(1 for m in first if m[0] == p) for p in range(3)]
    assert committed(broker.bootstrap, group, topic, 3) == ends
    second = make_messages(60, 3)
    sarama_produce(broker.bootstrap, topic, second)
    again = sarama_group_consume(broker.bootstrap, topic, group, len(second))
    assert sorted((m.partition, m.offset) for m in again) == sorted(
        (p, ends[p] + i) for p in range(3) for i in range(sum(1 for m in second if m[0] == p)))
    assert committed(broker.bootstrap, group, topic, 3) == [ends[p] + sum(1 for m in second if m[0] == p)
                                                            for p in range(3)]


@pytest.fixture(scope="session")
def old_kafka_python() -> Path:
    """kafka-python 1.4.x from PyPI, in a directory of its own beside the venv (the venv's
    kafka-python is 3.x, which other tests use); installed once."""
    target = Path(sys.prefix) / "test-clients" / f"kafka-python-{OLD_KAFKA_PYTHON}"
    if not (target / "kafka" / "__init__.py").exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = tempfile.mkdtemp(dir=target.parent)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                        "--target", staging, f"kafka-python=={OLD_KAFKA_PYTHON}"], check=True, timeout=300)
        try:
            os.rename(staging, target)
        except OSError:  # another worker installed it first
            assert (target / "kafka" / "__init__.py").exists()
    return target


def test_kafka_python_1_4_round_trips_and_speaks_the_oldest_versions(broker, old_kafka_python):
    topic, group = "old-kafka-python", "old-kafka-python"
    result = subprocess.run([sys.executable, str(Path(__file__).parent / "old_kafka_python.py"), broker.bootstrap,
                             topic, group, "40"], env={**os.environ, "PYTHONPATH": str(old_kafka_python)},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    assert out["create_v0"] == [[topic, 0]]
    assert out["create_v1_validate_only"] == [[topic + "-validated", 0, None]]
    assert sorted(v for _, _, v in out["consumed"]) == sorted(f"v{i}" for i in range(40))
    assert out["group_committed"] == [20, 20]
    assert committed(broker.bootstrap, group, topic, 2) == [20, 20]  # read back by kafka-python 3
    assert out["commit_v0"] == [[topic, [[0, 0]]]]
    # v0's commit is kept as v1's (Kafka 3.9 kept it in ZooKeeper): v0 fetches it, as a newer client
    assert out["fetch_v0"] == [[topic, [[0, 3, "from v0", 0], [1, -1, "", 0]]]]
    assert committed(broker.bootstrap, group + "-v0", topic, 2) == [3, None]
    assert out["list_offsets_v0"] == [[topic, [[0, 0, [20]], [1, 0, [0]]]]]
    [[error, name, configs]] = out["describe_configs_v0"]
    assert (error, name, configs) == (0, topic, [["cleanup.policy", "delete", False, True, False]])
    assert out["describe_acls_v0_error"] == 54  # SECURITY_DISABLED: no authorizer, as Kafka answers
    assert out["delete_v0"] == [[topic + "-gone", 3]]  # UNKNOWN_TOPIC_OR_PARTITION
    # message formats 0 and 1: Produce v0-v2 up-converted, Fetch v0 and v3 down-converted (format 0, 1)
    legacy = out["legacy_round_trip"]
    assert legacy["produced"] == [[1, 0, 20], [1, 0, 22], [1, 0, 23]]
    first_twenty = [(offset, f"k{2 * offset + 1}", f"v{2 * offset + 1}") for offset in range(20)]
    produced_old = [(20, "key", "a"), (21, "key", "b"), (22, "key", "c"), (23, "key", "d"), (24, "key", "e")]
    for version, magic in (("fetch_v0", 0), ("fetch_v3", 1)):
        error, high_watermark, first_magic, records = legacy[version]
        assert (error, high_watermark, first_magic) == (0, 25, magic)
        assert [(o, k, v) for o, _, k, v in records] == first_twenty + produced_old
    assert {ts for _, ts, _, _ in legacy["fetch_v0"][3]} == {None}  # format 0 has no timestamps
    assert [ts for _, ts, _, _ in legacy["fetch_v3"][3][20:]] == [-1, -1, -1, 1_700_000_000_000, 1_700_000_000_001]
    assert_healthy(broker)


def test_kafka_python_1_4_creates_describes_and_deletes_literal_acls_with_v0(start_broker, old_kafka_python):
    broker = start_broker(0, authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                          super_users="User:ANONYMOUS")
    result = subprocess.run([sys.executable, str(Path(__file__).parent / "old_kafka_python.py"), "acls",
                             broker.bootstrap, "guarded"], env={**os.environ, "PYTHONPATH": str(old_kafka_python)},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    acl = ["User:alice", "*", 3, 3]  # READ, ALLOW
    assert out["created"] == [[0, None]]
    assert out["described"] == [0, [[2, "guarded", [acl]]]]
    assert out["deleted"] == [[0, [[0, None, 2, "guarded", *acl]]]]
    assert out["described_after"] == [0, []]
    assert_healthy(broker)


def test_kafka_python_3_group_commits_are_resumed_from(broker):
    from kafka import KafkaConsumer, KafkaProducer
    topic = group = "kafka-python-3"
    create_topic(broker.bootstrap, topic, 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for i in range(30):
        producer.send(topic, value=b"v%d" % i, partition=i % 2)
    producer.flush(30)

    def consume(count):
        consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=15_000)
        got = []
        for record in consumer:
            got.append(record.value)
            if len(got) == count:
                break
        consumer.commit()
        consumer.close()
        return got

    assert sorted(consume(30)) == sorted(b"v%d" % i for i in range(30))
    for i in range(30, 40):
        producer.send(topic, value=b"v%d" % i, partition=i % 2)
    producer.flush(30)
    producer.close()
    assert sorted(consume(10)) == sorted(b"v%d" % i for i in range(30, 40))
    assert committed(broker.bootstrap, group, topic, 2) == [20, 20]


def test_kafka_go_0_2_creates_a_topic_and_round_trips_in_message_format_1(broker):
    """kafka-go 0.2.1 creates its topic with CreateTopics v0, produces with Produce v2 (message
    format 1, up-converted to a format-2 batch) and reads with Fetch v2 (down-converted), as
    Kafka 3.9 serves it; a newer client reads the same records."""
    client = go_program("kafkago")
    subprocess.run([client, "create", broker.bootstrap, "kafka-go", "2"], check=True, timeout=60)
    from confluent_kafka.admin import AdminClient
    topics = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
    assert len(topics["kafka-go"].partitions) == 2
    result = subprocess.run([client, "round-trip", broker.bootstrap, "kafka-go", "5"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [f"v{i}" for i in range(5)]
    from kafka import KafkaConsumer, TopicPartition
    reader = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    reader.assign([TopicPartition("kafka-go", 0)])
    records = [next(reader) for _ in range(5)]
    reader.close()
    assert [(r.offset, r.key, r.value) for r in records] == [(i, b"k%d" % i, b"v%d" % i) for i in range(5)]
    assert_healthy(broker)


def test_a_topic_without_down_conversion_refuses_kafka_go_s_fetch(broker):
    """message.downconversion.enable=false: Fetch v2 gets UNSUPPORTED_VERSION for the topic, as
    Kafka 3.9 answers; its Produce v2 is still up-converted."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("no-down-conversion", 1, 1,
                                  config={"message.downconversion.enable": "false"})])["no-down-conversion"].result(30)
    result = subprocess.run([go_program("kafkago"), "round-trip", broker.bootstrap, "no-down-conversion", "2"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and result.stderr.startswith("read:"), result.stderr
    assert "Unsupported Version" in result.stderr, result.stderr
    assert_healthy(broker)


def test_offset_for_leader_epoch_v0_and_v1(broker):
    """Without the current leader epoch (KIP-320), v0 without the leader epoch in the answer."""
    from confluent_kafka import Producer

    from weir.protocol.codec import build, request_schema
    with RawClient(broker.port) as client:
        create_topic(broker.bootstrap, "epochs", 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(3):
            producer.produce("epochs", b"v%d" % i, partition=0)
        producer.flush(30)
        for version in (0, 1):
            request = build(request_schema(OFFSET_FOR_LEADER_EPOCH, version), {"topics": [
                {"topic": "epochs", "partitions": [{"partition": 0, "leader_epoch": 0}]}]})
            [partition] = client.call(OFFSET_FOR_LEADER_EPOCH, version, request).topics[0].partitions
            assert (partition.error_code, partition.partition, partition.end_offset) == (0, 0, 3)
            assert getattr(partition, "leader_epoch", 0) == 0
    assert_healthy(broker)
