"""The locally managed ZooKeeper server process: start, serve, stop, kill, pause, errors."""

import os
import socket
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from weir.lab import zookeeper_server
from weir.lab.zookeeper_server import (ZooKeeperNotInstalled, ZooKeeperServer, ZooKeeperStartError, free_port,
                                       free_ports, zookeeper_classpath)


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def kazoo(connect_string: str) -> KazooClient:
    client = KazooClient(hosts=connect_string, timeout=5)
    client.start(timeout=10)
    return client


def test_serves_znodes_on_loopback(zookeeper):
    host, port = zookeeper.connect_string.split(":")
    assert host == "127.0.0.1" and int(port) == zookeeper.port
    assert zookeeper.four_letter_word("ruok") == "imok"
    client = kazoo(zookeeper.connect_string)
    try:
        client.create("/hello", b"weir", makepath=True)
        data, stat = client.get("/hello")
        assert data == b"weir" and stat.version == 0
    finally:
        client.stop()
        client.close()
    config = zookeeper.config_path.read_text()
    assert "clientPortAddress=127.0.0.1" in config and "admin.enableServer=false" in config
    assert "tickTime=500" in config and "minSessionTimeout=1000" in config
    assert zookeeper.log_path.exists(), "the server log goes to our directory"


def test_stop_ends_the_process_and_is_idempotent(tmp_path):
    server = ZooKeeperServer(tmp_path).start()
    pid = server.pid
    assert process_exists(pid) and server.running
    client = kazoo(server.connect_string)
    client.create("/survives-restart", b"1")
    client.stop()
    client.close()

    server.stop()
    assert not server.running
    assert not process_exists(pid) and not Path(f"/proc/{pid}").exists()
    server.stop()  # idempotent
    server.kill()

    port = server.port
    server.start()  # same directory and port: the data is still there
    assert server.port == port and server.pid != pid
    client = kazoo(server.connect_string)
    try:
        assert client.get("/survives-restart")[0] == b"1"
    finally:
        client.stop()
        client.close()
    pid = server.pid
    server.kill()
    assert not process_exists(pid)
    server.kill()
    server.stop()


def test_pause_and_resume(zookeeper):
    zookeeper.pause()
    try:
        assert zookeeper.paused
        with pytest.raises(OSError):  # accepted by the kernel, never answered
            zookeeper.four_letter_word("ruok", timeout_s=0.3)
    finally:
        zookeeper.resume()
    assert not zookeeper.paused
    assert zookeeper.four_letter_word("ruok") == "imok"


def test_start_failure_is_reported_with_the_log(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = ZooKeeperServer(tmp_path, port=taken.getsockname()[1])
        with pytest.raises(ZooKeeperStartError, match="Address already in use"):
            server.start()
    assert not server.running


def test_missing_package_names_it(tmp_path):
    with pytest.raises(ZooKeeperNotInstalled, match=r"apt-get install .*zookeeper"):
        zookeeper_classpath(tmp_path)
    assert "zookeeper.jar" in zookeeper_classpath()


def test_a_run_of_free_ports_is_never_handed_out_again(monkeypatch):
    """A test's `weir up` took three ports for its brokers, then ZooKeeper's from free_port, which
    gave it the second broker's: nothing was bound there yet ("address already in use" at its start)."""
    base = free_ports(3)
    offered = [base + 1, base + 2]  # what the random draw offers first
    draw = zookeeper_server._random.randrange
    monkeypatch.setattr(zookeeper_server._random, "randrange",
                        lambda low, high: offered.pop(0) if offered else draw(low, high))
    assert free_port() not in range(base, base + 3)
    assert not offered  # both were offered, and passed over
