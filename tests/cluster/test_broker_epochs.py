"""Broker epochs (KIP-380) with real brokers and ZooKeeper: a broker that is killed and back before
anyone noticed leads nothing on the strength of the state its previous incarnation left; the
controller treats it as bounced and writes new states (a higher leader epoch), and nothing
acknowledged is lost."""

import json

from confluent_kafka import Producer
from kazoo.client import KazooClient

from cluster_tools import SteadyProducer, create_topic, partition_metadata, read_all, wait_until


def leader_epoch(zookeeper_connect: str, topic: str, partition: int = 0) -> int:
    client = KazooClient(hosts=zookeeper_connect)
    client.start(timeout=15)
    try:
        data, _ = client.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return json.loads(data)["leader_epoch"]
    finally:
        client.stop()
        client.close()


def produce_one(bootstrap: str, topic: str, value: bytes) -> None:
    """acks=all, retried until a leader takes it (at most 60 s)."""
    outcome = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000,
                         "retries": 1000, "retry.backoff.ms": 100})
    producer.produce(topic, value, on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(70)
    assert outcome == [None], outcome


def test_leader_killed_and_back_before_its_session_expires_loses_nothing(cluster):
    create_topic(cluster.bootstrap, "bounce", 1, 3, **{"min.insync.replicas": "2"})
    producer = SteadyProducer(cluster.bootstrap, "bounce", 1).start()
    producer.wait_acked(2000)
    victim = partition_metadata(cluster.bootstrap, "bounce")[0][0]
    epoch_before = leader_epoch(cluster.zookeeper_connect, "bounce")

    cluster.brokers[victim].kill()
    cluster.brokers[victim].start()  # at once: its old registration is still there

    def back_in_sync():
        leader, _, isr = partition_metadata(cluster.bootstrap, "bounce")[0]
        return leader >= 0 and victim in isr
    wait_until(back_in_sync, "the restarted broker back in the ISR")
    assert leader_epoch(cluster.zookeeper_connect, "bounce") > epoch_before
    producer.stop()
    # A fresh producer: the steady one sometimes stalls for a minute after talking to the restarted
    # broker before it registered (seen without broker epochs too; not what this test is about).
    produce_one(cluster.bootstrap, "bounce", b"after")
    records = read_all(cluster.bootstrap, "bounce", 1)
    lost = producer.acked - set(records[0])
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:5]}"
    assert b"after" in records[0]


def test_single_broker_killed_and_restarted_leads_its_partitions_again(broker, zookeeper_connect):
    create_topic(broker.bootstrap, "solo", 2, 1)
    for p in range(2):
        produce_one(broker.bootstrap, "solo", f"before-{p}".encode())
    epochs_before = [leader_epoch(zookeeper_connect, "solo", p) for p in range(2)]

    broker.kill()
    lines_before = len(broker.log_lines)
    broker.start()
    # Its first look at the states (before its controller runs) finds them older than its new
    # registration: it does not lead from them.
    restarted = "".join(broker.log_lines[lines_before:])
    assert "solo-0: not leading from a state written before this broker registered" in restarted

    produce_one(broker.bootstrap, "solo", b"after")
    wait_until(lambda: all(leader == broker.broker_id
                           for leader, _, _ in partition_metadata(broker.bootstrap, "solo").values()),
               "the broker leading both partitions again")
    # It did not take leadership from its previous incarnation's state: its controller rewrote it.
    assert all(leader_epoch(zookeeper_connect, "solo", p) > epochs_before[p] for p in range(2))
    records = read_all(broker.bootstrap, "solo", 2)
    assert {b"before-0", b"before-1", b"after"} <= set(records[0]) | set(records[1])
