import pytest

from weir.lab.zookeeper_server import ZooKeeperServer


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    """One real ZooKeeper per test module, on a free loopback port."""
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server
        if server.paused:  # a failed fault test must not hang the teardown's clients
            server.resume()
