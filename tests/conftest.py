"""Fixtures: one real ZooKeeper for the session; real broker processes per test, each test in its
own ZooKeeper chroot so clusters never see each other."""

import itertools

import pytest

from weir.lab.local_cluster import BrokerProcess, LocalCluster
from weir.lab.zookeeper_server import ZooKeeperServer

# Short timeouts so failures are detected in seconds, not Kafka's production minutes.
FAST = {"zookeeper.session.timeout.ms": "6000", "replica.fetch.backoff.ms": "200"}
_chroots = itertools.count()


def settings(overrides: dict) -> dict:
    """Broker settings for a test: FAST plus keyword overrides (replica_lag_time_max_ms=...)."""
    return {**FAST, **{k.replace("_", "."): v for k, v in overrides.items()}}


def stop_all(started: list) -> None:
    for process in started:
        process.kill()
        print(process.output())  # shown by pytest when the test fails


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    yield server
    server.stop()


@pytest.fixture
def zookeeper_connect(zookeeper):
    return f"{zookeeper.connect_string}/test-{next(_chroots)}"


@pytest.fixture
def start_broker(tmp_path, zookeeper_connect):
    """Start brokers of one cluster: `start_broker(broker_id=0, **overrides)`."""
    started = []

    def start(broker_id: int = 0, **overrides) -> BrokerProcess:
        process = BrokerProcess(broker_id, tmp_path / f"broker-{broker_id}", zookeeper_connect,
                                overrides=settings(overrides))
        started.append(process)
        return process.start()

    yield start
    stop_all(started)


@pytest.fixture
def broker(start_broker):
    """A fresh single-broker cluster; tests may stop/kill and start it again."""
    return start_broker(0)


@pytest.fixture
def start_cluster(tmp_path, zookeeper_connect):
    """Start a three-broker cluster (ids 0, 1, 2) with broker settings: `start_cluster(**overrides)`."""
    started = []

    def start(**overrides) -> LocalCluster:
        local = LocalCluster(tmp_path, 3, zookeeper_connect=zookeeper_connect, overrides=settings(overrides))
        started.append(local)
        return local.start()

    yield start
    stop_all(started)


@pytest.fixture
def cluster(start_cluster):
    return start_cluster()
