"""`weir up` as a user runs it (a real process with ZooKeeper and three brokers), broken with
kill -9 and `weir lab`, watched through a real Kafka client."""

import os
import signal
import socket
import subprocess
import sys
import threading

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from waiting import wait_until
from weir.coordination.zookeeper_server import free_port

TOPIC = "lab"


def consecutive_free_ports(count: int) -> int:
    for _ in range(100):
        base = free_port()
        if base + count > 65535:
            continue
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no consecutive free ports")


class Up:
    """A running `weir up` and what it printed."""

    def __init__(self, data_dir, *args: str) -> None:
        self.data_dir = str(data_dir)
        self.base = consecutive_free_ports(3)
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "weir.cli", "up", "--data-dir", self.data_dir, "--port", str(self.base),
             "--zookeeper-port", str(free_port()), "--override", "zookeeper.session.timeout.ms=6000", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
        threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True).start()
        wait_until(lambda: self.said("weir is up") or self.proc.poll() is not None, "weir up to start", 120)
        assert self.proc.poll() is None, self.output()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.base}"

    def said(self, text: str) -> bool:
        return any(line.startswith("weir") and text in line for line in list(self.lines))

    def output(self) -> str:
        return "".join(self.lines)

    def lab(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "weir.cli", "lab", *args, "--data-dir", self.data_dir],
                              capture_output=True, text=True, timeout=150)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def status(self) -> dict[int, dict]:
        rows = [line.split() for line in self.lab("status").splitlines()[1:]]
        return {int(r[0]): {"state": r[2], "pid": None if r[3] == "-" else int(r[3])} for r in rows}

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(90)


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

    consumer = Consumer({"bootstrap.servers": up.bootstrap, "group.id": "lab-check", "enable.auto.commit": False})
    high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[1]
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
