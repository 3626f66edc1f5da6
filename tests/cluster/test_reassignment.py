"""Partition reassignment (KIP-455) on a real cluster under acks=all load, driven by two
independent admin clients (kafka-python; kafkajs): the new replica catches up before the old one
leaves, leadership moves to the target, no acknowledged record is lost, and the replica that left
deletes its copy. (confluent-kafka's admin client has no reassignment API; it produces and reads.)"""

import json
import subprocess
import sys
import time
from pathlib import Path

from cluster_tools import SteadyProducer, admin, create_topic, partition_metadata, read_all, wait_until
from confluent_kafka import Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPythonTopicPartition

from weir.lab.local_cluster import BrokerProcess

JS_CLIENTS = Path(__file__).parent.parent / "js"


def reassign_with_kafka_python(bootstrap: str, topic: str, partition: int, replicas: list[int]) -> None:
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        tp = KafkaPythonTopicPartition(topic, partition)
        assert client.alter_partition_reassignments({tp: replicas}) == {tp: None}
        wait_until(lambda: client.list_partition_reassignments() == {}, "the reassignment to finish")
    finally:
        client.close()


def reassign_with_kafkajs(bootstrap: str, topic: str, partition: int, replicas: list[int]) -> None:
    subprocess.run(["node", str(JS_CLIENTS / "reassign.js"), bootstrap, topic, str(partition),
                    ",".join(map(str, replicas))], check=True, timeout=90)


def test_partitions_move_from_0_1_to_1_2_under_load_losing_nothing(cluster):
    """Partition 0 moved by kafka-python's admin client, then partition 1 by kafkajs's."""
    client = admin(cluster.bootstrap)
    client.create_topics([NewTopic("moving", 2, replica_assignment=[[0, 1], [0, 1]])])["moving"].result(30)
    wait_until(lambda: [m[0] for m in partition_metadata(cluster.bootstrap, "moving").values()] == [0, 0],
               "broker 0 to lead")
    producer = SteadyProducer(cluster.bootstrap, "moving", 2, **{"enable.idempotence": True}).start()
    producer.wait_acked(500)

    for partition, reassign in enumerate((reassign_with_kafka_python, reassign_with_kafkajs)):
        reassign(cluster.bootstrap, "moving", partition, [1, 2])
        # the controller is done; the broker answering Metadata learns the assignment through its watch
        wait_until(lambda: partition_metadata(cluster.bootstrap, "moving")[partition] == (1, [1, 2], [1, 2]),
                   "Metadata to show the new replicas")
        acked_before = len(producer.acked)
        producer.wait_acked(acked_before + 500)  # the new leader takes writes
    producer.stop()

    assert not producer.errors
    stored = read_all(cluster.bootstrap, "moving", 2)
    stored = stored[0] + stored[1]
    assert producer.acked <= set(stored) and len(stored) == len(set(stored))
    gone = [cluster.brokers[0].data_dir / f"moving-{p}" for p in (0, 1)]
    wait_until(lambda: not any(d.exists() for d in gone), "broker 0 to delete the replicas it no longer holds")


def weir(bootstrap: str, *args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "weir.cli.main", "reassign-partitions", "--bootstrap-server", bootstrap,
                             *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result.stdout


def test_weir_reassign_partitions_spreads_a_topic_onto_a_broker_added_to_the_running_cluster(cluster, tmp_path):
    create_topic(cluster.bootstrap, "spread", 2, 2)
    values = [b"%d" % i for i in range(300)]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i, v in enumerate(values):
        producer.produce("spread", v, partition=i % 2)
    assert producer.flush(30) == 0
    settings = {k: v for k, v in cluster.brokers[0].overrides.items() if k not in ("broker.id", "log.dirs", "listeners")}
    added = BrokerProcess(3, tmp_path / "broker-3", cluster.zookeeper_connect, overrides=settings).start()
    try:
        to_move = tmp_path / "topics.json"
        to_move.write_text(json.dumps({"topics": [{"topic": "spread"}], "version": 1}))
        generated = weir(cluster.bootstrap, "--generate", "--topics-to-move-json-file", str(to_move),
                         "--broker-list", "1,2,3")
        current, proposed = (json.loads(line) for line in generated.splitlines() if line.startswith("{"))
        assert [p["replicas"] for p in current["partitions"]] == [list(r) for _, r, _ in (
            partition_metadata(cluster.bootstrap, "spread")[p] for p in (0, 1))]
        placed = {p["partition"]: p["replicas"] for p in proposed["partitions"]}
        assert 3 in placed[0] + placed[1] and all(len(r) == 2 and set(r) <= {1, 2, 3} for r in placed.values())

        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps(proposed))
        assert "Successfully started partition reassignments for spread-0,spread-1" in weir(
            cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan))
        wait_until(lambda: weir(cluster.bootstrap, "--verify", "--reassignment-json-file", str(plan)).count(
            "is completed.") == 2, "both moves to complete")
        assert weir(cluster.bootstrap, "--list") == "No partition reassignments found.\n"
        assert "None of the specified partition moves are active." in weir(
            cluster.bootstrap, "--cancel", "--reassignment-json-file", str(plan))
        metadata = partition_metadata(cluster.bootstrap, "spread")
        assert {p: (replicas, sorted(isr)) for p, (_, replicas, isr) in metadata.items()} == {
            p: (r, sorted(r)) for p, r in placed.items()}
        stored = read_all(cluster.bootstrap, "spread", 2)
        assert stored == {p: values[p::2] for p in (0, 1)}
    finally:
        added.stop()


def test_a_broker_down_while_its_replica_moved_away_deletes_it_when_it_returns(cluster):
    client = admin(cluster.bootstrap)
    client.create_topics([NewTopic("left", 1, replica_assignment=[[0, 1]])])["left"].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce("left", b"%d" % i)
    assert producer.flush(30) == 0
    stale = cluster.brokers[0].data_dir / "left-0"
    assert stale.is_dir()
    cluster.brokers[0].stop()
    wait_until(lambda: set(admin(cluster.bootstrap).list_topics(timeout=10).brokers) == {1, 2},
               "the cluster to see broker 0 gone")  # else an admin client may pick it as controller
    reassign_with_kafka_python(cluster.bootstrap, "left", 0, [1, 2])

    cluster.brokers[0].start()
    wait_until(lambda: not stale.exists(), "broker 0 to delete the copy assigned elsewhere")
    assert read_all(cluster.bootstrap, "left", 1)[0] == [b"%d" % i for i in range(100)]


def replica_bytes(broker, topic: str) -> int:
    directory = broker.data_dir / f"{topic}-0"
    return sum(f.stat().st_size for f in directory.glob("*.log")) if directory.is_dir() else 0


def test_a_throttled_move_replicates_no_faster_than_the_throttle_until_it_is_lifted(start_cluster, tmp_path):
    """reassign-partitions --throttle as Kafka's: the brokers' dynamic throttle rates and the
    topic's throttled replicas hold the new replica's catch-up to the rate; deleting the rates (a
    dynamic config change, no restart) lets it finish; --verify then clears the throttles."""
    cluster = start_cluster(replica_fetch_max_bytes="65536")
    client = admin(cluster.bootstrap)
    client.create_topics([NewTopic("slow", 1, replica_assignment=[[0, 1]])])["slow"].result(30)
    # small batches: a fetch returns at least one whole batch, whatever its size (KIP-74)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 16384})
    for i in range(2000):
        producer.produce("slow", b"%06d" % i + b"x" * 1000)
    assert producer.flush(30) == 0
    total = replica_bytes(cluster.brokers[0], "slow")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "slow", "partition": 0, "replicas": [0, 1, 2]}]}))
    rate = 100_000

    started = time.monotonic()
    assert "The inter-broker throttle limit was set to 100000 B/s" in weir(
        cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan), "--throttle", str(rate))
    wait_until(lambda: replica_bytes(cluster.brokers[2], "slow") > 0, "the new replica to start")
    while (elapsed := time.monotonic() - started) < 3:  # measure the new replica's progress for 3 s
        # the rate over the time so far, plus what one fetch (before the quota saw it) may bring
        assert replica_bytes(cluster.brokers[2], "slow") <= rate * (elapsed + 1) + 65536
        time.sleep(0.2)
    assert "is still in progress" in weir(cluster.bootstrap, "--verify", "--reassignment-json-file", str(plan))

    lifted = [ConfigResource(ResourceType.BROKER, str(b), incremental_configs=[
        ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)
        for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")]) for b in (0, 1, 2)]
    for resource in lifted:  # librdkafka: one broker resource per request
        client.incremental_alter_configs([resource])[resource].result(30)
    wait_until(lambda: "is completed" in weir(cluster.bootstrap, "--verify", "--reassignment-json-file", str(plan)),
               "the move to complete once the throttle is lifted")
    verified = weir(cluster.bootstrap, "--verify", "--reassignment-json-file", str(plan))
    assert "Clearing topic-level throttles on topic slow" in verified
    assert replica_bytes(cluster.brokers[2], "slow") == total
    resource = ConfigResource(ResourceType.TOPIC, "slow")
    configs = client.describe_configs([resource])[resource].result(30)
    assert configs["leader.replication.throttled.replicas"].value == ""
