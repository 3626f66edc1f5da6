"""ZooKeeper and brokers as real processes on this machine: `weir up`, the tests, and `weir bench`.

Each broker is a `weir broker` child process; it counts as started when it prints its ready line
(not after a sleep). Brokers stop cleanly with SIGTERM (controlled shutdown) or die with SIGKILL:
one that has not stopped within its bound (wedged, or SIGSTOPped) is SIGKILLed. Brokers and
ZooKeeper are children that die with the process that started them, even on its SIGKILL
(child_process.py).

`SecureSetup` makes a secured cluster (`weir up --secure`, the tests): a CA and a broker
certificate under `<data-dir>/tls/`, SASL_SSL listeners on the same ports, SCRAM-SHA-512 between
brokers as the super user `admin`, whose credential is written to ZooKeeper before any broker
starts (as `kafka-configs --zookeeper` would), and `zookeeper.set.acl`: the brokers log in to
ZooKeeper as `weir` (`<data-dir>/tls/zookeeper.properties`, for the tools that write ZooKeeper) and
their znodes, under the chroot /weir, are theirs alone to change.
"""

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from weir.lab.child_process import start_child
from weir.lab.zookeeper_server import ZooKeeperServer, free_port

READY_TIMEOUT_S = 60
BROKER_STOP_TIMEOUT_S = 60  # one broker's clean stop (the broker's own controlled shutdown gives up after 30 s)
CLUSTER_STOP_TIMEOUT_S = 8  # every broker's, stopping together; ZooKeeper's follows
ZOOKEEPER_STOP_TIMEOUT_S = 2


class BrokerProcess:
    def __init__(self, broker_id: int, data_dir: Path, zookeeper_connect: str, port: int | None = None,
                 overrides: dict[str, str] | None = None, echo: bool = False, log_level: str = "INFO",
                 protocol: str = "PLAINTEXT", properties: Path | None = None, python: str = sys.executable,
                 max_open_files: int | None = None) -> None:
        self.broker_id = broker_id
        self.python = python  # the interpreter that runs it (`weir bench compare --against-python`)
        self.max_open_files = max_open_files  # its RLIMIT_NOFILE, soft and hard (prlimit), if given
        self.properties = properties  # a server.properties file, which the overrides override
        self.log_level = log_level
        self.data_dir = data_dir
        self.port = port or free_port()
        self.echo = echo
        self.overrides = {"broker.id": str(broker_id), "log.dirs": str(data_dir),
                          "listeners": f"{protocol}://127.0.0.1:{self.port}", "zookeeper.connect": zookeeper_connect,
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
        limit = ["prlimit", f"--nofile={self.max_open_files}"] if self.max_open_files else []
        args = [*limit, self.python, "-m", "weir.cli.main", "--log-level", self.log_level, "broker",
                *([str(self.properties)] if self.properties else [])]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        # Its own session: a Ctrl-C meant for `weir up` reaches the brokers only as `weir up` stops them.
        self.proc = start_child(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        # each incarnation's own event: the killed one's reader, still draining, must not say the new one is ready
        self._ready = threading.Event()
        threading.Thread(target=self._pump, args=(self.proc.stdout, self._ready), daemon=True).start()
        if wait:
            self.wait_ready()
        return self

    def _pump(self, stream, ready: threading.Event) -> None:
        for line in stream:
            self.log_lines.append(line)
            if self.echo:
                sys.stdout.write(f"[broker {self.broker_id}] {line}")
            if "ready on" in line:
                ready.set()
        ready.set()  # the process ended

    def wait_ready(self) -> None:
        if not self._ready.wait(READY_TIMEOUT_S) or self.proc.poll() is not None:
            self.kill()
            raise RuntimeError(f"broker {self.broker_id} did not start:\n" + self.output())

    def stop(self, timeout_s: float = BROKER_STOP_TIMEOUT_S) -> None:
        """Clean shutdown (SIGTERM), as an operator would: controlled shutdown, then checkpoints;
        SIGKILL if the broker still runs `timeout_s` later."""
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
                 overrides: dict[str, str] | None = None, echo: bool = False, log_level: str = "INFO",
                 secure: "SecureSetup | None" = None, python: str = sys.executable) -> None:
        self.data_dir = Path(data_dir)
        self.secure = secure
        if secure is not None:
            overrides = {**secure.overrides, **(overrides or {})}
        self.zookeeper = None
        if zookeeper_connect is None:
            self.zookeeper = ZooKeeperServer(self.data_dir / "zookeeper", port=zookeeper_port)
        self._zookeeper_connect = zookeeper_connect
        self.brokers = [BrokerProcess(i, self.data_dir / f"broker-{i}", "", base_port + i if base_port else None,
                                      overrides, echo, log_level, secure.protocol if secure else "PLAINTEXT",
                                      python=python)
                        for i in range(size)]

    @property
    def zookeeper_connect(self) -> str:
        if self._zookeeper_connect:
            return self._zookeeper_connect
        # a secured cluster lives under a chroot: ZooKeeper's root znode is open to all (zk_security)
        return self.zookeeper.connect_string + (SecureSetup.CHROOT if self.secure else "")

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.running) or self.brokers[0].bootstrap

    def start(self) -> "LocalCluster":
        if self.zookeeper is not None:
            self.zookeeper.start()
        if self.secure is not None:
            self.secure.create_admin(self.zookeeper_connect)
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

        from weir.client import BrokerConnection
        from weir.protocol.versions import ApiKey

        async def brokers_seen_by(broker: BrokerProcess) -> int:
            security = self.secure.client_security() if self.secure else None
            async with await BrokerConnection.open("127.0.0.1", broker.port, timeout_s=10,
                                                   **({"security": security} if security else {})) as conn:
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

    def stop(self, timeout_s: float = CLUSTER_STOP_TIMEOUT_S) -> None:
        """Every broker asked to stop at once (SIGTERM), and SIGKILLed if still running `timeout_s`
        later; then ZooKeeper, within ZOOKEEPER_STOP_TIMEOUT_S."""
        for broker in self.brokers:
            if broker.running:
                broker.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for broker in self.brokers:
            broker.stop(max(0.0, deadline - time.monotonic()))
        if self.zookeeper is not None:
            self.zookeeper.stop(ZOOKEEPER_STOP_TIMEOUT_S)

    def kill(self) -> None:
        for broker in self.brokers:
            broker.kill()
        if self.zookeeper is not None:
            self.zookeeper.kill()

    def output(self) -> str:
        return "\n".join(f"--- broker {b.broker_id} ---\n{b.output()}" for b in self.brokers)


def _kept_secret(path: Path, given: str = "") -> str:
    """`given`, else the one saved at `path`, else a new one; saved there (mode 600) for next time."""
    if not given:
        given = path.read_text().strip() if path.exists() else secrets.token_urlsafe(18)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(given + "\n")
    return given


@dataclass
class SecureSetup:
    """TLS material under `<data_dir>/tls/` (made on first use, kept after: clients keep trusting
    the same CA across restarts), the SCRAM super user `admin`, and the brokers' ZooKeeper login
    `weir` with `zookeeper.set.acl` (`zookeeper_properties`: the settings, for the tools)."""
    CHROOT = "/weir"
    data_dir: Path
    admin_password: str = ""
    protocol: str = "SASL_SSL"
    mechanism: str = "SCRAM-SHA-512"

    def __post_init__(self) -> None:
        from weir.security.certificates import CertificateAuthority
        self.data_dir = Path(self.data_dir)
        tls = self.data_dir / "tls"
        self.ca_path = tls / "ca.pem"
        self.keystore_path = tls / "broker.pem"
        if not self.ca_path.exists() or not self.keystore_path.exists():
            ca = CertificateAuthority.create(self.ca_path)
            ca.issue(self.keystore_path, "weir-broker", ["127.0.0.1", "localhost", "::1"])
        self.admin_password = _kept_secret(tls / "admin.password", self.admin_password)
        self.zookeeper_settings = {
            "zookeeper.set.acl": "true",
            "zookeeper.digest.jaas.config": 'org.apache.zookeeper.server.auth.DigestLoginModule required '
                                            f'username="weir" password="{_kept_secret(tls / "zookeeper.password")}";'}
        self.zookeeper_properties = tls / "zookeeper.properties"
        self.zookeeper_properties.write_text("".join(f"{k}={v}\n" for k, v in self.zookeeper_settings.items()))
        self.zookeeper_properties.chmod(0o600)

    @property
    def zookeeper_security(self):
        from weir.coordination.zk_security import ZkSecurity
        return ZkSecurity.from_properties(self.zookeeper_settings)

    @property
    def overrides(self) -> dict[str, str]:
        listener = self.protocol.lower()
        return {
            "ssl.keystore.location": str(self.keystore_path), "ssl.truststore.location": str(self.ca_path),
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": self.mechanism,
            f"listener.name.{listener}.{self.mechanism.lower()}.sasl.jaas.config":
                f'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
                f'password="{self.admin_password}";',
            # ACLs on; admin, as whom the brokers reach each other too, may do everything
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
            **self.zookeeper_settings,
        }

    def create_admin(self, zookeeper_connect: str) -> None:
        from weir.coordination.zk_client import ensure_chroot
        from weir.protocol.scram import ScramCredential
        from weir.security.scram_store import write_credential
        ensure_chroot(zookeeper_connect, 30, self.zookeeper_security)  # the brokers would create it; we come first
        client = self.zookeeper_security.client(zookeeper_connect)
        client.start(timeout=30)
        try:
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                write_credential(client, "admin", mechanism,
                                 ScramCredential.from_password(mechanism, self.admin_password, os.urandom(32)))
        finally:
            client.stop()
            client.close()

    def client_security(self, username: str = "admin", password: str | None = None):
        """Weir's own client (weir.client) as this user."""
        import ssl

        from weir.client import ClientSecurity
        context = ssl.create_default_context(cafile=str(self.ca_path))
        return ClientSecurity(self.protocol, context, self.mechanism, username,
                              self.admin_password if password is None else password)

    def client_config(self, username: str = "admin", password: str | None = None) -> dict[str, str]:
        """Kafka client properties (confluent-kafka / librdkafka names) for this cluster."""
        return {"security.protocol": self.protocol, "sasl.mechanism": self.mechanism,
                "sasl.username": username, "sasl.password": self.admin_password if password is None else password,
                "ssl.ca.location": str(self.ca_path)}
