"""A userspace network on loopback: TCP proxies in front of every link, and a table of cut links.

Rules this module owns:

- Every byte between two nodes of the test (a broker, ZooKeeper, the harness's clients) crosses
  one proxy here, and every proxy listens on 127.0.0.1. Nothing outside 127.0.0.0/8 is ever
  addressed.
- A *link* is directed: (source, destination). A connection opened by `a` to `b` carries a→b bytes
  over link (a, b) and b→a bytes over link (b, a). Cutting (a, b) stops the first direction only;
  `cut(a, b)` in `Network` cuts both, as a partition does.
- A cut link behaves like iptables DROP, not like a reset: bytes already sent wait, nothing is
  delivered, nobody is told. The relay simply stops reading, so the kernel buffers fill and the
  sender blocks, exactly as TCP does when its segments are dropped. Connections opened across a cut
  link are accepted by the proxy but not connected onward until the link heals (a SYN that gets no
  answer). Healing resumes delivery of what waited, as TCP retransmission would.

Theory of operation. Brokers connect to each other at the addresses they read from each other's
ZooKeeper registration, which are the `advertised.listeners`; clients use the same addresses. So
there is one *inbound proxy* per broker, and its address is what the broker advertises. All traffic
to broker B, from clients and from other brokers alike, goes through B's inbound proxy. Since every
connection comes from 127.0.0.1, the proxy tells the source by asking the kernel who owns the other
end: the connecting socket's inode from /proc/net/tcp, then which process holds that inode among
its file descriptors (/proc/<pid>/fd). The harness's own process is `client`; a broker's process is
that broker; anything else is refused (closed at once), so a lookup that fails can never slip a
broker's connection past a cut. ZooKeeper needs no lookup: each broker gets its own ZooKeeper proxy
(its `zookeeper.connect` names it), so the link is known from the port.

    clients (harness) ──► inbound proxy of bN ──► bN's listener
    broker bM ─────────► inbound proxy of bN ──► bN's listener      link (bM, bN) / (bN, bM)
    broker bN ─────────► ZooKeeper proxy of bN ──► ZooKeeper         link (bN, zk) / (zk, bN)
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
CLIENT = "client"
ZOOKEEPER = "zk"
RELAY_CHUNK_BYTES = 65536
CONNECT_TIMEOUT_S = 10


def broker_node(broker_id: int) -> str:
    return f"b{broker_id}"


# -- who is on the other end --------------------------------------------------------------------

def _hex_port(address: str) -> int:
    return int(address.rsplit(":", 1)[1], 16)


def socket_inode(local_port: int, remote_port: int, table: str = "/proc/net/tcp") -> int | None:
    """The inode of the loopback TCP socket bound to `local_port` and connected to `remote_port`."""
    try:
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                if _hex_port(fields[1]) == local_port and _hex_port(fields[2]) == remote_port:
                    return int(fields[9])
    except OSError:
        return None
    return None


def process_holds_socket(pid: int, inode: int) -> bool:
    target = f"socket:[{inode}]"
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                return True
        except OSError:
            continue
    return False


def connection_owner(peer_port: int, proxy_port: int, candidates: dict[str, int | None]) -> str | None:
    """Which of `candidates` (node → pid) opened the connection from `peer_port` to `proxy_port`."""
    inode = socket_inode(peer_port, proxy_port)
    if inode is None or inode == 0:
        return None
    for node, pid in candidates.items():
        if pid is not None and process_holds_socket(pid, inode):
            return node
    return None


# -- the network --------------------------------------------------------------------------------

class Network:
    """Proxies and link gates, run on an asyncio loop in a thread of their own.

    Every method is called from other threads (the nemesis, the runner) and returns once the
    change is in effect.
    """

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="verify-network", daemon=True)
        self._gates: dict[tuple[str, str], asyncio.Event] = {}
        self._servers: list[asyncio.AbstractServer] = []
        self._writers: set[asyncio.StreamWriter] = set()
        self._pid_of: dict[str, Callable[[], int | None]] = {CLIENT: os.getpid}
        self.cut_links: set[tuple[str, str]] = set()
        self.refused = 0  # connections whose source could not be told
        self._closed = False
        self._thread.start()

    def _call(self, coroutine, timeout_s: float = 30):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout_s)

    # -- topology ----------------------------------------------------------------------------

    def register_process(self, node: str, pid_of: Callable[[], int | None]) -> None:
        """`pid_of()` is the current pid of `node` (a broker restarts with a new one)."""
        self._pid_of[node] = pid_of

    def add_inbound_proxy(self, node: str, upstream_port: int) -> int:
        """A proxy in front of `node`'s listener; sources told apart by process. Returns its port."""
        return self._call(self._serve(node, upstream_port, source=None))

    def add_link_proxy(self, source: str, destination: str, upstream_port: int) -> int:
        """A proxy that only `source` uses, to reach `destination` (a broker to ZooKeeper)."""
        return self._call(self._serve(destination, upstream_port, source=source))

    async def _serve(self, destination: str, upstream_port: int, source: str | None) -> int:
        async def accepted(reader, writer):
            await self._relay(reader, writer, destination, upstream_port, source)
        server = await asyncio.start_server(accepted, LOOPBACK, 0, backlog=256)
        self._servers.append(server)
        return server.sockets[0].getsockname()[1]

    # -- cuts ------------------------------------------------------------------------------

    def _gate(self, source: str, destination: str) -> asyncio.Event:
        gate = self._gates.get((source, destination))
        if gate is None:
            gate = self._gates[(source, destination)] = asyncio.Event()
            if (source, destination) not in self.cut_links:
                gate.set()
        return gate

    def set_cuts(self, links: set[tuple[str, str]]) -> None:
        """Exactly `links` are cut from now on; every other link is whole."""
        assert all(a != b for a, b in links), "a node is never cut from itself"

        async def apply():
            self.cut_links = set(links)
            for key, gate in self._gates.items():
                if key in self.cut_links:
                    gate.clear()
                else:
                    gate.set()
            for key in self.cut_links:
                self._gate(*key).clear()
        self._call(apply())

    def cut(self, group_a: list[str], group_b: list[str]) -> None:
        """Add a two-way partition between every node of `group_a` and every node of `group_b`."""
        links = {(a, b) for a in group_a for b in group_b if a != b}
        self.set_cuts(self.cut_links | links | {(b, a) for a, b in links})

    def heal(self) -> None:
        self.set_cuts(set())

    # -- relaying --------------------------------------------------------------------------

    async def _relay(self, reader, writer, destination: str, upstream_port: int, source: str | None) -> None:
        self._writers.add(writer)
        upstream_writer = None
        try:
            if source is None:
                peer_port = writer.get_extra_info("peername")[1]
                proxy_port = writer.get_extra_info("sockname")[1]
                candidates = {node: pid_of() for node, pid_of in self._pid_of.items()}  # itself included
                source = await asyncio.to_thread(connection_owner, peer_port, proxy_port, candidates)
                if source is None:
                    self.refused += 1
                    log.info("connection to %s from an unknown or gone process (port %d) refused", destination, peer_port)
                    return
            forward, backward = self._gate(source, destination), self._gate(destination, source)
            await forward.wait()  # an unanswered SYN while the link is cut
            try:
                upstream_reader, upstream_writer = await asyncio.wait_for(
                    asyncio.open_connection(LOOPBACK, upstream_port), CONNECT_TIMEOUT_S)
            except (OSError, asyncio.TimeoutError):
                return  # nothing listens (the process is down): the client sees its connection close
            self._writers.add(upstream_writer)
            pumps = [asyncio.ensure_future(self._pump(reader, upstream_writer, forward)),
                     asyncio.ensure_future(self._pump(upstream_reader, writer, backward))]
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            for pump in pumps:
                pump.cancel()
        except Exception:
            log.exception("relay to %s failed", destination)
        finally:
            for w in (writer, upstream_writer):
                if w is not None:
                    self._writers.discard(w)
                    w.close()

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, gate: asyncio.Event) -> None:
        try:
            while True:
                data = await reader.read(RELAY_CHUNK_BYTES)
                if not data:
                    return
                if not gate.is_set():
                    await gate.wait()  # dropped on the floor until the link heals
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            return

    # -- end -------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every proxy and close every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True

        async def shut():
            for server in self._servers:
                server.close()
            for writer in list(self._writers):
                writer.close()
            for gate in self._gates.values():
                gate.set()  # let blocked relays run to their end
        try:
            self._call(shut(), timeout_s=10)
        except Exception:
            log.exception("closing the network")
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
