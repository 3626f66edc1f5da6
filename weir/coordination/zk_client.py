"""The broker side of ZooKeeper: a kazoo client bridged into asyncio, and broker registration.

kazoo runs its own threads: a connection thread that calls state listeners and a callback thread
that runs watches and async-result callbacks. Nothing here blocks those threads: every event is
handed to the asyncio loop with `loop.call_soon_threadsafe` and handled there, and blocking kazoo
calls are made through `asyncio.to_thread` or kazoo's `*_async` methods.

Connection states (kazoo's `KazooState`) as delivered to the asyncio-side handler:
  CONNECTED  connected, session valid (also after a reconnect, and after a new session following LOST)
  SUSPENDED  connection lost; the session may still be alive, ephemeral znodes may still exist
  LOST       the session is gone (expired, or closed by `close()`): its ephemeral znodes are
             deleted and must be re-created after the next CONNECTED (kazoo starts a new session
             by itself unless the client is closing)
Note that kazoo also fires, and forgets, every one-shot watch on SUSPENDED (event type NONE).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kazoo.client import KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError

from weir.coordination.zk_security import ZkSecurity
from weir.zk.formats import BROKER_IDS_PATH

log = logging.getLogger(__name__)


StateHandler = Callable[[str], Awaitable[None] | None]

__all__ = ["KazooState", "ZkSession", "BrokerIdInUse", "split_chroot", "ensure_chroot",
           "broker_registration", "BROKER_IDS_PATH"]


class BrokerIdInUse(RuntimeError):
    """Another live session holds /brokers/ids/<id>."""


def split_chroot(connect_string: str) -> tuple[str, str | None]:
    """'h1:2181,h2:2181/weir/a' -> ('h1:2181,h2:2181', '/weir/a'); no chroot -> (hosts, None)."""
    hosts, slash, path = connect_string.partition("/")
    chroot = ("/" + path).rstrip("/") if slash else ""
    return hosts, chroot or None


def ensure_chroot(connect_string: str, timeout_s: float = 10.0, security: ZkSecurity = ZkSecurity()) -> None:
    """Create the chroot path of `connect_string` (if it has one) as persistent znodes (with
    `security`'s ACLs).

    Blocking: from asyncio, run it with `asyncio.to_thread` (ZkSession.start does).
    """
    hosts, chroot = split_chroot(connect_string)
    if chroot is None:
        return
    client = security.client(hosts, timeout=timeout_s)
    client.start(timeout=timeout_s)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()


def broker_registration(broker_id: int, host: str, port: int, *, rack: str | None = None,
                        listener_name: str = "PLAINTEXT", security_protocol: str = "PLAINTEXT",
                        jmx_port: int = -1, listeners: list[tuple[str, str, str, int]] | None = None
                        ) -> dict[str, Any]:
    """The JSON content Kafka (version 5 of the format) writes to /brokers/ids/<id>.

    `listeners`: every advertised (name, protocol, host, port); without it, the one listener of
    `host`/`port`. As Kafka, "host"/"port" are those of a PLAINTEXT listener (null/-1 if none)."""
    if listeners is None:
        listeners = [(listener_name, security_protocol, host, port)]
    plaintext = next(((h, p) for _, protocol, h, p in listeners if protocol == "PLAINTEXT"), (None, -1))
    registration: dict[str, Any] = {
        "features": {},
        "listener_security_protocol_map": {name: protocol for name, protocol, _, _ in listeners},
        "endpoints": [f"{name}://{f'[{h}]' if ':' in h else h}:{p}" for name, _, h, p in listeners],
        "jmx_port": jmx_port,
        "port": plaintext[1],
        "host": plaintext[0],
        "version": 5,
        "timestamp": str(int(time.time() * 1000)),
    }
    if rack is not None:
        registration["rack"] = rack
    return registration


class ZkSession:
    """A kazoo client whose connection-state changes are delivered on the asyncio loop.

    `connect_string` may carry a chroot ('127.0.0.1:2181/weir'); with `create_chroot` (default)
    `start()` creates it first. `on_state(state)` runs on the loop for every KazooState change;
    it may be a coroutine function. `client_id=(session_id, password)` resumes an existing
    session (the test trick for forcing another client's session to expire). `security`: the
    digest login and znode ACLs (`zookeeper.set.acl`).
    """

    def __init__(self, connect_string: str, *, session_timeout_s: float = 6.0,
                 on_state: StateHandler | None = None, create_chroot: bool = True,
                 client_id: tuple[int, bytes] | None = None, security: ZkSecurity = ZkSecurity()) -> None:
        self.connect_string = connect_string
        self.session_timeout_s = session_timeout_s
        self.create_chroot = create_chroot
        self.security = security
        self.state: str = KazooState.LOST  # as last delivered on the loop; kazoo starts at LOST
        self.closing = False
        self._on_state = on_state
        self._state_listeners: list[StateHandler] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task] = set()
        self.client = security.client(connect_string, timeout=session_timeout_s, client_id=client_id)
        self.client.add_listener(self._listener)

    @property
    def session_id(self) -> int | None:
        client_id = self.client.client_id
        return client_id[0] if client_id else None

    async def start(self, timeout_s: float = 15.0) -> "ZkSession":
        """Connect; returns once CONNECTED (which the handler will already have been given)."""
        self._loop = asyncio.get_running_loop()
        if self.create_chroot:
            await asyncio.to_thread(ensure_chroot, self.connect_string, timeout_s, self.security)
        await asyncio.to_thread(self.client.start, timeout_s)
        return self

    async def close(self) -> None:
        """Close the session (its ephemeral znodes go at once) and stop kazoo's threads.

        The handler still sees the resulting LOST, with `self.closing` set.
        """
        self.closing = True
        await asyncio.to_thread(self._stop_and_close)
        for task in list(self._tasks):
            await asyncio.gather(task, return_exceptions=True)

    def _stop_and_close(self) -> None:
        self.client.stop()
        self.client.close()

    async def __aenter__(self) -> "ZkSession":
        return await self.start()

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    # -- bridging kazoo's threads into asyncio ------------------------------------------------

    def _listener(self, state: str) -> None:
        # Runs in kazoo's connection thread: hand over and return at once, never block here.
        self._call_on_loop(self._deliver_state, state)

    def _call_on_loop(self, fn: Callable[..., Any], *args: Any) -> None:
        loop = self._loop
        if loop is None:
            log.warning("kazoo event before start(); dropped: %s%r", getattr(fn, "__name__", fn), args)
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: nobody is left to tell
            pass

    def _deliver_state(self, state: str) -> None:
        previous, self.state = self.state, state
        log.info("ZooKeeper session %s: %s -> %s", self.connect_string, previous, state)
        if self._on_state is not None:
            self._run_handler(self._on_state, state)
        for listener in list(self._state_listeners):
            self._run_handler(listener, state)

    def add_state_listener(self, handler: StateHandler) -> None:
        """Also deliver every later state change to `handler` (on the loop, after `on_state`)."""
        self._state_listeners.append(handler)

    def remove_state_listener(self, handler: StateHandler) -> None:
        if handler in self._state_listeners:
            self._state_listeners.remove(handler)

    def _run_handler(self, handler: Callable[..., Any], *args: Any) -> None:
        try:
            result = handler(*args)
        except Exception:
            log.exception("ZooKeeper event handler %r failed", handler)
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            task.add_done_callback(self._handler_done)

    def _handler_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("ZooKeeper event handler failed", exc_info=task.exception())

    def on_loop(self, handler: Callable[..., Any]) -> Callable[..., None]:
        """Wrap an asyncio-side handler (sync or async) as a kazoo watch/callback.

        E.g. `session.client.get_children_async(path, watch=session.on_loop(children_changed))`.
        """
        def from_kazoo_thread(*args: Any) -> None:
            self._call_on_loop(self._run_handler, handler, *args)
        return from_kazoo_thread

    def wait(self, async_result) -> asyncio.Future:
        """An asyncio future for a kazoo IAsyncResult (from the client's `*_async` methods)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def settle(result) -> None:  # on the loop
            if future.done():
                return
            if result.successful():
                future.set_result(result.value)
            else:
                future.set_exception(result.exception)

        async_result.rawlink(lambda result: self._call_on_loop(settle, result))
        return future

    def wait_all(self, async_results) -> asyncio.Future:
        """One asyncio future for many kazoo IAsyncResults: it resolves, once all have completed,
        to a list holding each one's value or (not raised) exception, in order.

        Much cheaper than gathering `wait()`s for hundreds of pipelined requests: the loop is woken
        once for the lot instead of once per request.
        """
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        results = list(async_results)
        if not results:
            future.set_result([])
            return future
        remaining = [len(results)]
        lock = threading.Lock()

        def settle() -> None:  # on the loop
            if not future.done():
                future.set_result([r.value if r.successful() else r.exception for r in results])

        def one_done(_result) -> None:  # in a kazoo thread
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                self._call_on_loop(settle)

        for result in results:
            result.rawlink(one_done)
        return future

    # -- broker registration --------------------------------------------------------------------

    async def register_broker(self, broker_id: int, host: str, port: int, *, rack: str | None = None,
                              **registration: Any) -> str:
        """Create the ephemeral znode /brokers/ids/<broker_id> for this session; return its path.

        Idempotent within a session. Raises BrokerIdInUse if another session holds the id. After
        LOST the znode is gone: the caller registers again once CONNECTED.
        """
        path = f"{BROKER_IDS_PATH}/{broker_id}"
        data = json.dumps(broker_registration(broker_id, host, port, rack=rack, **registration),
                          separators=(",", ":")).encode()
        while True:
            try:
                await self.wait(self.client.create_async(path, data, ephemeral=True, makepath=True))
                return path
            except NodeExistsError:
                pass
            try:
                _, stat = await self.wait(self.client.get_async(path))
            except NoNodeError:  # the old session expired between the two calls: create again
                continue
            if stat.ephemeralOwner != self.session_id:
                raise BrokerIdInUse(
                    f"broker id {broker_id} is registered by another live ZooKeeper session "
                    f"(0x{stat.ephemeralOwner:x})")
            await self.wait(self.client.set_async(path, data, version=stat.version))
            return path

    async def registered_brokers(self) -> dict[int, dict[str, Any]]:
        """The brokers currently registered under /brokers/ids, by id."""
        try:
            ids = await self.wait(self.client.get_children_async(BROKER_IDS_PATH))
        except NoNodeError:
            return {}
        brokers = {}
        for child in ids:
            try:
                data, _ = await self.wait(self.client.get_async(f"{BROKER_IDS_PATH}/{child}"))
            except NoNodeError:  # deregistered meanwhile
                continue
            brokers[int(child)] = json.loads(data)
        return brokers
