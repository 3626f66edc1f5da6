"""A simulated broker's view of ZooKeeper (weir/coordination/zk_watcher.py and the election part of
server.py in production): read everything at registration and after a reconnection, follow the
watches one by one, hand partition states and topic configs to the broker, tell its controller
that the metadata changed, and run for controller whenever /controller is empty.
"""

from __future__ import annotations

from weir.sim.controller import SimController
from weir.sim.zookeeper import CONTROLLER, NODE_EXISTS, OK, state_path
from weir.zk.formats import BROKER_IDS_PATH, CONTROLLED_SHUTDOWN_PATH
from weir.zk.model import NO_LEADER

RETRY_MS = 100


class SimWatcher:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.zk = broker.zk

    def read_all(self) -> None:
        broker, sid = self.broker, self.zk.sid

        def loaded(status, snapshot):
            if sid != self.zk.sid or not self.zk.registered:
                return
            if status != OK:
                broker.later(RETRY_MS, self.read_all)
                return
            broker.configs = snapshot["configs"]
            broker.on_live_brokers(frozenset(snapshot["brokers"]))
            for assignment in snapshot["topics"].values():
                broker.on_assignment(assignment)
            broker.controller_id = snapshot["controller"]
            broker.can_lead = True
            for key, (state, mzxid) in sorted(snapshot["states"].items()):
                broker.apply_state(key, state, mzxid)
            if broker.controller is not None:
                if broker.controller_id == broker.id:
                    broker.controller.on_metadata_change()
                else:
                    self.resign("/controller")
            self._maybe_run()
        self.zk.request("read_all", broker.world.topics, True, callback=loaded)

    def _maybe_run(self) -> None:
        """Run for controller when /controller is empty, or names this broker while it runs no
        controller: an election won whose answer was lost (zk_metadata's _arm_controller_watch)."""
        broker = self.broker
        if broker.controller_id == NO_LEADER or (broker.controller_id == broker.id and broker.controller is None):
            self.try_elect()

    def on_watch(self, sid: int, path: str) -> None:
        broker = self.broker
        if sid != self.zk.sid:
            return
        if path == CONTROLLER:
            self.zk.request("get", CONTROLLER, True, callback=self._on_controller_znode)
        elif path == BROKER_IDS_PATH:
            self.zk.request("children", BROKER_IDS_PATH, True, callback=lambda status, r: status == OK
                            and broker.on_live_brokers(frozenset(int(name) for name in r)))
            if broker.controller is not None:
                broker.controller.on_metadata_change()
        elif path == CONTROLLED_SHUTDOWN_PATH:
            if broker.controller is not None:
                broker.controller.on_shutdown_requests()
        elif path.startswith("/brokers/topics/") and path.count("/") == 3:
            self.zk.request("get", path, True, callback=self._on_assignment)
        elif path.startswith("/config/topics/"):
            self.zk.request("get", path, True, callback=lambda status, r: self._on_config(path, status, r))
        elif path.endswith("/state"):
            parts = path.split("/")
            key = (parts[3], int(parts[5]))
            self.zk.request("get", path, True, callback=lambda status, r: status == OK and r is not None
                            and broker.apply_state(key, r[0], r[2]))

    def _on_assignment(self, status, result) -> None:
        broker = self.broker
        if status != OK or result is None:
            return
        assignment = result[0]
        hosted = set(broker.partitions)
        broker.on_assignment(assignment)
        for p, replicas in sorted(assignment.replicas.items()):
            key = (assignment.name, p)
            if broker.id in replicas and key not in hosted:  # newly assigned here: read its state
                self.zk.request("get", state_path(*key), False, callback=lambda status, r, key=key: status == OK
                                and r is not None and broker.apply_state(key, r[0], r[2]))
        if broker.controller is not None:
            broker.controller.on_metadata_change()

    def _on_controller_znode(self, status, result) -> None:
        broker = self.broker
        if status == OK:
            broker.controller_id = NO_LEADER if result is None else result[0]
            if broker.controller is not None and broker.controller_id != broker.id:
                self.resign("/controller changed")
            self._maybe_run()

    def _on_config(self, path: str, status, result) -> None:
        if status == OK:
            self.broker.on_config(path.rsplit("/", 1)[1], {} if result is None else result[0])
            if self.broker.controller is not None:
                self.broker.controller.on_metadata_change()

    def try_elect(self) -> None:
        broker, sid = self.broker, self.zk.sid
        if not self.zk.registered or broker.controller is not None:
            return

        def elected(status, result):
            if sid == self.zk.sid and self.zk.registered and status in (OK, NODE_EXISTS):
                broker.controller_id = broker.id if status == OK else result
                if status == OK:
                    broker.trace(f"won the controller election (epoch {result[0]})")
                    broker.controller = SimController(broker, *result)
                    broker.controller.start()
        self.zk.request("elect", broker.id, callback=elected)

    def resign(self, why: str) -> None:
        if self.broker.controller is not None:
            self.broker.trace(f"resigns as controller: {why}")
            self.broker.controller = None
