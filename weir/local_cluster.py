"""ZooKeeper and brokers as real processes on this machine: `weir up`, the tests, and `weir bench`.

Each broker is a `weir broker` child process; it counts as started when it prints its ready line
(not after a sleep). Brokers stop cleanly with SIGTERM (controlled shutdown) or die with SIGKILL.
"""

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from .coordination.zookeeper_server import ZooKeeperServer, free_port

READY_TIMEOUT_S = 60


class BrokerProcess:
    def __init__(self, broker_id: int, data_dir: Path, zookeeper_connect: str, port: int | None = None,
                 overrides: dict[str, str] | None = None, echo: bool = False, log_level: str = "INFO") -> None:
        self.broker_id = broker_id
        self.log_level = log_level
        self.data_dir = data_dir
        self.port = port or free_port()
        self.echo = echo
        self.overrides = {"broker.id": str(broker_id), "log.dirs": str(data_dir),
                          "listeners": f"PLAINTEXT://127.0.0.1:{self.port}", "zookeeper.connect": zookeeper_connect,
                          **(overrides or {})}
        self.proc: subprocess.Popen | None = None
        self.log_lines: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def ready(self) -> bool:
        """Running and said it is ready (since its last start)."""
        return self.running and self._ready.is_set()

    def start(self, wait: bool = True) -> "BrokerProcess":
        args = [sys.executable, "-m", "weir.cli", "--log-level", self.log_level, "broker"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        # Its own session: a Ctrl-C meant for `weir up` reaches the brokers only as `weir up` stops them.
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self._ready = threading.Event()
        threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True).start()
        if wait:
            self.wait_ready()
        return self

    def _pump(self, stream) -> None:
        for line in stream:
            self.log_lines.append(line)
            if self.echo:
                sys.stdout.write(f"[broker {self.broker_id}] {line}")
            if "ready on" in line:
                self._ready.set()
        self._ready.set()  # the process ended

    def wait_ready(self) -> None:
        if not self._ready.wait(READY_TIMEOUT_S) or self.proc.poll() is not None:
            self.kill()
            raise RuntimeError(f"broker {self.broker_id} did not start:\n" + self.output())

    def stop(self, timeout_s: float = 60) -> None:
        """Clean shutdown (SIGTERM), as an operator would: controlled shutdown, then checkpoints."""
        if self.running:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        """kill -9: no shutdown work at all."""
        if self.running:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def pause(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def output(self) -> str:
        return "".join(self.log_lines)


class LocalCluster:
    """ZooKeeper (unless given a connect string) and `size` brokers with ids 0..size-1."""

    def __init__(self, data_dir: Path, size: int = 3, *, base_port: int | None = None,
                 zookeeper_connect: str | None = None, zookeeper_port: int | None = None,
                 overrides: dict[str, str] | None = None, echo: bool = False, log_level: str = "INFO") -> None:
        self.data_dir = Path(data_dir)
        self.zookeeper = None
        if zookeeper_connect is None:
            self.zookeeper = ZooKeeperServer(self.data_dir / "zookeeper", port=zookeeper_port)
        self._zookeeper_connect = zookeeper_connect
        self.brokers = [BrokerProcess(i, self.data_dir / f"broker-{i}", "", base_port + i if base_port else None,
                                      overrides, echo, log_level) for i in range(size)]

    @property
    def zookeeper_connect(self) -> str:
        return self._zookeeper_connect or self.zookeeper.connect_string

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.running) or self.brokers[0].bootstrap

    def start(self) -> "LocalCluster":
        if self.zookeeper is not None:
            self.zookeeper.start()
        for broker in self.brokers:
            broker.overrides["zookeeper.connect"] = self.zookeeper_connect
            broker.start(wait=False)
        for broker in self.brokers:
            broker.wait_ready()
        self.wait_until_all_see_each_other()
        return self

    def wait_until_all_see_each_other(self, timeout_s: float = 30) -> None:
        """Every broker's metadata lists every broker (each learns of the others from ZooKeeper)."""
        import asyncio

        from .client import BrokerConnection
        from .protocol.versions import ApiKey

        async def brokers_seen_by(broker: BrokerProcess) -> int:
            async with await BrokerConnection.open("127.0.0.1", broker.port, timeout_s=10) as conn:
                response = await conn.request(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False,
                                                                    "include_topic_authorized_operations": False})
                return len(response.brokers)

        async def wait() -> None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            for broker in self.brokers:
                while await brokers_seen_by(broker) < len(self.brokers):
                    if loop.time() > deadline:
                        raise RuntimeError(f"broker {broker.broker_id} does not see every broker")
                    await asyncio.sleep(0.05)

        asyncio.run(wait())

    def stop(self) -> None:
        for broker in self.brokers:
            if broker.running:
                broker.proc.send_signal(signal.SIGTERM)
        for broker in self.brokers:
            broker.stop()
        if self.zookeeper is not None:
            self.zookeeper.stop()

    def kill(self) -> None:
        for broker in self.brokers:
            broker.kill()
        if self.zookeeper is not None:
            self.zookeeper.kill()

    def output(self) -> str:
        return "\n".join(f"--- broker {b.broker_id} ---\n{b.output()}" for b in self.brokers)
