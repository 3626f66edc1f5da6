"""`weir up` as a user runs it (a real process with ZooKeeper and three brokers), broken with
kill -9 and `weir lab`, watched through a real Kafka client."""

import os
import signal
import threading
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from lab import Up
from processes import children_of, command_line, wait_until_gone
from waiting import wait_until, watermarks

from weir.lab.local_cluster import CLUSTER_STOP_TIMEOUT_S, ZOOKEEPER_STOP_TIMEOUT_S

TOPIC = "lab"


@pytest.fixture
def up(tmp_path):
    running = Up(tmp_path / "data", "--restart-backoff-ms", "200")
    yield running
    if running.proc.poll() is None:
        running.stop()


def leader_and_isr(admin: AdminClient) -> tuple[int, list[int]]:
    partition = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
    return partition.leader, sorted(partition.isrs)


def test_a_killed_leader_is_restarted_and_rejoins_the_isr_with_no_acknowledged_record_lost(up):
    admin = AdminClient({"bootstrap.servers": up.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    acked: set[bytes] = set()
    failed: list = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": up.bootstrap, "acks": "all", "linger.ms": 5,
                             "message.timeout.ms": 30000})

        def delivered(err, msg):
            (failed.append(err) if err else acked.add(msg.value()))
        i = 0
        while not stop.is_set():
            producer.produce(TOPIC, f"v-{i}".encode(), partition=0, on_delivery=delivered)
            producer.poll(0.002)
            i += 1
        producer.flush(60)
    writer = threading.Thread(target=produce)
    writer.start()
    try:
        wait_until(lambda: len(acked) >= 500, "records acknowledged before the kill")
        leader, isr = leader_and_isr(admin)
        assert isr == [0, 1, 2]
        os.kill(up.status()[leader]["pid"], signal.SIGKILL)  # as a user would, from outside
        wait_until(lambda: up.said(f"broker {leader} died (killed by SIGKILL)"), "weir up to see the death")
        before = len(acked)
        wait_until(lambda: len(acked) >= before + 500, "the producer to go on after the failover")
        wait_until(lambda: up.said(f"broker {leader} is up"), "the killed broker to be restarted")
        wait_until(lambda: leader_and_isr(admin)[1] == [0, 1, 2], "the restarted broker back in the ISR", 60)
    finally:
        stop.set()
        writer.join(90)
    assert up.proc.poll() is None, "weir up still runs"

    high = watermarks(up.bootstrap, TOPIC)[1]  # a preferred-leader election may be under way
    consumer = Consumer({"bootstrap.servers": up.bootstrap, "group.id": "lab-check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen: set[bytes] = set()
    read = 0
    while read < high:
        message = consumer.poll(10)
        assert message is not None, f"read {read} of {high}"
        if message.error() is None:
            seen.add(message.value())
            read = message.offset() + 1
    consumer.close()
    assert acked and not acked - seen, f"{len(acked - seen)} acknowledged records lost"


def test_lab_commands_stop_pause_and_start_one_broker_and_ctrl_c_stops_everything(up):
    assert {s["state"] for s in up.status().values()} == {"running"}
    assert "stopped" in up.lab("stop", "--broker", "2")
    assert up.status()[2] == {"state": "stopped", "pid": None}
    pid = up.status()[1]["pid"]
    up.lab("pause", "--broker", "1")
    assert up.status()[1]["state"] == "paused"
    up.lab("resume", "--broker", "1")
    up.lab("start", "--broker", "2")
    wait_until(lambda: up.said("broker 2 is up"), "broker 2 to start again")
    status = up.status()
    assert status[1] == {"state": "running", "pid": pid} and status[2]["state"] == "running"
    assert not up.said("died"), up.output()
    pids = [s["pid"] for s in status.values()]
    assert up.stop() == 0
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_brokers_and_zookeeper_die_with_a_sigkilled_weir_up(up):
    children = children_of(up.proc.pid)
    kinds = sorted("ZooKeeperServerMain" if "ZooKeeperServerMain" in line else line.split("weir.cli.main")[1].split()[2]
                   for line in map(command_line, children))
    assert kinds == ["ZooKeeperServerMain", "broker", "broker", "broker"], kinds
    os.kill(up.proc.pid, signal.SIGKILL)
    up.proc.wait(10)
    wait_until_gone(children, "the brokers and ZooKeeper of a SIGKILLed weir up")


def test_ctrl_c_stops_a_wedged_broker_within_the_bound(up):
    """Broker 1, SIGSTOPped from outside (`weir up` does not know), cannot act on its SIGTERM."""
    children = children_of(up.proc.pid)
    os.kill(up.status()[1]["pid"], signal.SIGSTOP)
    slack_s = 10  # `weir up`'s own exit, on a shared machine
    assert up.stop(timeout_s=CLUSTER_STOP_TIMEOUT_S + ZOOKEEPER_STOP_TIMEOUT_S + slack_s) == 0, up.output()
    wait_until_gone(children, "the brokers and ZooKeeper of a stopped weir up")


KAFKA_METRICS = (
    "kafka_server_replicamanager_underreplicatedpartitions", "kafka_server_replicamanager_underminisrpartitioncount",
    "kafka_controller_kafkacontroller_offlinepartitionscount", "kafka_controller_kafkacontroller_activecontrollercount",
    "kafka_server_replicamanager_partitioncount", "kafka_server_replicamanager_leadercount",
    "kafka_server_replicamanager_isrshrinks_total", "kafka_server_replicamanager_isrexpands_total",
    "kafka_server_brokertopicmetrics_bytesin_total", "kafka_server_brokertopicmetrics_messagesin_total",
    "kafka_server_brokertopicmetrics_bytesout_total", "kafka_network_requestmetrics_requests_total",
    "kafka_network_requestmetrics_totaltimems_bucket", "kafka_network_requestmetrics_requestqueuetimems_bucket",
    "kafka_network_requestmetrics_localtimems_bucket", "kafka_network_requestmetrics_remotetimems_bucket",
    "kafka_server_delayedoperationpurgatory_purgatorysize", "kafka_server_replicafetchermanager_maxlag",
    "kafka_log_log_size", "kafka_log_log_logendoffset", "kafka_server_sessionexpirelistener_sessionstate",
    "kafka_controller_controllereventmanager_events_total", "kafka_controller_controllerstats_leaderelections_total",
    "weir_partition_replica_log_end_offset", "weir_partition_replica_lag", "weir_partition_high_watermark",
)


def test_metrics_show_under_replication_while_a_broker_is_down_and_none_once_it_caught_up(up):
    admin = up.filled_topic("watched", 300)
    consumer = Consumer({"bootstrap.servers": up.bootstrap, "group.id": "watcher", "auto.offset.reset": "earliest"})
    consumer.subscribe(["watched"])
    read = 0
    while read < 300:
        message = consumer.poll(10)
        assert message is not None, f"read {read} of 300"
        read += message.error() is None
    consumer.close()

    names = set().union(*(up.metrics(b) for b in (0, 1, 2)))
    assert not set(KAFKA_METRICS) - names, sorted(set(KAFKA_METRICS) - names)
    assert up.total("kafka_controller_kafkacontroller_activecontrollercount") == 1
    topics = admin.list_topics(timeout=10).topics.values()  # "watched" and the groups' __consumer_offsets
    partitions = [p for t in topics for p in t.partitions.values()]
    assert up.total("kafka_server_replicamanager_leadercount") == len(partitions)
    on_broker_2 = sum(2 in p.replicas for p in partitions)
    assert up.total("kafka_server_brokertopicmetrics_messagesin_total", topic="watched") == 300
    assert up.total("kafka_log_log_logendoffset", topic="watched") == 900  # 100 per partition, on each replica
    assert up.total("kafka_network_requestmetrics_requests_total", request="Produce") > 0
    assert up.total("kafka_server_brokertopicmetrics_bytesout_total", topic="watched") > 300 * len(b"m-100")
    wait_until(lambda: up.total("kafka_server_replicamanager_underreplicatedpartitions") == 0, "a full ISR")

    up.lab("stop", "--broker", "2")
    wait_until(lambda: up.total("kafka_server_replicamanager_underreplicatedpartitions", brokers=(0, 1))
               == on_broker_2,
               "every partition under-replicated while broker 2 is down")
    assert up.total("weir_partition_replica_in_isr", brokers=(0, 1), replica="2") == 0
    up.lab("start", "--broker", "2")
    wait_until(lambda: up.said("broker 2 is up"), "broker 2 to start again")
    wait_until(lambda: up.total("kafka_server_replicamanager_underreplicatedpartitions") == 0,
               "no under-replicated partition once broker 2 caught up")
    assert up.total("weir_partition_replica_lag", topic="watched") == 0
    assert up.total("kafka_server_replicamanager_isrexpands_total") >= on_broker_2  # its leaders took it back
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"http://127.0.0.1:{up.metrics_base}/other", timeout=10)
