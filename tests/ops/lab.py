"""A real `weir up` for tests: started on free ports, driven with `weir lab`, scraped like Prometheus."""

import signal
import subprocess
import sys
import threading
import urllib.request

from waiting import wait_until

from weir.console.server import parse_metrics
from weir.lab.zookeeper_server import free_port, free_ports


class Up:
    """A running `weir up` and what it printed."""

    def __init__(self, data_dir, *args: str) -> None:
        self.data_dir = str(data_dir)
        self.base = free_ports(3)
        self.metrics_base = free_ports(3)
        self.console_port = free_port()
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "weir.cli.main", "up", "--data-dir", self.data_dir, "--port", str(self.base),
             "--metrics-port", str(self.metrics_base), "--console-port", str(self.console_port),
             "--zookeeper-port", str(free_port()),
             "--override", "zookeeper.session.timeout.ms=6000", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
        threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True).start()
        wait_until(lambda: self.said("weir is up") or self.proc.poll() is not None, "weir up to start", 120)
        assert self.proc.poll() is None, self.output()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.base}"

    def filled_topic(self, topic: str, records: int):
        """Create `topic` (3 partitions, 3 replicas, min ISR 2), write `records` records spread over
        its partitions with acks=all, and return the admin client."""
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all"})
        for i in range(records):
            producer.produce(topic, f"{topic}-{i}".encode(), partition=i % 3)
        assert producer.flush(30) == 0
        return admin

    def said(self, text: str) -> bool:
        return any(line.startswith("weir") and text in line for line in list(self.lines))

    def output(self) -> str:
        return "".join(self.lines)

    def lab(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "weir.cli.main", "lab", *args, "--data-dir", self.data_dir],
                              capture_output=True, text=True, timeout=150)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def status(self) -> dict[int, dict]:
        rows = [line.split() for line in self.lab("status").splitlines()[1:]]
        return {int(r[0]): {"state": r[2], "pid": None if r[3] == "-" else int(r[3])} for r in rows}

    def metrics(self, broker_id: int) -> dict[str, list]:
        """What Prometheus would scrape from the broker: name → [(labels, value)]."""
        url = f"http://127.0.0.1:{self.metrics_base + broker_id}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return parse_metrics(response.read().decode())

    def total(self, name: str, brokers=(0, 1, 2), **labels) -> float:
        return sum(value for b in brokers for sample_labels, value in self.metrics(b).get(name, [])
                   if labels.items() <= sample_labels.items())

    def stop(self, timeout_s: float = 90) -> int:
        """Ctrl-C; `weir up`'s exit status."""
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout_s)
