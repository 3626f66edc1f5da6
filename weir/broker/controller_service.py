"""The controller's shell: win the election, feed the core one event at a time, write its decisions.

Every broker runs one; the one that wins /controller in ZooKeeper is active. Events - broker
registrations, topic creation and deletion, config changes, AlterPartition requests, ElectLeaders,
controlled shutdowns, the leader-balance timer - are queued and handled strictly in order by one
task, like Kafka's controller event thread: the core builds each decision on the previous ones,
and the shell finishes writing one event's state changes (compare-and-set, fenced by the
controller epoch) before it takes the next. Brokers learn the new states by watching ZooKeeper.
"""

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable

from ..config import BrokerConfig
from ..controller.decisions import ControllerConfig, ControllerCore, StateChange
from ..controller.partition_change import ElectionType
from ..coordination.model import ClusterView, PartitionState
from ..coordination.zk_metadata import ControllerFenced, ZkMetadataStore
from ..coordination.zk_watcher import MetadataWatcher
from ..protocol.errors import ErrorCode

log = logging.getLogger(__name__)

MAX_CONFLICT_ROUNDS = 10
STARTUP_WAIT_S = 15  # at most this long for the first election, its writes, and our watcher to see them
# A broker asks for controlled shutdown with an ephemeral child here (kio has no ControlledShutdown API).
CONTROLLED_SHUTDOWN_PATH = "/admin/controlled_shutdown"


def registered_after_their_states(view: ClusterView) -> set[int]:
    """Live brokers whose registration is newer than a partition state naming them in the ISR (as
    leader or member). Such a state describes the broker's previous incarnation, which may have
    held records this one lost: a new controller, which never saw the registration change, must
    treat the broker as bounced (Kafka: broker epochs, KIP-380). This also makes it rewrite every
    state naming such a broker as leader, which is what lets the broker lead again: a broker takes
    no leadership from a state older than its own registration (ReplicaManager)."""
    epochs = view.broker_epochs
    bounced = set()
    for key, state in view.states.items():
        zxid = view.state_zxids.get(key)
        if zxid is None:
            continue
        for b in state.isr:
            if b in view.brokers and b in epochs and epochs[b] > zxid:
                bounced.add(b)
    return bounced


class ControllerService:
    def __init__(self, config: BrokerConfig, store: ZkMetadataStore, watcher: MetadataWatcher) -> None:
        self.broker_id = config["broker.id"]
        self.store = store
        self.watcher = watcher
        self.core_config = ControllerConfig(
            unclean_leader_election_enable=config["unclean.leader.election.enable"],
            auto_leader_rebalance_enable=config["auto.leader.rebalance.enable"],
            leader_imbalance_per_broker_percentage=config["leader.imbalance.per.broker.percentage"],
            leader_imbalance_check_interval_seconds=config["leader.imbalance.check.interval.seconds"])
        self.core: ControllerCore | None = None
        self.rng = random.Random()
        self._written_at_election: dict[tuple[str, int], PartitionState] = {}
        self._events: asyncio.Queue = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._balance_task: asyncio.Task | None = None
        self._known: ClusterView | None = None  # what the core has been told of topics and brokers
        self._shutdown_watch = store.session.on_loop(self._on_shutdown_requests)

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
            await asyncio.wait_for(self.call("elect"), STARTUP_WAIT_S)
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
            await self.store.resign()
        self.core = None

    # -- events in ----------------------------------------------------------------------

    def elect(self) -> None:
        """Try for the controller role (at start, and whenever /controller disappears)."""
        self._events.put_nowait(("elect", None, None))

    def on_metadata_change(self, kind: str, key) -> None:
        if self.core is not None and kind in ("brokers", "topic", "topic_deleted", "config", "current"):
            self._events.put_nowait(("metadata", None, None))

    async def call(self, name: str, *args):
        """Run an operation on the controller's event queue and return its answer."""
        future = asyncio.get_running_loop().create_future()
        self._events.put_nowait((name, args, future))
        return await future

    async def _run(self) -> None:
        handlers: dict[str, Callable[..., Awaitable]] = {
            "elect": self._elect, "metadata": self._metadata, "alter_partition": self._alter_partition,
            "elect_leaders": self._elect_leaders, "controlled_shutdown": self._controlled_shutdown,
            "balance": self._balance, "rewatch_shutdowns": self._watch_shutdown_requests,
        }
        while True:
            name, args, future = await self._events.get()
            try:
                if name != "elect" and not self.active:
                    if future is not None:
                        future.set_result(None)
                    continue
                if name != "elect":
                    await self._settle()
                result = await handlers[name](*(args or ()))
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

    # -- election --------------------------------------------------------------------------

    async def _elect(self) -> None:
        if self.active:
            return
        epoch = await self.store.try_become_controller(self.broker_id)
        if epoch is None:
            return
        await self.watcher.wait_current(30)
        view = self.watcher.snapshot()
        view.controller_id, view.controller_epoch = self.broker_id, epoch
        self.core = ControllerCore(view, self.core_config)
        self._known = view
        log.info("broker %d is now the controller (epoch %d)", self.broker_id, epoch)
        bounced = registered_after_their_states(view)
        if bounced:
            log.info("controller: brokers %s registered after states naming them in the ISR were written: "
                     "treating them as bounced", sorted(bounced))
            self._written_at_election = await self._write(self.core.on_brokers_changed(view.brokers, bounced))
        else:
            self._written_at_election = await self._write(self.core.reconcile())
        await self._watch_shutdown_requests()
        if self.core_config.auto_leader_rebalance_enable:
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
        self.core = None
        if self._balance_task is not None:
            self._balance_task.cancel()
        await self.store.resign()

    async def _balance_timer(self) -> None:
        while True:
            await asyncio.sleep(self.core_config.leader_imbalance_check_interval_seconds)
            self._events.put_nowait(("balance", None, None))

    # -- controlled shutdown requests ----------------------------------------------------------

    async def _watch_shutdown_requests(self) -> None:
        client = self.store.client
        await self.store.session.wait(client.ensure_path_async(CONTROLLED_SHUTDOWN_PATH))
        children = await self.store.session.wait(
            client.get_children_async(CONTROLLED_SHUTDOWN_PATH, watch=self._shutdown_watch))
        for child in children:
            if child.isdigit() and int(child) not in self.core.shutting_down:
                self._events.put_nowait(("controlled_shutdown", (int(child),), None))

    def _on_shutdown_requests(self, event) -> None:
        if self.active:
            self._events.put_nowait(("rewatch_shutdowns", None, None))

    # -- metadata events -----------------------------------------------------------------------

    async def _metadata(self) -> None:
        """Tell the core what changed in topics, configs and brokers since it last heard."""
        core, known, now = self.core, self._known, self.watcher.snapshot()
        changes: list[StateChange] = []
        # A registration with a new broker epoch (czxid) is a bounce: gone and back between two looks.
        bounced = {b for b, epoch in now.broker_epochs.items()
                   if b in now.brokers and known.broker_epochs.get(b, epoch) != epoch}
        if now.brokers.keys() != known.brokers.keys() or bounced:
            gone, joined = known.brokers.keys() - now.brokers.keys(), now.brokers.keys() - known.brokers.keys()
            log.info("controller: brokers %s (gone %s, joined %s, bounced %s)", sorted(now.brokers), sorted(gone),
                     sorted(joined), sorted(bounced))
            changes += core.on_brokers_changed(now.brokers, bounced, now.broker_epochs)
        for name in known.topics.keys() - now.topics.keys():
            core.on_topic_deleted(name)
        for name, assignment in now.topics.items():
            old = known.topics.get(name)
            if old is None:
                changes += core.on_topic_created(assignment, now.topic_configs.get(name, {}))
            elif len(assignment.replicas) > len(old.replicas):
                added = {p: r for p, r in assignment.replicas.items() if p not in old.replicas}
                changes += core.on_partitions_added(name, added)
        for name, configs in now.topic_configs.items():
            if name in now.topics and configs != known.topic_configs.get(name):
                changes += core.on_topic_config_changed(name, configs)
        self._known = now
        await self._write(changes)

    # -- requests -------------------------------------------------------------------------------

    async def _alter_partition(self, topic: str, partition: int, leader_id: int, leader_epoch: int,
                               partition_epoch: int, new_isr,
                               broker_epochs=None) -> tuple[ErrorCode, PartitionState | None]:
        outcome = self.core.on_alter_partition(topic, partition, leader_id, leader_epoch, partition_epoch, new_isr,
                                               broker_epochs)
        if outcome.error or outcome.change is None:
            return outcome.error, outcome.state
        written = await self._write([outcome.change])
        if outcome.change.key not in written:
            return ErrorCode.invalid_update_version, None
        return ErrorCode.none, written[outcome.change.key]

    async def _elect_leaders(self, election: ElectionType, partitions) -> dict:
        outcome = self.core.elect_leaders(election, partitions)
        written = await self._write(outcome.changes)
        results = dict(outcome.results)
        for change in outcome.changes:
            if change.key not in written:
                results[change.key] = ErrorCode.invalid_update_version
        return results

    async def _controlled_shutdown(self, broker_id: int) -> list:
        log.info("controller: controlled shutdown of broker %d", broker_id)
        outcome = self.core.on_controlled_shutdown(broker_id)
        await self._write(outcome.changes)
        return outcome.remaining

    async def _balance(self) -> None:
        await self._write(self.core.check_leader_balance())

    # -- writing decisions ----------------------------------------------------------------------

    async def _settle(self) -> None:
        """Before the core decides or answers anything: states it decided whose write ended with no
        answer (a lost connection, a suspended session) may or may not be in ZooKeeper. Re-read
        them and adopt what is stored, so the view never holds a state ZooKeeper did not record
        (answering a repeated AlterPartition "done" from such a view let a leader commit against an
        ISR that a later election did not know). Raises, and the event fails, while ZooKeeper
        cannot be read; the next event tries again."""
        keys = self.core.unconfirmed_keys
        if not keys:
            return
        stored = await self.store.read_partition_states(keys)
        log.warning("controller: re-read %d partition state(s) whose write had no answer", len(keys))
        changes: list[StateChange] = []
        for key in keys:
            changes += self.core.adopt_stored(key, stored.get(key))
        await self._write(changes)

    async def _write(self, changes: list[StateChange]) -> dict[tuple[str, int], PartitionState]:
        """Write changes (creates, then compare-and-sets); re-decide conflicts. Returns what was written."""
        written: dict[tuple[str, int], PartitionState] = {}
        for _ in range(MAX_CONFLICT_ROUNDS):
            if not changes:
                break
            follow_ups: list[StateChange] = []
            creates = [c for c in changes if c.expected_version is None]
            updates = [c for c in changes if c.expected_version is not None]
            by_topic: dict[str, list[StateChange]] = {}
            for c in creates:
                by_topic.setdefault(c.topic, []).append(c)
            for topic, group in by_topic.items():
                created = await self.store.create_partition_states(topic, {c.partition: c.new for c in group})
                missing = [c for c in group if c.partition not in created]
                stored = await self.store.read_partition_states([c.key for c in missing]) if missing else {}
                for c in group:
                    if c.partition in created:
                        self.core.on_state_written(c, created[c.partition].partition_epoch)
                        written[c.key] = created[c.partition]
                    else:
                        follow_ups += self.core.on_write_conflict(c, stored.get(c.key))
            if updates:
                results = await self.store.write_partition_states(
                    [(c.topic, c.partition, c.expected_version, c.new) for c in updates])
                for c, result in zip(updates, results):
                    if result.ok:
                        self.core.on_state_written(c, result.partition_epoch)
                        written[c.key] = result.state
                    else:
                        follow_ups += self.core.on_write_conflict(c, result.current)
            for c in changes:
                if c.key in written:
                    log.info("controller: %s-%d leader %d epoch %d isr %s (%s)", c.topic, c.partition, c.new.leader,
                             c.new.leader_epoch, list(c.new.isr), c.reason)
            changes = follow_ups
        return written
