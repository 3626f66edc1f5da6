"""A broker's always-current view of the cluster metadata in ZooKeeper, kept by watches.

`MetadataWatcher` maintains a `ClusterView`: live brokers (/brokers/ids children and their
registrations, with each registration's czxid - the broker epoch of KIP-380 - and owning session),
topics (/brokers/topics children and their assignments), every partition state (with the mzxid
of its znode), topic configs, the controller id and epoch, and the session it was read in. After each change it has applied it calls the
asyncio-side `on_change(kind, key)`:

    ("brokers", None)             a broker registered, re-registered (a new broker epoch, even with
                                  the same contents) or went away
    ("controller", None)          /controller or /controller_epoch changed
    ("topic", name)               a topic appeared (its states and config are in the view already)
                                  or its assignment changed (e.g. partitions added)
    ("topic_deleted", name)       a topic is gone (with its states and config)
    ("partition", (topic, p))     a partition state was created, changed or removed
    ("config", name)              a topic's config overrides changed
    ("stale", None)               the session is suspended/lost: the view may be outdated
    ("current", None)             the view has been fully re-read after (re)connecting

How: every watch event (a kazoo thread) is turned, on the loop, into a mark on a set of dirty
items, and wakes a single reconcile task. That task takes all marks at once and re-reads them in
stages, each stage's reads pipelined (children listings and the controller; then broker
registrations, topic assignments and configs; then partition states), every read re-arming its
watch; then it applies the results to the view and emits the callbacks. One task applying
batches means no stale read can overwrite a newer one (a session's reads are answered in order),
and a burst of 1000 state changes costs one pipelined round of 1000 reads. Watch callbacks are the
same two callables for every path, so kazoo (which keeps a set of watchers per path) never piles
up duplicates.

kazoo drops every watch when the connection is suspended. So on SUSPENDED/LOST the view is kept
but `is_current` turns False, and on CONNECTED everything is re-read (a full reconcile that
re-arms every watch and emits callbacks for whatever differs); `is_current` turns True again once
that has completed without another disconnection.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import EventType

from weir.coordination.zk_client import KazooState, ZkSession
from weir.zk.formats import (BROKER_IDS_PATH, CONFIG_BROKERS_PATH, CONTROLLER_EPOCH_PATH, CONTROLLER_PATH, TOPICS_PATH,
                             FormatError, broker_config_path, broker_path, decode_broker_endpoints,
                             decode_broker_registration, decode_controller, decode_controller_epoch,
                             decode_partition_state, decode_topic_assignment, decode_topic_config, parse_path,
                             partition_state_path, topic_config_path, topic_path)
from weir.zk.model import NO_LEADER, ClusterView, PartitionState, TopicAssignment, TopicsByName

log = logging.getLogger(__name__)

__all__ = ["MetadataWatcher"]

ChangeHandler = Callable[[str, Any], Awaitable[None] | None]
Key = tuple[str, int]


@dataclasses.dataclass
class _Dirty:
    full: bool = False
    broker_ids: bool = False     # the children of /brokers/ids
    topic_names: bool = False    # the children of /brokers/topics
    controller: bool = False
    brokers: set[int] = dataclasses.field(default_factory=set)
    topics: set[str] = dataclasses.field(default_factory=set)
    configs: set[str] = dataclasses.field(default_factory=set)
    states: set[Key] = dataclasses.field(default_factory=set)
    broker_config_names: bool = False  # the children of /config/brokers
    broker_configs: set[str] = dataclasses.field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.full or self.broker_ids or self.topic_names or self.controller
                    or self.brokers or self.topics or self.configs or self.states
                    or self.broker_config_names or self.broker_configs)

    def merge(self, other: "_Dirty") -> None:
        self.full |= other.full
        self.broker_ids |= other.broker_ids
        self.topic_names |= other.topic_names
        self.controller |= other.controller
        self.brokers |= other.brokers
        self.topics |= other.topics
        self.configs |= other.configs
        self.states |= other.states
        self.broker_config_names |= other.broker_config_names
        self.broker_configs |= other.broker_configs


@dataclasses.dataclass
class _Batch:
    """What one reconcile has read and decided so far, from stage to stage."""
    dirty: _Dirty
    events: list[tuple[str, Any]] = dataclasses.field(default_factory=list)
    brokers_changed: bool = False
    deleted: set[str] = dataclasses.field(default_factory=set)
    new_topics: dict[str, TopicAssignment] = dataclasses.field(default_factory=dict)
    changed_topics: dict[str, TopicAssignment] = dataclasses.field(default_factory=dict)
    configs_read: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    state_reads: set[Key] = dataclasses.field(default_factory=set)
    states_read: dict[Key, PartitionState | None] = dataclasses.field(default_factory=dict)
    zxids: dict[Key, int] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.state_reads |= self.dirty.states

    def assignment_of(self, topic: str, view: ClusterView) -> TopicAssignment | None:
        return self.new_topics.get(topic) or self.changed_topics.get(topic) or (
            None if topic in self.deleted else view.topics.get(topic))


class MetadataWatcher:
    """The watched ClusterView of one ZkSession. `await start()` returns once it is loaded."""

    def __init__(self, session: ZkSession, on_change: ChangeHandler | None = None) -> None:
        self.session = session
        self.client = session.client
        self.on_change = on_change
        self.view = ClusterView()
        self.endpoints: dict[int, list[tuple[str, str, int]]] = {}  # broker → (listener, host, port)
        self.is_current = False
        self._current = asyncio.Event()
        self._dirty = _Dirty()
        self._wake = asyncio.Event()
        self._connection_gen = 0    # bumped on every state change
        self._connected = False
        self._task: asyncio.Task | None = None
        self._callback_tasks: set[asyncio.Task] = set()
        self._data_watch = session.on_loop(self._on_data_event)
        self._child_watch = session.on_loop(self._on_child_event)
        self.reconciles = 0  # batches processed (for tests and metrics)

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self, timeout_s: float | None = 30.0) -> "MetadataWatcher":
        self.session.add_state_listener(self._on_state)
        self._connected = self.session.state == KazooState.CONNECTED
        self._dirty.full = True
        self._task = asyncio.ensure_future(self._run())
        self._wake.set()
        await self.wait_current(timeout_s)
        return self

    async def stop(self) -> None:
        self.session.remove_state_listener(self._on_state)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await asyncio.gather(*self._callback_tasks, return_exceptions=True)

    async def wait_current(self, timeout_s: float | None = None) -> None:
        async with asyncio.timeout(timeout_s):  # not wait_for: on 3.11 it can swallow a cancel
            await self._current.wait()

    def snapshot(self) -> ClusterView:
        """A copy of the view that later changes will not touch."""
        v = self.view
        return ClusterView(brokers=dict(v.brokers), topics=TopicsByName(v.topics), states=dict(v.states),
                           topic_configs={t: dict(c) for t, c in v.topic_configs.items()},
                           broker_configs={e: dict(c) for e, c in v.broker_configs.items()},
                           controller_id=v.controller_id, controller_epoch=v.controller_epoch,
                           broker_epochs=dict(v.broker_epochs), broker_sessions=dict(v.broker_sessions),
                           state_zxids=dict(v.state_zxids), session_id=v.session_id)

    # -- events from kazoo (already on the loop) ---------------------------------------------------

    def _mark(self) -> None:
        self._wake.set()

    def _on_state(self, state: str) -> None:
        self._connection_gen += 1
        if state == KazooState.CONNECTED:
            self._connected = True
            self._dirty.full = True  # every watch was dropped: re-read everything
            self._mark()
        else:
            self._connected = False
            if self.is_current:
                self.is_current = False
                self._current.clear()
                self._emit([("stale", None)])

    def _on_child_event(self, event) -> None:
        if event.type == EventType.NONE:
            return
        if event.path == BROKER_IDS_PATH:
            self._dirty.broker_ids = True
        elif event.path == TOPICS_PATH:
            self._dirty.topic_names = True
        elif event.path == CONFIG_BROKERS_PATH:
            self._dirty.broker_config_names = True
        else:
            return
        self._mark()

    def _on_data_event(self, event) -> None:
        if event.type == EventType.NONE:
            return
        parsed = parse_path(event.path)
        if parsed is None:
            return
        kind, key = parsed
        d = self._dirty
        if kind == "controller":
            d.controller = True
        elif kind == "broker":
            d.brokers.add(key)
        elif kind == "topic":
            d.topics.add(key)
        elif kind == "state":
            d.states.add(key)
        elif kind == "config":
            d.configs.add(key)
        elif kind == "broker_ids":
            d.broker_ids = True
        elif kind == "topics":
            d.topic_names = True
        elif kind == "broker_config":
            d.broker_configs.add(key)
        elif kind == "broker_configs":
            d.broker_config_names = True
        self._mark()

    # -- the reconcile task ------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._connected or not self._dirty:
                continue
            await asyncio.sleep(0)  # let the rest of an event burst land in this batch
            dirty, self._dirty = self._dirty, _Dirty()
            gen = self._connection_gen
            try:
                events = await self._reconcile(dirty)
            except KazooException as e:  # connection loss etc.: CONNECTED will bring a full re-read
                log.info("metadata reconcile interrupted (%r); retrying after reconnect", e)
                dirty.full = True
                self._dirty.merge(dirty)
                if self._connected:
                    self._mark()
                continue
            except Exception:
                log.exception("metadata reconcile failed; re-reading everything")
                self._dirty.full = True
                self._mark()
                continue
            self.reconciles += 1
            if dirty.full and gen == self._connection_gen and self._connected and not self.is_current:
                self.is_current = True
                self._current.set()
                events.append(("current", None))
            self._emit(events)

    def _emit(self, events: list[tuple[str, Any]]) -> None:
        if self.on_change is None:
            return
        for kind, key in events:
            try:
                result = self.on_change(kind, key)
            except Exception:
                log.exception("metadata on_change(%r, %r) failed", kind, key)
                continue
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._callback_tasks.add(task)
                task.add_done_callback(self._callback_done)

    def _callback_done(self, task: asyncio.Task) -> None:
        self._callback_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("metadata on_change callback failed", exc_info=task.exception())

    # -- reads (each re-arms its watch) ------------------------------------------------------------

    async def _get(self, path: str) -> tuple[bytes, Any] | None:
        """Data and stat with a data watch; None (with an exists watch) if there is no znode."""
        while True:
            try:
                return await self.session.wait(self.client.get_async(path, watch=self._data_watch))
            except NoNodeError:
                stat = await self.session.wait(self.client.exists_async(path, watch=self._data_watch))
                if stat is None:
                    return None
                # created between the two reads: read it again

    async def _get_many(self, paths: list[str]) -> list[tuple[bytes, Any] | None]:
        """`_get` for many paths, pipelined, with one loop wake-up per round."""
        client, wait_all, watch = self.client, self.session.wait_all, self._data_watch
        out: list[tuple[bytes, Any] | None] = [None] * len(paths)
        todo = list(range(len(paths)))
        while todo:
            got = await wait_all([client.get_async(paths[i], watch=watch) for i in todo])
            missing = []
            for i, result in zip(todo, got):
                if isinstance(result, NoNodeError):
                    missing.append(i)
                elif isinstance(result, Exception):
                    raise result
                else:
                    out[i] = result
            if not missing:
                break
            stats = await wait_all([client.exists_async(paths[i], watch=watch) for i in missing])
            todo = []
            for i, stat in zip(missing, stats):
                if isinstance(stat, Exception):
                    raise stat
                if stat is not None:  # created between the two reads: read it again
                    todo.append(i)
        return out

    async def _get_unwatched(self, path: str) -> tuple[bytes, Any] | None:
        try:
            return await self.session.wait(self.client.get_async(path))
        except NoNodeError:
            return None

    async def _children(self, path: str) -> list[str]:
        while True:
            try:
                return await self.session.wait(self.client.get_children_async(path, watch=self._child_watch))
            except NoNodeError:
                stat = await self.session.wait(self.client.exists_async(path, watch=self._data_watch))
                if stat is None:
                    return []

    async def _none(self) -> None:
        return None

    # -- one batch -----------------------------------------------------------------------------------

    async def _reconcile(self, d: _Dirty) -> list[tuple[str, Any]]:
        """One batch of changes in three stages of reads (children and the controller; the
        registrations, assignments and configs they name; the partition states those name),
        then applied to the view; the events to hand on, in the order they happened."""
        session_id = self.session.session_id  # the session every read of this batch is made in
        if d.full:
            d.broker_ids = d.topic_names = d.controller = True
            d.brokers |= set(self.view.brokers)
            d.topics |= set(self.view.topics)
            d.configs |= set(self.view.topics)
            d.broker_config_names = True
            d.broker_configs |= set(self.view.broker_configs)
        batch = _Batch(d)
        await self._read_children_and_controller(batch)
        await self._read_registrations_assignments_and_configs(batch)
        await self._read_states(batch)
        self._apply_topics_configs_and_states(batch)
        self.view.session_id = session_id
        return batch.events

    async def _read_children_and_controller(self, batch: "_Batch") -> None:
        d, view = batch.dirty, self.view
        ids, names, controller, epoch, entities = await asyncio.gather(
            self._children(BROKER_IDS_PATH) if d.broker_ids else self._none(),
            self._children(TOPICS_PATH) if d.topic_names else self._none(),
            self._get(CONTROLLER_PATH) if d.controller else self._none(),
            self._get(CONTROLLER_EPOCH_PATH) if d.controller else self._none(),
            self._children(CONFIG_BROKERS_PATH) if d.broker_config_names else self._none())
        if entities is not None:
            d.broker_configs |= set(entities)
        if d.controller:
            controller_id = NO_LEADER
            controller_epoch = 0
            try:
                controller_id = decode_controller(controller[0]) if controller else NO_LEADER
                controller_epoch = decode_controller_epoch(epoch[0]) if epoch else 0
            except FormatError as e:
                log.warning("unreadable controller znode: %s", e)
            if (controller_id, controller_epoch) != (view.controller_id, view.controller_epoch):
                view.controller_id, view.controller_epoch = controller_id, controller_epoch
                batch.events.append(("controller", None))
        if ids is not None:
            live = set()
            for child in ids:
                try:
                    live.add(int(child))
                except ValueError:
                    continue
            for gone in set(view.brokers) - live:
                self._drop_broker(gone)
                batch.brokers_changed = True
            d.brokers = {b for b in d.brokers if b in live}
            d.brokers |= live if d.full else live - set(view.brokers)
        if names is not None:
            present = set(names)
            for gone in set(view.topics) - present:
                self._drop_topic(gone, batch.events)
                batch.deleted.add(gone)
            new = present - set(view.topics)
            d.topics |= new
            d.configs |= new
        d.topics -= batch.deleted
        d.configs -= batch.deleted

    async def _read_registrations_assignments_and_configs(self, batch: "_Batch") -> None:
        d = batch.dirty
        broker_ids, topics = sorted(d.brokers), sorted(d.topics)
        configs, entities = sorted(d.configs), sorted(d.broker_configs)
        results = iter(await self._get_many([*(broker_path(b) for b in broker_ids),
                                             *(topic_path(t) for t in topics),
                                             *(topic_config_path(t) for t in configs),
                                             *(broker_config_path(e) for e in entities)]))
        registrations = [(b, next(results)) for b in broker_ids]
        assignments = [(t, next(results)) for t in topics]
        topic_configs = [(t, next(results)) for t in configs]
        self._apply_broker_configs([(e, next(results)) for e in entities], batch.events)
        self._apply_registrations(registrations, batch)
        if batch.brokers_changed:
            batch.events.insert(0, ("brokers", None))
        self._sort_assignments(assignments, batch)
        for t, got in topic_configs:
            try:
                batch.configs_read[t] = decode_topic_config(got[0]) if got else {}
            except FormatError as e:
                log.warning("unreadable config of topic %s: %s", t, e)

    def _apply_broker_configs(self, results: list[tuple[str, Any]], events: list[tuple[str, Any]]) -> None:
        view = self.view
        for entity, got in results:
            try:
                read = decode_topic_config(got[0]) if got else {}
            except FormatError as e:
                log.warning("unreadable dynamic configs of %s: %s", entity, e)
                continue
            if view.broker_configs.get(entity, {}) != read:
                if read:
                    view.broker_configs[entity] = read
                else:
                    view.broker_configs.pop(entity, None)
                events.append(("broker_config", entity))

    def _apply_registrations(self, results: list[tuple[int, Any]], batch: "_Batch") -> None:
        view = self.view
        for b, got in results:
            if got is None:
                if b in view.brokers:
                    self._drop_broker(b)
                    batch.brokers_changed = True
                continue
            try:
                info = decode_broker_registration(b, got[0])
                endpoints = decode_broker_endpoints(got[0])
            except FormatError as e:
                log.warning("unreadable registration of broker %d: %s", b, e)
                continue
            stat = got[1]
            if (view.brokers.get(b) != info or self.endpoints.get(b) != endpoints
                    or view.broker_epochs.get(b) != stat.czxid
                    or view.broker_sessions.get(b) != stat.ephemeralOwner):
                # A new czxid with the same contents is a new registration (a bounce): a change.
                view.brokers[b] = info
                self.endpoints[b] = endpoints
                view.broker_epochs[b] = stat.czxid
                view.broker_sessions[b] = stat.ephemeralOwner
                batch.brokers_changed = True

    def _sort_assignments(self, results: list[tuple[str, Any]], batch: "_Batch") -> None:
        """Each topic read: gone, new, or changed; the partition states to read for it."""
        for t, got in results:
            if got is None:
                if t in self.view.topics:
                    self._drop_topic(t, batch.events)
                batch.deleted.add(t)
                continue
            try:
                assignment = decode_topic_assignment(t, got[0])
            except FormatError as e:
                log.warning("unreadable assignment of topic %s: %s", t, e)
                continue
            old = self.view.topics.get(t)
            if old is None:
                batch.new_topics[t] = assignment
                batch.state_reads |= {(t, p) for p in assignment.replicas}
            else:
                if old != assignment:
                    batch.changed_topics[t] = assignment
                added = set(assignment.replicas) - set(old.replicas)
                batch.state_reads |= {(t, p) for p in (assignment.replicas if batch.dirty.full else added)}

    async def _read_states(self, batch: "_Batch") -> None:
        """The partition states to read, of partitions that exist in a live topic."""
        keys = sorted(k for k in batch.state_reads
                      if (a := batch.assignment_of(k[0], self.view)) is not None and k[1] in a.replicas)
        states = await self._get_many([partition_state_path(t, p) for t, p in keys])
        for key, got in zip(keys, states):
            if got is None:
                batch.states_read[key] = None
                continue
            try:
                batch.states_read[key] = decode_partition_state(got[0], got[1].version)
                batch.zxids[key] = got[1].mzxid
            except FormatError as e:
                log.warning("unreadable state of %s-%d: %s", key[0], key[1], e)

        # A state znode gone from a topic we believe alive: is the whole topic going (a delete by
        # several multis, or not yet noticed)? One unwatched read per such topic tells.
        vanished = sorted({key[0] for key, state in batch.states_read.items()
                           if state is None and key[0] not in batch.new_topics and key in self.view.states})
        if vanished:
            alive = await asyncio.gather(*(self._get_unwatched(topic_path(t)) for t in vanished))
            for t, got in zip(vanished, alive):
                if got is None:
                    self._drop_topic(t, batch.events)
                    batch.deleted.add(t)

    def _apply_topics_configs_and_states(self, batch: "_Batch") -> None:
        """New topics whole, then changes to existing ones."""
        view, events, deleted, new_topics = self.view, batch.events, batch.deleted, batch.new_topics
        read, zxids = batch.states_read, batch.zxids
        for t, assignment in new_topics.items():
            view.topics[t] = assignment
            view.topic_configs[t] = batch.configs_read.get(t, {})
            for p in assignment.replicas:
                state = read.get((t, p))
                if state is not None:
                    view.states[(t, p)] = state
                    view.state_zxids[(t, p)] = zxids[(t, p)]
            events.append(("topic", t))
        for t, assignment in batch.changed_topics.items():
            if t in deleted:
                continue
            for p in set(view.topics[t].replicas) - set(assignment.replicas):
                view.state_zxids.pop((t, p), None)
                if view.states.pop((t, p), None) is not None:
                    events.append(("partition", (t, p)))
            view.topics[t] = assignment
            events.append(("topic", t))
        for t, config in batch.configs_read.items():
            if t in new_topics or t in deleted or t not in view.topics:
                continue
            if view.topic_configs.get(t) != config:
                view.topic_configs[t] = config
                events.append(("config", t))
        for key, state in sorted(read.items()):
            t = key[0]
            if t in new_topics or t in deleted or t not in view.topics:
                continue
            if state is None:
                view.state_zxids.pop(key, None)
                if view.states.pop(key, None) is not None:
                    events.append(("partition", key))
            elif view.states.get(key) != state or view.state_zxids.get(key) != zxids[key]:
                view.states[key] = state
                view.state_zxids[key] = zxids[key]
                events.append(("partition", key))

    def _drop_broker(self, broker_id: int) -> None:
        view = self.view
        view.brokers.pop(broker_id, None)
        view.broker_epochs.pop(broker_id, None)
        view.broker_sessions.pop(broker_id, None)
        self.endpoints.pop(broker_id, None)

    def _drop_topic(self, topic: str, events: list[tuple[str, Any]]) -> None:
        assignment = self.view.topics.pop(topic, None)
        if assignment is None:
            return
        for p in assignment.replicas:
            self.view.states.pop((topic, p), None)
            self.view.state_zxids.pop((topic, p), None)
        self.view.topic_configs.pop(topic, None)
        events.append(("topic_deleted", topic))
