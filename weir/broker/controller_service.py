"""The controller's shell: win the election, run weir/controller/events.py's handlers one event at
a time, and carry out the store operations they yield against ZooKeeper.

Every broker runs one; the one that wins /controller in ZooKeeper is active. Events - broker
registrations, topic creation and deletion, config changes, AlterPartition requests, ElectLeaders,
partition reassignments, controlled shutdowns, the leader-balance timer - are queued and handled strictly in order by one
task, like Kafka's controller event thread. Brokers learn the new states by watching ZooKeeper.
The simulator runs the same handlers (weir/sim/controller.py).
"""

import asyncio
import dataclasses
import logging

from weir.broker.metrics import BrokerMetrics
from weir.config.broker_config import BrokerConfig
from weir.controller.decisions import FIRST_LEADER_BALANCE_CHECK_S, ControllerConfig, ControllerCore, StateChange
from weir.controller.events import (READ_AGAIN, SHUTDOWN_REQUESTS_RETRY_MS, ControllerEvents, CreateStates, ReadCluster,
                                    ReadShutdownRequests, ReadStates, WriteAssignments, WriteStates, run_handler)
from weir.coordination.zk_metadata import ControllerFenced, ZkMetadataStore
from weir.coordination.zk_watcher import MetadataWatcher
from weir.zk.formats import CONTROLLED_SHUTDOWN_PATH
from weir.zk.model import PartitionState

log = logging.getLogger(__name__)

STARTUP_WAIT_S = 15  # at most this long for the first election, its writes, and our watcher to see them
SHELL_EVENTS = ("elect", "rewatch_shutdowns")


class ControllerService:
    def __init__(self, config: BrokerConfig, store: ZkMetadataStore, watcher: MetadataWatcher,
                 metrics: BrokerMetrics | None = None) -> None:
        self.broker_id = config["broker.id"]
        self.config = config
        self.store = store
        self.watcher = watcher
        self.core_config = ControllerConfig(
            unclean_leader_election_enable=config["unclean.leader.election.enable"],
            auto_leader_rebalance_enable=config["auto.leader.rebalance.enable"],
            leader_imbalance_per_broker_percentage=config["leader.imbalance.per.broker.percentage"],
            leader_imbalance_check_interval_seconds=config["leader.imbalance.check.interval.seconds"])
        self.metrics = metrics or BrokerMetrics()
        self.events = ControllerEvents(self.broker_id, self.core_config, on_written=self._on_written)
        self._written_at_election: dict[tuple[str, int], PartitionState] = {}
        self._events: asyncio.Queue = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._balance_task: asyncio.Task | None = None
        self._shutdown_watch = store.session.on_loop(self._on_shutdown_requests)

    @property
    def core(self) -> ControllerCore | None:
        return self.events.core

    @property
    def active(self) -> bool:
        return self.core is not None and self.store.is_controller

    async def start(self) -> None:
        """Run for controller; if this broker wins, return once its first writes are in our own view.
        A restarted broker leads only from states written after it registered (broker epochs): in a
        one-broker cluster those are the ones its own controller writes now, so waiting here means
        the broker is leading again by the time it says it is ready."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller")
        try:
            async with asyncio.timeout(STARTUP_WAIT_S):  # not wait_for: on 3.11 it can swallow a cancel
                await self.call("elect")
            if self.active:
                await self._wait_until_seen(self._written_at_election, STARTUP_WAIT_S)
        except Exception as e:  # a slow or failed first election: it carries on in the background
            log.warning("controller start-up did not settle: %r", e)

    async def stop(self) -> None:
        for task in (self._task, self._balance_task):
            if task is not None:
                task.cancel()
        await asyncio.gather(*(t for t in (self._task, self._balance_task) if t), return_exceptions=True)
        if self.active:
            try:  # kazoo holds a request while ZooKeeper is out of reach: /controller goes with our session anyway
                async with asyncio.timeout(self.config["zookeeper.session.timeout.ms"] / 1000):
                    await self.store.resign()
            except TimeoutError:
                log.warning("controller: could not delete /controller in time; it goes with our session")
        self.events.resigned()

    def on_session_lost(self) -> None:
        """Its ephemeral /controller went with the session: whatever it decided is no longer its to write."""
        self.events.resigned()
        self._stop_balance_timer()

    # -- events in ----------------------------------------------------------------------

    def elect(self) -> None:
        """Try for the controller role (at start, and whenever /controller disappears)."""
        self._events.put_nowait(("elect", None, None))

    def on_broker_config_changed(self, changed: set[str]) -> None:
        """A dynamic unclean.leader.election.enable: the controller decides with it from now on,
        reviving offline partitions it now allows (Kafka's enableDefaultUncleanLeaderElection)."""
        if "unclean.leader.election.enable" in changed:
            self.core_config = dataclasses.replace(
                self.core_config, unclean_leader_election_enable=self.config["unclean.leader.election.enable"])
            self.events.config = self.core_config
            if self.core is not None:
                self._events.put_nowait(("controller_config", (self.core_config,), None))

    def on_metadata_change(self, kind: str, key) -> None:
        if self.core is not None and kind in ("brokers", "topic", "topic_deleted", "config", "current"):
            self._events.put_nowait(("metadata", None, None))

    async def call(self, name: str, *args):
        """Run an operation on the controller's event queue and return its answer."""
        future = asyncio.get_running_loop().create_future()
        self._events.put_nowait((name, args, future))
        return await future

    async def _run(self) -> None:
        while True:
            name, args, future = await self._events.get()
            self.metrics.controller_events.labels(name).inc()
            try:
                if name not in SHELL_EVENTS and not self.active:
                    if future is not None:
                        future.set_result(None)
                    continue
                if name == "elect":
                    result = await self._elect()
                elif name == "rewatch_shutdowns":
                    result = await self._watch_shutdown_requests()
                else:
                    result = await run_handler(self.events.handle(name, *(args or ())), self._execute)
                if future is not None and not future.done():
                    future.set_result(result)
            except ControllerFenced:
                log.warning("controller %d was fenced by a newer controller; resigning", self.broker_id)
                await self._resign()
                if future is not None and not future.done():
                    future.set_result(None)
            except Exception as e:
                log.exception("controller event %s failed", name)
                if future is not None and not future.done():
                    future.set_exception(e)

    def _on_written(self, change: StateChange) -> None:
        # a new leader at INFO; an ISR change only at DEBUG: a broker's death changes thousands
        log.log(logging.INFO if change.old is None or change.new.leader != change.old.leader else logging.DEBUG,
                "controller: %s-%d leader %d epoch %d isr %s (%s)", change.topic, change.partition,
                change.new.leader, change.new.leader_epoch, list(change.new.isr), change.reason)
        self.metrics.on_state_written(change.old, change.new)

    async def _execute(self, op):
        """One store operation a handler yielded, against ZooKeeper."""
        if isinstance(op, ReadCluster):
            return self.watcher.snapshot()
        if isinstance(op, ReadStates):
            return await self.store.read_partition_states(op.keys)
        if isinstance(op, CreateStates):
            return await self.store.create_partition_states(op.topic, op.states)
        if isinstance(op, WriteStates):
            return await self.store.write_partition_states(list(op.changes))
        if isinstance(op, WriteAssignments):
            return await self.store.write_assignments(op.assignments)
        if isinstance(op, ReadShutdownRequests):
            client = self.store.client
            await self.store.session.wait(client.ensure_path_async(CONTROLLED_SHUTDOWN_PATH))
            return await self.store.session.wait(client.get_children_async(CONTROLLED_SHUTDOWN_PATH,
                                                                           watch=self._shutdown_watch))
        raise TypeError(f"not a store operation: {op!r}")

    # -- election --------------------------------------------------------------------------

    async def _elect(self) -> None:
        if self.active:
            return
        epoch = await self.store.try_become_controller(self.broker_id)
        if epoch is None:
            return
        await self.watcher.wait_current(30)
        self._written_at_election = await run_handler(self.events.elected(epoch), self._execute)
        await self._watch_shutdown_requests()
        if self.core_config.auto_leader_rebalance_enable:
            self._stop_balance_timer()
            self._balance_task = asyncio.get_running_loop().create_task(self._balance_timer())

    async def _wait_until_seen(self, written: dict[tuple[str, int], PartitionState], timeout_s: float) -> None:
        """Until the watcher's view holds `written` (or newer), or the timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            states = self.watcher.view.states
            if all(key not in states or states[key].partition_epoch >= state.partition_epoch
                   for key, state in written.items()):
                await asyncio.sleep(0)  # let the broker apply what the watcher just reported
                return
            await asyncio.sleep(0.01)

    async def _resign(self) -> None:
        self.events.resigned()
        self._stop_balance_timer()
        await self.store.resign()

    async def _balance_timer(self) -> None:
        delay = FIRST_LEADER_BALANCE_CHECK_S
        while True:
            await asyncio.sleep(delay)
            self._events.put_nowait(("balance", None, None))
            delay = self.core_config.leader_imbalance_check_interval_seconds

    def _stop_balance_timer(self) -> None:
        if self._balance_task is not None:
            self._balance_task.cancel()

    # -- controlled shutdown requests ----------------------------------------------------------

    async def _watch_shutdown_requests(self) -> None:
        answer = await run_handler(self.events.shutdown_requests(), self._execute)
        if answer == READ_AGAIN:
            asyncio.get_running_loop().call_later(SHUTDOWN_REQUESTS_RETRY_MS / 1000, self._on_shutdown_requests, None)
            return
        for broker in answer:
            self._events.put_nowait(("controlled_shutdown", (broker,), None))

    def _on_shutdown_requests(self, event) -> None:
        if self.active:
            self._events.put_nowait(("rewatch_shutdowns", None, None))

