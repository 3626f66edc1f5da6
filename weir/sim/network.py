"""The simulated network: delivers, delays, drops, duplicates and partitions messages.

Rules:

- Every message takes 1..max_delay_ms, plus a per-node extra delay (a slow node).
- Every link is FIFO per direction, like the TCP connections Kafka runs on: Kafka's replication
  protocol relies on it (a follower's fetch offset is its LEO; a fetch overtaken by an older one
  would move that LEO backwards).
- Links between brokers and between clients and brokers are lossy: a message may be dropped (a
  connection reset; the sender's timeout retries). Messages from `duplicating` senders (the
  clients) may also arrive twice: a retried produce or read the broker cannot tell apart.
- Links to and from ZooKeeper model one ZooKeeper session: never dropped at random, never
  duplicated. A partition drops them, and the sender learns it the way a ZooKeeper client does:
  its requests time out, and the server marks the session as having missed events.
- A partition is a set of blocked directed links. A message is dropped if its link is blocked when
  it is sent or when it arrives.
- Extra delays never apply to ZooKeeper links: the session logic relies on delays below a third
  of the session timeout, as ZooKeeper itself does.
"""

from __future__ import annotations

import random
from collections.abc import Callable

ZK = "zk"


class Network:
    def __init__(self, events, rng: random.Random, *, max_delay_ms: int = 8, drop_rate: float = 0.0,
                 duplicate_rate: float = 0.0) -> None:
        self.events = events
        self.rng = rng
        self.max_delay_ms = max_delay_ms
        self.drop_rate = drop_rate
        self.duplicate_rate = duplicate_rate
        self.blocked: set[tuple] = set()
        self.extra_delay: dict = {}  # node -> ms added to its non-ZooKeeper traffic
        self.handlers: dict = {}  # node -> receive(src, message)
        self.on_zk_drop: Callable | None = None  # (src, dst): ZooKeeper marks the session
        self._fifo: dict[tuple, int] = {}
        self.duplicating: set = set()  # senders whose requests may arrive twice (clients that retry)
        self.sent = 0

    def register(self, node, handler: Callable) -> None:
        self.handlers[node] = handler

    # ----- partitions

    def block(self, a, b) -> None:
        """Cut both directions between a and b."""
        self.blocked.add((a, b))
        self.blocked.add((b, a))

    def isolate(self, node, others) -> None:
        for other in others:
            if other != node:
                self.block(node, other)

    def heal(self) -> None:
        self.blocked.clear()

    def connected(self, a, b) -> bool:
        return (a, b) not in self.blocked

    # ----- sending

    def send(self, src, dst, message) -> None:
        self.sent += 1
        if (src, dst) in self.blocked:
            self._dropped(src, dst)
            return
        rng = self.rng
        delay = rng.randint(1, self.max_delay_ms)
        zk_link = src == ZK or dst == ZK
        if not zk_link:
            if self.drop_rate and rng.random() < self.drop_rate:
                return
            delay += self.extra_delay.get(src, 0) + self.extra_delay.get(dst, 0)
        link = (src, dst)
        t = max(self.events.now + delay, self._fifo.get(link, 0))
        self._fifo[link] = t
        self.events.at(t, self._deliver, src, dst, message)
        if src in self.duplicating and self.duplicate_rate and rng.random() < self.duplicate_rate:
            t += rng.randint(1, self.max_delay_ms)
            self._fifo[link] = t
            self.events.at(t, self._deliver, src, dst, message)

    def _deliver(self, src, dst, message) -> None:
        if (src, dst) in self.blocked:
            self._dropped(src, dst)
            return
        self.handlers[dst](src, message)

    def _dropped(self, src, dst) -> None:
        if src == ZK and self.on_zk_drop is not None:
            self.on_zk_drop(dst)
