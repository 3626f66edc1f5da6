"""The userspace network: sources told apart by process, cuts that drop (not reset), heals that deliver."""

import contextlib
import socket
import subprocess
import sys
import threading

import pytest

from weir.verify.network import CLIENT, Network


@pytest.fixture
def echo_port():
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    def echo(conn):
        with conn, contextlib.suppress(ConnectionResetError):  # a refused connection's proxy side resets it
            while data := conn.recv(4096):
                conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


@pytest.fixture
def network():
    net = Network()
    yield net
    net.close()


def round_trip(sock, payload=b"ping", timeout_s=2.0):
    sock.settimeout(timeout_s)
    sock.sendall(payload)
    return sock.recv(4096)


def test_the_harness_is_the_client_and_a_cut_drops_until_healed(network, echo_port):
    port = network.add_inbound_proxy("b0", echo_port)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert round_trip(sock) == b"ping"
        network.cut([CLIENT], ["b0"])
        with pytest.raises(socket.timeout):
            round_trip(sock, b"lost?", timeout_s=0.5)  # dropped, not reset: the socket stays open
        network.heal()
        sock.settimeout(2)
        assert sock.recv(4096) == b"lost?"  # what waited is delivered, as TCP would retransmit it
        assert round_trip(sock) == b"ping"


def test_a_cut_elsewhere_does_not_touch_this_link(network, echo_port):
    port = network.add_inbound_proxy("b0", echo_port)
    network.cut(["b1"], ["b0", "zk"])
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert round_trip(sock) == b"ping"


def test_new_connections_across_a_cut_wait_for_the_heal(network, echo_port):
    port = network.add_inbound_proxy("b0", echo_port)
    network.cut([CLIENT], ["b0"])
    with socket.create_connection(("127.0.0.1", port)) as sock:
        with pytest.raises(socket.timeout):
            round_trip(sock, timeout_s=0.5)
        network.heal()
        sock.settimeout(2)
        assert sock.recv(4096) == b"ping"


CHILD = """
import socket, sys
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
sock.settimeout(float(sys.argv[2]))
sock.sendall(b"from child")
try:
    print(sock.recv(4096).decode() or "closed")
except socket.timeout:
    print("timeout")
"""


def child(port, timeout_s=3.0):
    return subprocess.Popen([sys.executable, "-c", CHILD, str(port), str(timeout_s)], stdout=subprocess.PIPE, text=True)


def test_another_process_is_told_apart_by_its_pid(network, echo_port):
    port = network.add_inbound_proxy("b0", echo_port)
    procs = {}
    network.register_process("b1", lambda: procs["b1"].pid if "b1" in procs else None)
    network.cut(["b1"], ["b0"])
    procs["b1"] = child(port, timeout_s=1.0)
    assert procs["b1"].communicate(timeout=10)[0].strip() == "timeout"  # b1 is cut from b0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert round_trip(sock) == b"ping"  # the client is not
    network.heal()
    procs["b1"] = child(port)
    assert procs["b1"].communicate(timeout=10)[0].strip() == "from child"


def test_an_unknown_process_is_refused(network, echo_port):
    port = network.add_inbound_proxy("b0", echo_port)
    proc = child(port)
    assert proc.communicate(timeout=10)[0].strip() == "closed"
    assert network.refused == 1


def test_a_link_proxy_needs_no_lookup(network, echo_port):
    port = network.add_link_proxy("b3", "zk", echo_port)
    proc = child(port)
    assert proc.communicate(timeout=10)[0].strip() == "from child"
    network.cut(["b3"], ["zk"])
    proc = child(port, timeout_s=0.5)
    assert proc.communicate(timeout=10)[0].strip() == "timeout"
