"""The cluster under test: one real ZooKeeper, N real broker processes, and the proxies between them.

Every broker listens on its own 127.0.0.1 port and *advertises* its inbound proxy, so clients and
other brokers reach it only through the network of `network.py`; its `zookeeper.connect` names its
own ZooKeeper proxy. Each broker runs in a process group of its own (so a Ctrl-C in the terminal
reaches the harness alone, which then tears everything down itself), and `teardown()` kills every
group and is idempotent.

Secured (`secure`), it is `weir up --secure`'s cluster: SASL_SSL listeners (which the proxies
carry as bytes), SCRAM between brokers, ACLs, `zookeeper.set.acl` under the chroot /weir (its
settings, which hold passwords, are not among `settings`, which the report shows). The harness
(topic, metadata, reassignments) is the super user `admin`; the workload is the user
`weir-verify`, allowed only what its producers and consumers need, by prefixed ACLs.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import subprocess
import threading
import time
from pathlib import Path

from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType,
                                   ResourceType, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion)

from weir.client import PLAINTEXT
from weir.lab.local_cluster import BrokerProcess, SecureSetup
from weir.lab.zookeeper_server import ZooKeeperServer, free_port
from weir.verify.network import LOOPBACK, ZOOKEEPER, Network, broker_node

log = logging.getLogger(__name__)

# Faults should be noticed within seconds, not production minutes.
DEFAULT_BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.backoff.ms": "200",
    "replica.fetch.wait.max.ms": "200",
    "auto.create.topics.enable": "false",
    "leader.imbalance.check.interval.seconds": "3600",
    "controlled.shutdown.retry.backoff.ms": "1000",
}

WORKLOAD_USER = "weir-verify"
WORKLOAD_GRANTS = {  # prefixed with weir-verify: the topic, the consumers' groups, the transactional ids
    ResourceType.TOPIC: (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE),
    ResourceType.GROUP: (AclOperation.READ,),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.WRITE, AclOperation.DESCRIBE),
}


class IsolatedBroker(BrokerProcess):
    """A broker process in its own process group, so the harness alone decides when it ends."""

    def kill(self) -> None:
        if self.running:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)

    def pid(self) -> int | None:
        return self.proc.pid if self.running else None


class Cluster:
    def __init__(self, run_dir: Path, size: int, settings: dict[str, str], secure: bool = False) -> None:
        assert size >= 1
        self.run_dir = Path(run_dir)
        self.size = size
        self.secure = SecureSetup(self.run_dir) if secure else None
        self.workload_password = secrets.token_urlsafe(18)
        self.settings = {**DEFAULT_BROKER_SETTINGS, **settings}
        self.network = Network()
        self.zookeeper = ZooKeeperServer(self.run_dir / "zookeeper")
        self.brokers: list[IsolatedBroker] = []
        self.proxy_ports: dict[int, int] = {}
        self.zookeeper_proxy_ports: dict[int, int] = {}
        self.paused: set[int] = set()
        self._torn_down = False

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{LOOPBACK}:{port}" for port in self.proxy_ports.values())

    @property
    def connection(self) -> dict[str, str]:
        """Kafka client properties (librdkafka's names) for reaching the cluster."""
        return {"bootstrap.servers": self.bootstrap, **(self.secure.client_config() if self.secure else {})}

    @property
    def workload_connection(self) -> dict[str, str]:
        """The workload's client properties: secured, as WORKLOAD_USER."""
        if not self.secure:
            return self.connection
        return {"bootstrap.servers": self.bootstrap, **self.secure.client_config(WORKLOAD_USER, self.workload_password)}

    @property
    def client_security(self):
        """The same, for weir's own client."""
        return self.secure.client_security() if self.secure else PLAINTEXT

    @property
    def session_timeout_s(self) -> float:
        return int(self.settings["zookeeper.session.timeout.ms"]) / 1000

    @property
    def lag_time_s(self) -> float:
        return int(self.settings["replica.lag.time.max.ms"]) / 1000

    def start(self) -> "Cluster":
        self.zookeeper.start()
        protocol, chroot = (self.secure.protocol, SecureSetup.CHROOT) if self.secure else ("PLAINTEXT", "")
        if self.secure:
            self.secure.create_admin(f"{LOOPBACK}:{self.zookeeper.port}{chroot}")
        for i in range(self.size):
            port = free_port()
            self.proxy_ports[i] = self.network.add_inbound_proxy(broker_node(i), port)
            self.zookeeper_proxy_ports[i] = self.network.add_link_proxy(broker_node(i), ZOOKEEPER,
                                                                        self.zookeeper.port)
            broker = IsolatedBroker(i, self.run_dir / "data" / f"broker-{i}", "", port, {
                **(self.secure.overrides if self.secure else {}), **self.settings,
                "advertised.listeners": f"{protocol}://{LOOPBACK}:{self.proxy_ports[i]}",
                "zookeeper.connect": f"{LOOPBACK}:{self.zookeeper_proxy_ports[i]}{chroot}",
            }, protocol=protocol)
            self.brokers.append(broker)
            self.network.register_process(broker_node(i), broker.pid)
        for broker in self.brokers:
            broker.start(wait=False)
        for broker in self.brokers:
            broker.wait_ready()
        self.wait_until(lambda m: len(m.brokers) == self.size, "every broker registered")
        if self.secure:
            self._add_workload_user()
        return self

    def _add_workload_user(self) -> None:
        admin = self.admin()
        credential = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            WORKLOAD_USER, credential, self.workload_password.encode())])[WORKLOAD_USER].result(30)
        for done in admin.create_acls([
                AclBinding(resource_type, WORKLOAD_USER, ResourcePatternType.PREFIXED, f"User:{WORKLOAD_USER}", "*",
                           operation, AclPermissionType.ALLOW)
                for resource_type, operations in WORKLOAD_GRANTS.items() for operation in operations]).values():
            done.result(30)

    # -- looking at it (through the proxies, as a client) -----------------------------------

    def admin(self) -> AdminClient:
        from weir.verify.workload import rdkafka_log
        return AdminClient({**self.connection, "socket.timeout.ms": 3000, "logger": rdkafka_log})

    def metadata(self, topic: str | None = None, timeout_s: float = 5):
        return self.admin().list_topics(topic, timeout=timeout_s)

    def wait_until(self, condition, what: str, timeout_s: float = 60):
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                result = condition(self.metadata())
                if result:
                    return result
            except Exception as e:  # a metadata request may fail mid-fault; ask again
                log.debug("metadata: %r", e)
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            time.sleep(0.2)

    # -- faults and healing -----------------------------------------------------------------

    def reassign(self, topic: str, partition: int, replicas: list[int]) -> None:
        """Move a partition to `replicas` (AlterPartitionReassignments at the controller)."""
        import asyncio

        from weir.cli.reassign_partitions import alter_reassignments
        from weir.client import ClusterClient

        async def move() -> None:
            async with ClusterClient(self.bootstrap, client_id="weir-verify-nemesis", timeout_s=5, retries=3,
                                     security=self.client_security) as c:
                error, message = (await alter_reassignments(c, {(topic, partition): tuple(replicas)}))[
                    (topic, partition)]
                if error:
                    raise RuntimeError(f"{error.name}: {message}")
        asyncio.run(move())

    def kill(self, broker_id: int) -> None:
        self.paused.discard(broker_id)
        self.brokers[broker_id].kill()

    def terminate(self, broker_id: int) -> None:
        """SIGTERM: the broker's controlled shutdown, as an operator's `kill`."""
        self.resume(broker_id)
        if self.brokers[broker_id].running:
            self.brokers[broker_id].proc.send_signal(signal.SIGTERM)

    def wait_stopped(self, broker_id: int, timeout_s: float = 60) -> None:
        """Until a terminated broker has exited; killed (and the failure raised) past `timeout_s`."""
        broker = self.brokers[broker_id]
        try:
            broker.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill(broker_id)
            raise RuntimeError(f"broker {broker_id} did not stop within {timeout_s:.0f} s of SIGTERM") from None

    def restart(self, broker_id: int) -> None:
        if not self.brokers[broker_id].running:
            self.brokers[broker_id].start()

    def pause(self, broker_id: int) -> None:
        if self.brokers[broker_id].running:
            self.brokers[broker_id].pause()
            self.paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        if broker_id in self.paused and self.brokers[broker_id].running:
            self.brokers[broker_id].resume()
        self.paused.discard(broker_id)

    def heal(self) -> None:
        """Every link whole, every process running and resumed."""
        self.network.heal()
        if not self.zookeeper.running:
            self.zookeeper.start()
        elif self.zookeeper.paused:
            self.zookeeper.resume()
        for i in list(self.paused):
            self.resume(i)
        for i, broker in enumerate(self.brokers):
            if not broker.running:
                broker.start()

    def teardown(self) -> None:
        """Kill every process (even paused ones) and stop the proxies. Idempotent."""
        if self._torn_down:
            return
        self._torn_down = True
        # A second Ctrl-C must not cut the teardown short: hold signals until it is done.
        in_main = threading.current_thread() is threading.main_thread()
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM}) if in_main else None
        try:
            self._kill_everything()
        finally:
            if held is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def _kill_everything(self) -> None:
        for broker in self.brokers:
            try:
                broker.kill()
            except Exception:
                log.exception("killing broker %d", broker.broker_id)
        try:
            self.zookeeper.kill()
        except Exception:
            log.exception("killing ZooKeeper")
        self.network.close()

    def save_logs(self) -> None:
        for broker in self.brokers:
            (self.run_dir / f"broker-{broker.broker_id}.log").write_text(broker.output())
