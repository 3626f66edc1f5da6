"""Exactly-once consume-transform-produce (issue 13) with real clients on a three-broker cluster:
eos_app.py, on confluent-kafka and on kafka-python, is killed with kill -9 mid-stream and started
again, and the leader of an output partition is killed and restarted while it runs. Read with
read_committed, the output holds every input exactly once and the changelog's last counts are
exact."""

import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
from cluster_tools import create_topic, partition_metadata, wait_until
from confluent_kafka import Consumer, Producer
from eos_app import CHANGELOG, INPUT, OUTPUT

APP = Path(__file__).with_name("eos_app.py")
INPUTS = 2000
KEYS = 7


class Feeder:
    """The input, at a steady rate from a thread (idempotent producer): key k<i % KEYS>, value i."""

    def __init__(self, bootstrap: str, total: int, rate: float) -> None:
        self.total, self.rate, self.errors = total, rate, []
        self._producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Feeder":
        self._thread.start()
        return self

    def _run(self) -> None:
        done = threading.Event()
        for i in range(self.total):
            self._producer.produce(INPUT, str(i).encode(), b"k%d" % (i % KEYS),
                                   on_delivery=lambda err, msg: err and self.errors.append(err))
            self._producer.poll(0)
            done.wait(1 / self.rate)
        self._producer.flush(60)

    def join(self) -> None:
        self._thread.join(120)
        assert not self.errors, self.errors[:3]


class CommittedReader:
    """Everything committed to a topic, read_committed, as it arrives (a thread)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.records: list[tuple[bytes, bytes]] = []
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                                   "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                                   "enable.auto.commit": False})
        self._consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.records.extend((m.key(), m.value()) for m in self._consumer.consume(500, 0.2) if not m.error())
        self._consumer.close()

    def stop(self) -> list[tuple[bytes, bytes]]:
        self._stop.set()
        self._thread.join(30)
        return self.records


class App:
    """eos_app.py in its own process; started again whenever it dies."""

    def __init__(self, bootstrap: str, stack: str, log: Path) -> None:
        self.env = {**os.environ, "BOOTSTRAP": bootstrap}
        self.stack = stack
        self.log = log.open("a")
        self.starts = 0
        self.proc = None
        self.start()

    def start(self) -> None:
        self.log.write(f"--- start {self.starts + 1}\n")
        self.log.flush()
        self.proc = subprocess.Popen([sys.executable, str(APP), self.stack], env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.starts += 1

    def keep_running(self) -> None:
        if self.proc.poll() is not None:
            self.start()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# CI runs confluent-kafka; WEIR_FULL=1 adds kafka-python (~25 s more; its transactions are in CI through
# tests/transactions/test_transactional_clients.py)
STACKS = ["confluent-kafka"] + (["kafka-python"] if os.environ.get("WEIR_FULL") else [])


@pytest.mark.parametrize("stack", STACKS)
def test_consume_transform_produce_is_exactly_once_across_kill_9_of_the_app_and_of_a_leader(cluster, stack, tmp_path,
                                                                                            request):
    bootstrap = cluster.bootstrap
    for topic, config in ((INPUT, {}), (OUTPUT, {}), (CHANGELOG, {"cleanup.policy": "compact"})):
        create_topic(bootstrap, topic, 3, 3, **{"min.insync.replicas": "2", **config})
    output = CommittedReader(bootstrap, OUTPUT)
    feeder = Feeder(bootstrap, INPUTS, rate=150).start()  # 13 s of input: the faults land while it flows
    app = App(bootstrap, stack, tmp_path / "app.log")
    request.addfinalizer(app.kill)  # whatever happens: it would run for ever

    def outputs_reach(n: int):
        app.keep_running()
        return len(output.records) >= n

    wait_until(lambda: outputs_reach(INPUTS // 5), "the application's first outputs", timeout_s=90)
    app.kill()  # kill -9, its transaction open or not
    app.start()
    leader = partition_metadata(bootstrap, OUTPUT)[0][0]
    cluster.brokers[leader].kill()
    cluster.brokers[leader].start()
    feeder.join()
    try:
        wait_until(lambda: outputs_reach(INPUTS), "an output for every input", timeout_s=120)
    finally:
        print((tmp_path / "app.log").read_text()[-5000:], f"{len(output.records)} outputs")
    app.kill()
    records = output.stop()

    per_input = Counter(int(value.split(b":")[0]) for _, value in records)
    assert set(per_input) == set(range(INPUTS))
    twice = {i: n for i, n in per_input.items() if n > 1}
    assert not twice, f"{len(twice)} inputs processed more than once, e.g. {sorted(twice.items())[:5]}"
    last_count: dict[bytes, int] = {}
    for key, value in records:  # per key, the output's counts go 1, 2, 3...: state restored exactly
        count = int(value.split(b":")[1])
        assert count == last_count.get(key, 0) + 1, (key, count, last_count.get(key))
        last_count[key] = count
    assert last_count == {b"k%d" % k: len(range(k, INPUTS, KEYS)) for k in range(KEYS)}
