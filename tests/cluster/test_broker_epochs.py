"""Broker epochs (KIP-380) with real brokers and ZooKeeper: a broker that is killed and back before
anyone noticed leads nothing on the strength of the state its previous incarnation left; the
controller treats it as bounced and writes new states (a higher leader epoch), and nothing
acknowledged is lost."""

import datetime
import json

from cluster_tools import SteadyProducer, admin, create_topic, partition_metadata, read_all, wait_until
from confluent_kafka import Producer
from integration.raw_protocol import FETCH, NONE, RawClient, metadata
from kazoo.client import KazooClient
from kio.schema.alter_partition.v3.request import AlterPartitionRequest, BrokerState, PartitionData, TopicData
from kio.schema.fetch.v15.request import FetchPartition, FetchRequest, FetchTopic, ReplicaState

ALTER_PARTITION = 56
NOT_LEADER_OR_FOLLOWER = 6
STALE_BROKER_EPOCH = 77


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

    # Until the controller has seen the bounce, Metadata still shows the state the killed broker
    # left (it leads, it is in the ISR): only a higher leader epoch says the bounce was handled.
    def back_in_sync_in_a_new_epoch():
        leader, _, isr = partition_metadata(cluster.bootstrap, "bounce")[0]
        return (leader_epoch(cluster.zookeeper_connect, "bounce") > epoch_before
                and leader >= 0 and victim in isr)
    wait_until(back_in_sync_in_a_new_epoch, "a new leader epoch with the restarted broker in the ISR")
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


def registration_epochs(zookeeper_connect: str) -> dict[int, int]:
    """Each live broker's epoch: the czxid of its registration znode."""
    client = KazooClient(hosts=zookeeper_connect)
    client.start(timeout=15)
    try:
        return {int(b): client.get(f"/brokers/ids/{b}")[1].czxid for b in client.get_children("/brokers/ids")}
    finally:
        client.stop()
        client.close()


def test_fetches_and_isr_changes_of_an_older_incarnation_are_refused(cluster):
    """KIP-903 on the real request path: a follower's Fetch (v15) carries its broker epoch, and once
    the leader has seen the current one, a fetch of an older incarnation (a late packet of a process
    that restarted, maybe without its tail) is refused instead of moving the follower's LEO; an
    AlterPartition (v3) from an older incarnation of a leader is refused by the controller."""
    create_topic(cluster.bootstrap, "incarnations", 1, 3)
    wait_until(lambda: len(partition_metadata(cluster.bootstrap, "incarnations")[0][2]) == 3, "a full ISR")
    leader, replicas, _ = partition_metadata(cluster.bootstrap, "incarnations")[0]
    follower = next(r for r in replicas if r != leader)
    epochs = registration_epochs(cluster.zookeeper_connect)
    with RawClient(cluster.brokers[leader].port) as client:
        topic_id = metadata(client, ["incarnations"]).topics[0].topic_id

        def follower_fetch(replica_epoch: int) -> int:
            response = client.call(FETCH, 15, FetchRequest(
                replica_state=ReplicaState(replica_id=follower, replica_epoch=replica_epoch),
                max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20, topics=(FetchTopic(
                    topic_id=topic_id, partitions=(FetchPartition(partition=0, fetch_offset=0,
                                                                  partition_max_bytes=1 << 20),)),),
                forgotten_topics_data=()))
            return response.responses[0].partitions[0].error_code

        assert follower_fetch(epochs[follower]) == NONE
        assert follower_fetch(epochs[follower] - 1) == NOT_LEADER_OR_FOLLOWER
    controller = admin(cluster.bootstrap).list_topics(timeout=10).controller_id
    with RawClient(cluster.brokers[controller].port) as client:
        response = client.call(ALTER_PARTITION, 3, AlterPartitionRequest(
            broker_id=leader, broker_epoch=epochs[leader] - 1, topics=(TopicData(topic_id=topic_id, partitions=(
                PartitionData(partition_index=0, leader_epoch=0, partition_epoch=0, new_isr_with_epochs=(
                    BrokerState(broker_id=leader, broker_epoch=epochs[leader] - 1),)),)),)))
        assert response.error_code == STALE_BROKER_EPOCH
    assert len(partition_metadata(cluster.bootstrap, "incarnations")[0][2]) == 3
