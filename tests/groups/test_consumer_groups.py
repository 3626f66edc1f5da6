"""Consumer groups with real clients (confluent-kafka, kafka-python) against real brokers.

Each consumer runs in a thread, commits synchronously after every message it hands to the
application, and records whether that commit succeeded. The checks: every produced record is
consumed; a record consumed twice had its first commit fail (nothing is read twice past a
committed offset); and the partitions are shared out as the assignor says.
"""

import asyncio
import threading
from collections import Counter

from waiting import wait_until

from weir.client import BrokerConnection
from weir.groups.placement import partition_for
from weir.protocol.versions import ApiKey

GROUP_SETTINGS = {"offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0",
                  "num.partitions": "6"}


def create_topic(bootstrap: str, name: str, partitions: int, replication: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication)])[name].result(30)


def produce(bootstrap: str, topic: str, count: int, partitions: int, start: int = 0) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(60) == 0


class ConfluentMember(threading.Thread):
    """One consumer of the group in a thread; `consumed` holds (partition, offset, committed)."""

    def __init__(self, bootstrap: str, group: str, topic: str, log: list, **extra) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Consumer
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                                  "heartbeat.interval.ms": 500, "topic.metadata.refresh.interval.ms": 1000,
                                  **extra})
        self.consumer.subscribe([topic])
        self.log = log
        self.stopping = threading.Event()
        self.assignment: list[int] = []
        self.lock = threading.Lock()

    def run(self) -> None:
        from confluent_kafka import KafkaException
        while not self.stopping.is_set():
            msg = self.consumer.poll(0.2)
            self.assignment = sorted(tp.partition for tp in self.consumer.assignment())
            if msg is None or msg.error():
                continue
            try:
                self.consumer.commit(message=msg, asynchronous=False)
                committed = True
            except KafkaException:
                committed = False
            self.log.append((msg.partition(), msg.offset(), committed))

    def leave(self) -> None:
        self.stopping.set()
        self.join(30)
        self.consumer.close()


def check_exactly_once_past_commits(log: list, expected: set) -> None:
    seen = Counter((p, o) for p, o, _ in log)
    assert set(seen) == expected, f"missing {sorted(expected - set(seen))[:10]}"
    first_commit_ok: dict = {}
    for p, o, committed in log:
        if (p, o) in first_commit_ok:
            assert not first_commit_ok[(p, o)], f"{p}@{o} read again although its commit succeeded"
        else:
            first_commit_ok[(p, o)] = committed


def expected_offsets(count: int, partitions: int) -> set:
    per = Counter(i % partitions for i in range(count))
    return {(p, o) for p, n in per.items() for o in range(n)}


def find_coordinator(port: int, group: str) -> int:
    async def ask() -> int:
        async with await BrokerConnection.open("127.0.0.1", port, timeout_s=10) as conn:
            for _ in range(100):
                response = await conn.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
                if response.error_code == 0:
                    return response.node_id
                await asyncio.sleep(0.1)
            raise AssertionError(f"no coordinator for {group}: {response}")
    return asyncio.run(ask())


# -- tests ------------------------------------------------------------------------------

def test_three_consumers_share_six_partitions_and_one_leaving_rebalances(start_broker):
    broker = start_broker(0, **GROUP_SETTINGS)
    topic, partitions = "shared", 6
    create_topic(broker.bootstrap, topic, partitions)
    log: list = []
    members = [ConfluentMember(broker.bootstrap, "g-share", topic, log) for _ in range(3)]
    for m in members:
        m.start()
    wait_until(lambda: sorted(len(m.assignment) for m in members) == [2, 2, 2], "2 partitions each", 30)
    assert sorted(p for m in members for p in m.assignment) == list(range(partitions))

    produce(broker.bootstrap, topic, 300, partitions)
    wait_until(lambda: len({(p, o) for p, o, _ in log}) >= 300, "first 300 consumed", 30)
    members[0].leave()
    produce(broker.bootstrap, topic, 300, partitions, start=300)
    rest = members[1:]
    wait_until(lambda: sorted(len(m.assignment) for m in rest) == [3, 3], "3 partitions each after the leave", 30)
    wait_until(lambda: len({(p, o) for p, o, _ in log}) >= 600, "all 600 consumed", 30)
    for m in rest:
        m.leave()
    check_exactly_once_past_commits(log, expected_offsets(600, partitions))


def test_kafka_python_group_commits_and_admin_apis(start_broker):
    from kafka import KafkaAdminClient, KafkaConsumer
    broker = start_broker(0, **GROUP_SETTINGS)
    topic, partitions = "kp", 4
    create_topic(broker.bootstrap, topic, partitions)
    produce(broker.bootstrap, topic, 100, partitions)

    def consumer():
        return KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id="g-kp", enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
                             consumer_timeout_ms=5000)

    first = consumer()
    seen = []
    for msg in first:
        seen.append((msg.partition, msg.offset))
        if len(seen) == 60:
            first.commit()
            break
    assert len(seen) == 60
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    [listed] = [g for g in admin.list_groups() if g["group_id"] == "g-kp"]
    assert listed["protocol_type"] == "consumer", listed
    described = admin.describe_groups(["g-kp"])["g-kp"]
    assert described["group_state"] == "Stable" and len(described["members"]) == 1, described
    first.close()  # sends LeaveGroup

    def committed_total() -> int:
        offsets = admin.list_group_offsets("g-kp")["g-kp"]
        return sum(meta.offset for meta in offsets.values() if meta.offset >= 0)

    assert committed_total() == 60

    second = consumer()
    rest = [(msg.partition, msg.offset) for msg in second]
    second.commit()
    second.close()
    assert sorted(seen + rest) == sorted(expected_offsets(100, partitions))
    assert committed_total() == 100
    assert admin.describe_groups(["g-kp"])["g-kp"]["group_state"] == "Empty"
    assert admin.delete_groups(["g-kp"]) == {"g-kp": "OK"}
    assert "g-kp" not in [g["group_id"] for g in admin.list_groups()]
    assert committed_total() == 0
    admin.close()


def test_group_survives_killing_its_coordinator(start_cluster):
    cluster = start_cluster(**GROUP_SETTINGS, **{"offsets.topic.replication.factor": "3",
                                                 "default.replication.factor": "3"})
    topic, partitions = "failover", 6
    create_topic(cluster.bootstrap, topic, partitions, replication=3)
    log: list = []
    members = [ConfluentMember(cluster.bootstrap, "g-failover", topic, log) for _ in range(2)]
    for m in members:
        m.start()
    wait_until(lambda: sorted(len(m.assignment) for m in members) == [3, 3], "3 partitions each", 40)
    produce(cluster.bootstrap, topic, 300, partitions)
    wait_until(lambda: len({(p, o) for p, o, _ in log}) >= 300, "first 300 consumed", 30)

    coordinator = find_coordinator(cluster.brokers[0].port, "g-failover")
    cluster.brokers[coordinator].kill()
    survivor = next(b for b in cluster.brokers if b.running)
    produce(survivor.bootstrap, topic, 300, partitions, start=300)
    wait_until(lambda: len({(p, o) for p, o, _ in log}) >= 600, "all 600 consumed after the failover", 60)
    new_coordinator = find_coordinator(survivor.port, "g-failover")
    assert new_coordinator != coordinator
    index = partition_for("g-failover", 3)
    assert f"__consumer_offsets-{index}: coordinating 1 group(s)" in cluster.brokers[new_coordinator].output()
    for m in members:
        m.leave()
    check_exactly_once_past_commits(log, expected_offsets(600, partitions))
