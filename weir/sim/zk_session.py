"""A simulated broker's ZooKeeper client (kazoo's part in production): one session, requests with
timeouts, heartbeats, and the session's states as weir.coordination.zk_client reports them.

- CONNECTED: requests are answered. A request without an answer for a third of the session
  timeout, or no answer at all for two thirds of it, is SUSPENDED (kazoo's connection loss):
  the broker can no longer prove it is alive to ZooKeeper.
- The next answer after a suspension (or one saying watches were missed) is a reconnection in
  the same session: the broker reads everything again.
- LOST: ZooKeeper answered SESSION_EXPIRED. The ephemeral registration is gone; a new session is
  opened and the broker registers again (retrying while the old registration lingers).
"""

from __future__ import annotations

from weir.sim.network import ZK
from weir.sim.zookeeper import NODE_EXISTS, OK, SESSION_EXPIRED, broker_path

TIMEOUT = "timeout"


class ZkSession:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.settings = broker.settings
        self.sid: int | None = None
        self.registered = False
        self.registration_zxid: int | None = None  # our broker epoch
        self.suspended = False
        self.last_ok = broker.now
        self.pending: dict[int, tuple] = {}
        self._next_id = 0

    def request(self, op: str, *args, callback=None) -> None:
        self._send(self.sid, op, args, callback)

    def _send(self, sid, op: str, args, callback) -> None:
        self._next_id += 1
        rid = self._next_id
        self.pending[rid] = (callback, sid)
        self.broker.send(ZK, ("req", sid, rid, op, args))
        self.broker.later(self.settings.zk_request_timeout_ms, self._timeout, rid)

    def _timeout(self, rid: int) -> None:
        entry = self.pending.pop(rid, None)
        if entry is None:
            return
        self._suspend()
        if entry[0] is not None:
            entry[0](TIMEOUT, None)

    def _suspend(self) -> None:
        if not self.suspended and self.sid is not None:
            self.suspended = True
            self.broker.trace("ZooKeeper connection suspended: no acknowledgements")
            self.broker.on_zk_suspended()

    def on_response(self, rid, status, result, missed) -> None:
        entry = self.pending.pop(rid, None)
        sid = entry[1] if entry is not None else self.sid
        if status == SESSION_EXPIRED:
            if sid is not None and sid == self.sid:
                self._lost()
            return
        self.last_ok = self.broker.now
        if (self.suspended or missed) and self.sid is not None and sid == self.sid:
            self.suspended = False
            self.broker.trace("ZooKeeper connection back; reading everything again")
            self.broker.on_zk_reconnected()
        if entry is not None and entry[0] is not None:
            entry[0](status, result)

    def _lost(self) -> None:
        self.broker.trace("ZooKeeper session lost")
        self.registered = False
        self.sid = None
        self.suspended = False
        self.pending.clear()
        self.broker.on_zk_session_lost()
        self.connect()

    def connect(self) -> None:
        def connected(status, sid):
            if status == OK:
                self.sid = sid
                self.last_ok = self.broker.now
                self._register()
            else:
                self.broker.later(100, self.connect)
        self._send(None, "connect", (self.settings.zookeeper_session_timeout_ms,), connected)

    def _register(self) -> None:
        sid = self.sid

        def registered(status, result):
            if sid != self.sid:
                return
            if status == NODE_EXISTS and result[1] == sid:  # our own create, whose answer was lost (Kafka's
                status, result = OK, result[0]               # checkedEphemeralCreate)
            if status == OK:
                self.registered = True
                self.registration_zxid = result
                self.broker.trace(f"registered (session {sid})")
                self.broker.on_zk_registered()
            else:  # an old session's registration lingers until it expires (server.py's _register)
                self.broker.later(200, self._register)
        self.request("create", broker_path(self.broker.id), self.broker.id, True, callback=registered)

    def heartbeat(self) -> None:
        if self.sid is not None:
            if self.broker.now - self.last_ok > 2 * self.settings.zookeeper_session_timeout_ms // 3:
                self._suspend()
            self.request("heartbeat")
        self.broker.later(self.settings.zk_heartbeat_ms, self.heartbeat)
