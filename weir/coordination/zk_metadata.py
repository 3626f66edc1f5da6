"""The production metadata store: controller election and epoch-fenced writes on ZooKeeper.

Everything is async on top of `ZkSession` (kazoo's `*_async` calls awaited with `session.wait`),
so nothing here blocks the loop or kazoo's threads. Formats and paths: `zk_formats`.

Controller election (Kafka's `registerControllerAndIncrementControllerEpoch`): one multi creates
the ephemeral /controller *and* bumps /controller_epoch with a version CAS, so winning and taking
a new epoch are one atomic step. The winner remembers the znode version it gave /controller_epoch;
every later write of this store is a multi that starts with `check(/controller_epoch, that
version)`. Once another broker has won (and bumped the epoch), every write of the deposed
controller fails as a whole with ControllerFenced — no partial overwrite is possible.

Batched partition-state writes (`write_partition_states`): the changes are packed into a few large
multis (each: the epoch check + up to `batch_size` `setData(path, version=expected)`), all sent at
once (kazoo pipelines them on the one connection, ZooKeeper applies them in order). A multi is
all-or-nothing and reports only its first failing op, so a chunk that hits a version conflict is
settled like this: the failing op's change is a conflict; the changes before it had passed their
checks (ZooKeeper reports them as rolled back); those after it were not tried, so their versions
are re-read (pipelined `exists`) and those that no longer match are conflicts too; all the others
are re-sent as new multis; if that still fails (another writer racing us), the remaining changes go
one multi each (check + setData), pipelined, which is exact. Conflicting partitions are re-read and
returned with their current state. Typical cost: one round trip for the whole batch; with
conflicts, three or four.

Not automatic: when /controller disappears (`on_controller_gone`), the caller decides to resign
(`resign()`) and/or run for election again; until a new controller bumps the epoch this store's
writes still succeed, which is exactly what the epoch fence allows.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import (BadVersionError, KazooException, NodeExistsError, NoNodeError, NotEmptyError,
                              RolledBackError, RuntimeInconsistency)
from kazoo.protocol.states import EventType

from weir.coordination.zk_client import KazooState, ZkSession
from weir.zk.formats import (ADMIN_DELETE_TOPICS_PATH, CONTROLLER_EPOCH_PATH, CONTROLLER_PATH, PERSISTENT_PATHS,
                             TOPICS_PATH, broker_config_path, decode_controller, decode_controller_epoch,
                             decode_partition_state, decode_topic_assignment, decode_topic_config, encode_controller,
                             encode_controller_epoch, encode_partition_state, encode_topic_assignment,
                             encode_topic_config, is_legal_topic_name, partition_path, partition_state_path,
                             partitions_path, topic_config_path, topic_path)
from weir.zk.model import NO_LEADER, PartitionState, TopicAssignment

log = logging.getLogger(__name__)

__all__ = ["ZkMetadataStore", "PartitionWriteResult", "MetadataStoreError", "ControllerFenced",
           "NotController", "TopicExists", "UnknownTopic", "ConcurrentUpdate"]

# A multi's request must stay under ZooKeeper's jute.maxbuffer (1 MiB by default).
MAX_MULTI_BYTES = 512 * 1024
DEFAULT_BATCH_SIZE = 250          # partition-state changes per multi
_OP_OVERHEAD = 32                 # bytes a multi op costs besides its path and data
_ELECTION_ATTEMPTS = 10

Key = tuple[str, int]
Callback = Callable[[], Awaitable[None] | None]
ConfigChange = Callable[[dict[str, str]], Mapping[str, Any]]  # a config's overrides -> the new ones


# -- errors --------------------------------------------------------------------------------------

class MetadataStoreError(Exception):
    pass


class ControllerFenced(MetadataStoreError):
    """The controller epoch check failed: another controller has been elected since we won.

    `results` holds whatever a batch settled before the fence was hit (may be empty)."""

    def __init__(self, message: str, results: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.results = list(results)


class NotController(ControllerFenced):
    """This store has not won an election (or has resigned): it has no epoch to fence with."""


class TopicExists(MetadataStoreError):
    pass


class UnknownTopic(MetadataStoreError):
    pass


class ReassignmentInProgress(MetadataStoreError):
    """The topic's partitions are being reassigned: its partition count cannot change now."""


class ConcurrentUpdate(MetadataStoreError):
    """A znode changed between our read and our compare-and-set write."""


# -- results -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PartitionWriteResult:
    """The outcome of one change of `write_partition_states`.

    ok:        `state` is what was written, its partition_epoch the new znode version.
    conflict:  the znode's version was not the expected one ("conflict") or the znode is gone
               ("missing"); `current` is the state re-read after the batch (None if missing).
    """
    topic: str
    partition: int
    state: PartitionState | None = None
    error: str | None = None          # None | "conflict" | "missing"
    current: PartitionState | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def partition_epoch(self) -> int:
        return self.state.partition_epoch if self.state is not None else -1


# -- the multi engine ----------------------------------------------------------------------------

# An op: ("create", path, data) | ("set", path, data, version) | ("delete", path, version)
#        | ("check", path, version)
Op = tuple


def _op_size(op: Op) -> int:
    data = op[2] if op[0] in ("create", "set") else b""
    return len(op[1]) + len(data) + _OP_OVERHEAD


def _add_op(txn, op: Op) -> None:
    kind = op[0]
    if kind == "create":
        txn.create(op[1], op[2])
    elif kind == "set":
        txn.set_data(op[1], op[2], version=op[3])
    elif kind == "delete":
        txn.delete(op[1], version=op[2])
    elif kind == "check":
        txn.check(op[1], op[2])
    else:
        raise ValueError(f"unknown op {op!r}")


def _is_rollback(result: Any) -> bool:
    return isinstance(result, (RolledBackError, RuntimeInconsistency))


def _first_failure(results: Sequence[Any]) -> int | None:
    for i, result in enumerate(results):
        if isinstance(result, Exception) and not _is_rollback(result):
            return i
    if any(isinstance(r, Exception) for r in results):  # only roll-backs: should not happen
        return len(results)
    return None


class _Fenced(Exception):
    pass


class ZkMetadataStore:
    """Controller election and the controller's fenced writes, on one ZkSession.

    `on_controller_gone()` (sync or async, run on the loop) is called whenever /controller is seen
    absent (or held by this very session: an election whose answer was lost) once the store watches it — after `try_become_controller` or `watch_controller` —
    i.e. after its deletion and after a reconnect that finds it gone: time to run for election
    (and, for the deposed controller, to resign).
    """

    def __init__(self, session: ZkSession, *, on_controller_gone: Callback | None = None,
                 batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self.session = session
        self.client = session.client
        self.batch_size = batch_size
        self.on_controller_gone = on_controller_gone
        self._fence: tuple[int, int] | None = None  # (controller epoch, /controller_epoch version)
        self._broker_id: int | None = None
        self._watching_controller = False
        self._controller_watch = session.on_loop(self._on_controller_event)
        self._tasks: set[asyncio.Task] = set()
        self._was_connected = True
        session.add_state_listener(self._on_state)

    async def close(self) -> None:
        """Stop watching (does not resign, does not close the session)."""
        self._watching_controller = False
        self.session.remove_state_listener(self._on_state)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- plumbing --------------------------------------------------------------------------------

    def _wait(self, async_result) -> asyncio.Future:
        return self.session.wait(async_result)

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("metadata store background task failed: %r", task.exception())

    async def _commit(self, ops: Sequence[Op]) -> list[Any]:
        txn = self.client.transaction()
        for op in ops:
            _add_op(txn, op)
        return await self._wait(txn.commit_async())

    async def ensure_paths(self) -> None:
        """Create the persistent parents (/brokers/ids, /brokers/topics, /config/topics, ...)."""
        async def ensure(path: str) -> None:
            try:
                await self._wait(self.client.create_async(path, b"", makepath=True))
            except NodeExistsError:
                pass
        await asyncio.gather(*(ensure(p) for p in PERSISTENT_PATHS))

    # -- controller election ---------------------------------------------------------------------

    @property
    def controller_epoch(self) -> int | None:
        """The epoch this store won with, or None when it is not (or no longer) the controller."""
        return self._fence[0] if self._fence else None

    @property
    def controller_epoch_zk_version(self) -> int | None:
        return self._fence[1] if self._fence else None

    @property
    def is_controller(self) -> bool:
        """Whether this store holds an epoch to write with (it may be fenced already)."""
        return self._fence is not None

    async def try_become_controller(self, broker_id: int) -> int | None:
        """Run for controller: the new controller epoch if won, None if someone else holds it.

        Either way /controller is watched from now on (see `on_controller_gone`).
        """
        self._broker_id = broker_id
        try:
            for _ in range(_ELECTION_ATTEMPTS):
                try:
                    data, stat = await self._wait(self.client.get_async(CONTROLLER_EPOCH_PATH))
                    epoch, version = decode_controller_epoch(data), stat.version
                except NoNodeError:
                    epoch, version = 0, None
                # One multi: the ephemeral /controller and the epoch bump (CAS) win together.
                txn = self.client.transaction()
                txn.create(CONTROLLER_PATH, encode_controller(broker_id, int(time.time() * 1000)),
                           ephemeral=True)
                if version is None:
                    txn.create(CONTROLLER_EPOCH_PATH, encode_controller_epoch(1))
                else:
                    txn.set_data(CONTROLLER_EPOCH_PATH, encode_controller_epoch(epoch + 1),
                                 version=version)
                results = await self._wait(txn.commit_async())
                failed = _first_failure(results)
                if failed is None:
                    new_version = 0 if version is None else results[1].version
                    self._fence = (epoch + 1, new_version)
                    log.info("broker %d is the controller with epoch %d", broker_id, epoch + 1)
                    return epoch + 1
                if failed == 0 and isinstance(results[0], NodeExistsError):
                    return await self._won_unanswered()
                # /controller_epoch moved under us (or appeared): read it again and retry.
            raise ConcurrentUpdate("/controller_epoch keeps changing during the election")
        finally:
            try:
                await self.watch_controller()
            except KazooException as e:  # re-armed on the next CONNECTED
                log.warning("could not watch %s: %r", CONTROLLER_PATH, e)

    async def _won_unanswered(self) -> int | None:
        """/controller exists: it is ours if this session created it, an election whose answer was
        lost (Kafka's checkedEphemeralCreate), and the epoch it set is ours. Else None."""
        stat = await self._wait(self.client.exists_async(CONTROLLER_PATH))
        if stat is None or not self._owned_by_this_session(stat):
            return None
        data, epoch_stat = await self._wait(self.client.get_async(CONTROLLER_EPOCH_PATH))
        epoch = decode_controller_epoch(data)
        self._fence = (epoch, epoch_stat.version)
        log.info("broker %d is the controller with epoch %d (an election whose answer was lost)",
                 self._broker_id, epoch)
        return epoch

    def _owned_by_this_session(self, stat) -> bool:
        client_id = self.client.client_id
        return client_id is not None and stat.ephemeralOwner == client_id[0]

    async def watch_controller(self) -> None:
        """Watch /controller (re-armed after every event and reconnect); calls
        `on_controller_gone` if it is absent now."""
        self._watching_controller = True
        await self._arm_controller_watch()

    async def _arm_controller_watch(self) -> None:
        if not self._watching_controller:
            return
        stat = await self._wait(self.client.exists_async(CONTROLLER_PATH, watch=self._controller_watch))
        # our own /controller too: an election won whose answer was lost, which no one else can end
        if (stat is None or self._owned_by_this_session(stat)) and self.on_controller_gone is not None:
            try:
                result = self.on_controller_gone()
            except Exception:
                log.exception("on_controller_gone failed")
                return
            if inspect.isawaitable(result):  # its own task: it may well run for election again
                self._spawn(result)

    def _on_controller_event(self, event) -> None:
        if event.type == EventType.NONE:  # kazoo dropping watches on SUSPENDED: see _on_state
            return
        self._spawn(self._arm_controller_watch())

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            if not self._was_connected and self._watching_controller:
                self._spawn(self._arm_controller_watch())
            self._was_connected = True
        else:
            self._was_connected = False

    async def current_controller(self) -> tuple[int, int]:
        """(controller broker id or NO_LEADER, controller epoch or 0)."""
        controller, epoch = await asyncio.gather(
            self._get_or_none(CONTROLLER_PATH), self._get_or_none(CONTROLLER_EPOCH_PATH))
        return (decode_controller(controller[0]) if controller else NO_LEADER,
                decode_controller_epoch(epoch[0]) if epoch else 0)

    async def resign(self) -> None:
        """Give up the controllership: forget the epoch and delete /controller if it is ours."""
        self._fence = None
        try:
            _, stat = await self._wait(self.client.get_async(CONTROLLER_PATH))
            if stat.ephemeralOwner == self.session.session_id:
                await self._wait(self.client.delete_async(CONTROLLER_PATH, version=stat.version))
        except (NoNodeError, BadVersionError):
            pass

    def _require_fence(self) -> tuple[int, int]:
        if self._fence is None:
            raise NotController("this broker is not the controller")
        return self._fence

    def _fence_op(self) -> Op:
        return ("check", CONTROLLER_EPOCH_PATH, self._require_fence()[1])

    # -- reads -----------------------------------------------------------------------------------

    async def _get_or_none(self, path: str, watch=None) -> tuple[bytes, Any] | None:
        try:
            return await self._wait(self.client.get_async(path, watch=watch))
        except NoNodeError:
            return None

    async def read_topic(self, topic: str) -> TopicAssignment | None:
        got = await self._get_or_none(topic_path(topic))
        return decode_topic_assignment(topic, got[0]) if got else None

    async def read_topic_config(self, topic: str) -> dict[str, str] | None:
        got = await self._get_or_none(topic_config_path(topic))
        return decode_topic_config(got[0]) if got else None

    async def list_topics(self) -> list[str]:
        try:
            return sorted(await self._wait(self.client.get_children_async(TOPICS_PATH)))
        except NoNodeError:
            return []

    async def read_partition_states(self, keys: Iterable[Key]) -> dict[Key, PartitionState | None]:
        """The current state of each partition (None where no state znode exists), pipelined."""
        keys = list(keys)
        got = await self.session.wait_all([self.client.get_async(partition_state_path(t, p))
                                           for t, p in keys])
        states: dict[Key, PartitionState | None] = {}
        for key, g in zip(keys, got):
            if isinstance(g, NoNodeError):
                states[key] = None
            elif isinstance(g, Exception):
                raise g
            else:
                states[key] = decode_partition_state(g[0], g[1].version)
        return states

    # -- the batched, fenced multi engine ----------------------------------------------------------

    def _chunks(self, items: Sequence[int], ops_of: Callable[[int], list[Op]],
                max_items: int) -> list[list[int]]:
        chunks: list[list[int]] = []
        current: list[int] = []
        size = 0
        for i in items:
            item_size = sum(_op_size(op) for op in ops_of(i))
            if current and (len(current) >= max_items or size + item_size > MAX_MULTI_BYTES):
                chunks.append(current)
                current, size = [], 0
            current.append(i)
            size += item_size
        if current:
            chunks.append(current)
        return chunks

    async def _commit_items(self, items: list[list[Op]], max_items: int) -> list[Any]:
        """Commit independent items (each a list of ops that must apply together), fenced.

        Returns, per item, the list of its ops' results, or the exception that made it fail
        (BadVersionError, NoNodeError, NodeExistsError, ...). Raises _Fenced (with the outcome so
        far in args[0]) when the epoch check fails.
        """
        outcome: list[Any] = [None] * len(items)
        pending = list(range(len(items)))
        for attempt in range(2):
            if not pending:
                return outcome
            fence = self._fence_op()
            chunks = self._chunks(pending, items.__getitem__, max_items)
            results = await asyncio.gather(*(
                self._commit([fence, *(op for i in chunk for op in items[i])]) for chunk in chunks))
            retry: list[int] = []     # not executed: versions to re-check
            passed: list[int] = []    # rolled back, but their own ops had succeeded
            fenced = False
            for chunk, result in zip(chunks, results):
                failed = _first_failure(result)
                if failed is None:
                    pos = 1
                    for i in chunk:
                        outcome[i] = result[pos:pos + len(items[i])]
                        pos += len(items[i])
                    continue
                if failed == 0:
                    fenced = True
                    continue
                pos = 1
                for i in chunk:
                    if pos <= failed < pos + len(items[i]):
                        outcome[i] = result[failed]
                    elif pos + len(items[i]) <= failed:
                        passed.append(i)
                    else:
                        retry.append(i)
                    pos += len(items[i])
            if fenced:
                raise _Fenced(outcome)
            pending = sorted(passed + (await self._precheck(retry, items, outcome) if retry else []))
        # Still conflicting after a re-check and a retry: one multi per item, which is exact.
        fence = self._fence_op()
        results = await asyncio.gather(*(self._commit([fence, *items[i]]) for i in pending))
        fenced = False
        for i, result in zip(pending, results):
            failed = _first_failure(result)
            if failed is None:
                outcome[i] = result[1:]
            elif failed == 0:
                fenced = True
            else:
                outcome[i] = result[failed]
        if fenced:
            raise _Fenced(outcome)
        return outcome

    async def _precheck(self, pending: list[int], items: list[list[Op]],
                        outcome: list[Any]) -> list[int]:
        """Read the versions the pending items depend on; settle those that would fail as
        conflicts; return the others."""
        paths = sorted({op[1] for i in pending for op in items[i]})
        stats = dict(zip(paths, await self.session.wait_all(
            [self.client.exists_async(path) for path in paths])))
        for stat in stats.values():
            if isinstance(stat, Exception):
                raise stat
        still = []
        for i in pending:
            error: Exception | None = None
            for op in items[i]:
                stat = stats[op[1]]
                if op[0] == "create":
                    if stat is not None:
                        error = NodeExistsError()
                else:
                    version = op[3] if op[0] == "set" else op[2]
                    if stat is None:
                        error = NoNodeError()
                    elif version != -1 and stat.version != version:
                        error = BadVersionError()
                if error is not None:
                    break
            if error is None:
                still.append(i)
            else:
                outcome[i] = error
        return still

    async def _commit_atomic(self, ops: list[Op], fenced: bool = True) -> list[Any]:
        """One multi, fenced by the controller epoch unless it is an admin write that any broker
        may make (Kafka's AdminZkClient: topic znodes, configs), which its own version checks
        protect. Raises ControllerFenced, or the failing op's exception."""
        fence = [self._fence_op()] if fenced else []
        result = await self._commit([*fence, *ops])
        failed = _first_failure(result)
        if failed is None:
            return result[len(fence):]
        if failed == 0 and fenced:
            raise ControllerFenced(f"controller epoch {self.controller_epoch} has been superseded")
        if failed >= len(result):
            raise ConcurrentUpdate(f"multi rolled back without a failing op: {result!r}")
        raise result[failed]

    # -- partition states --------------------------------------------------------------------------

    async def create_partition_states(self, topic: str,
                                      states: Mapping[int, PartitionState]) -> dict[int, PartitionState]:
        """Create the state znodes of new partitions (and their parents), fenced.

        Returns the created states (partition_epoch 0); a partition whose state znode already
        exists is left alone and missing from the result (re-read it).
        """
        self._require_fence()
        if not states:
            return {}
        try:
            existing = set(await self._wait(self.client.get_children_async(partitions_path(topic))))
            parent_ops: list[Op] = []
        except NoNodeError:
            if await self._wait(self.client.exists_async(topic_path(topic))) is None:
                raise UnknownTopic(topic) from None
            existing = set()
            parent_ops = [("create", partitions_path(topic), b"")]
        if parent_ops:  # the shared parent first, on its own, so every item stays independent
            try:
                await self._commit_atomic(parent_ops)
            except NodeExistsError:
                pass
        partitions = sorted(states)
        items = []
        for p in partitions:
            ops: list[Op] = [] if str(p) in existing else [("create", partition_path(topic, p), b"")]
            ops.append(("create", partition_state_path(topic, p), encode_partition_state(states[p])))
            items.append(ops)
        try:
            outcome = await self._commit_items(items, self.batch_size)
        except _Fenced:
            raise ControllerFenced(f"controller epoch {self.controller_epoch} has been superseded")
        created = {}
        for p, result in zip(partitions, outcome):
            if isinstance(result, Exception):
                if not isinstance(result, NodeExistsError):
                    log.warning("creating the state of %s-%d failed: %r", topic, p, result)
                continue
            created[p] = dataclasses.replace(states[p], partition_epoch=0)
        return created

    async def write_partition_states(
            self, changes: Sequence[tuple[str, int, int, PartitionState]]) -> list[PartitionWriteResult]:
        """Compare-and-set many partition states, fenced by the controller epoch, in a few multis.

        `changes`: (topic, partition, expected partition epoch, new state). Returns one result per
        change, in order. Raises ControllerFenced (its `results`: the changes settled before the
        fence hit, in order, None where unknown) when another controller has been elected; a
        kazoo ConnectionLoss means the outcome is unknown: re-read.
        """
        self._require_fence()
        items = [[("set", partition_state_path(t, p), encode_partition_state(state), expected)]
                 for t, p, expected, state in changes]
        try:
            outcome = await self._commit_items(items, self.batch_size)
            fenced = None
        except _Fenced as e:
            outcome, fenced = e.args[0], e
        results: list[PartitionWriteResult | None] = []
        conflicts: list[int] = []
        for i, ((t, p, _, state), result) in enumerate(zip(changes, outcome)):
            if result is None:
                results.append(None)
            elif isinstance(result, Exception):
                error = "missing" if isinstance(result, NoNodeError) else "conflict"
                if not isinstance(result, (NoNodeError, BadVersionError)):
                    log.warning("writing the state of %s-%d failed: %r", t, p, result)
                results.append(PartitionWriteResult(t, p, error=error))
                conflicts.append(i)
            else:
                results.append(PartitionWriteResult(
                    t, p, state=dataclasses.replace(state, partition_epoch=result[0].version)))
        if conflicts:
            current = await self.read_partition_states((changes[i][0], changes[i][1]) for i in conflicts)
            for i in conflicts:
                r = results[i]
                state = current[(r.topic, r.partition)]
                results[i] = dataclasses.replace(r, current=state,
                                                 error="missing" if state is None else r.error)
        if fenced is not None:
            raise ControllerFenced(
                f"controller epoch {self.controller_epoch} has been superseded", results)
        return results  # type: ignore[return-value]

    # -- topics ------------------------------------------------------------------------------------

    def _partition_create_ops(self, topic: str, states: Mapping[int, PartitionState]) -> list[Op]:
        ops: list[Op] = []
        for p in sorted(states):
            ops.append(("create", partition_path(topic, p), b""))
            ops.append(("create", partition_state_path(topic, p), encode_partition_state(states[p])))
        return ops

    async def create_topic(self, assignment: TopicAssignment, configs: Mapping[str, Any] | None = None,
                           states: Mapping[int, PartitionState] | None = None) -> None:
        """Create /brokers/topics/<t> (+ /partitions), its config znode and, optionally, the
        initial partition states (then fenced: the controller's) — in one multi when it fits (always, below a few thousand
        partitions), else the topic first and the states in batches. Raises TopicExists."""
        topic = assignment.name
        if not is_legal_topic_name(topic):
            raise ValueError(f"illegal topic name {topic!r}")
        config_stat = await self._wait(self.client.exists_async(topic_config_path(topic)))
        config_data = encode_topic_config(configs or {})
        ops: list[Op] = [("create", topic_path(topic), encode_topic_assignment(assignment)),
                         ("create", partitions_path(topic), b"")]
        # A config znode may outlive its topic (Kafka writes configs first): overwrite it.
        ops.append(("create", topic_config_path(topic), config_data) if config_stat is None
                   else ("set", topic_config_path(topic), config_data, config_stat.version))
        state_ops = self._partition_create_ops(topic, states or {})
        atomic = sum(_op_size(op) for op in ops + state_ops) <= MAX_MULTI_BYTES
        try:
            await self._commit_atomic(ops + state_ops if atomic else ops, fenced=bool(states))
        except NodeExistsError:
            if await self._wait(self.client.exists_async(topic_path(topic))) is not None:
                raise TopicExists(topic) from None
            raise ConcurrentUpdate(f"the config of {topic} changed meanwhile") from None
        except BadVersionError:
            raise ConcurrentUpdate(f"the config of {topic} changed meanwhile") from None
        if states and not atomic:
            await self.create_partition_states(topic, states)

    async def add_partitions(self, topic: str, new_assignment: TopicAssignment,
                             states: Mapping[int, PartitionState] | None = None) -> TopicAssignment:
        """Replace the assignment by one with more partitions (existing ones unchanged), CAS on the
        assignment's version, fenced; optionally create the new partitions' states with it."""
        got = await self._get_or_none(topic_path(topic))
        if got is None:
            raise UnknownTopic(topic)
        current = decode_topic_assignment(topic, got[0])
        if current.adding or current.removing:
            raise ReassignmentInProgress(topic)
        # The caller built new_assignment from what it read: if that is no longer what is there,
        # another writer came first (the topic recreated, partitions added or moved).
        if new_assignment.topic_id != current.topic_id:
            raise ConcurrentUpdate(f"{topic} was deleted and created again meanwhile")
        if len(new_assignment.replicas) <= len(current.replicas):
            raise ConcurrentUpdate(f"{topic} has {len(current.replicas)} partitions now")
        for p, replicas in current.replicas.items():
            if new_assignment.replicas.get(p) != replicas:
                raise ConcurrentUpdate(f"the partitions of {topic} changed meanwhile ({topic}-{p})")
        new_states = {p: s for p, s in (states or {}).items() if p not in current.replicas}
        ops: list[Op] = [("set", topic_path(topic),
                          encode_topic_assignment(dataclasses.replace(new_assignment, name=topic)),
                          got[1].version)]
        state_ops = self._partition_create_ops(topic, new_states)
        atomic = sum(_op_size(op) for op in ops + state_ops) <= MAX_MULTI_BYTES
        try:
            await self._commit_atomic(ops + state_ops if atomic else ops, fenced=bool(new_states))
        except (BadVersionError, NodeExistsError, NoNodeError) as e:
            raise ConcurrentUpdate(f"{topic} changed meanwhile: {e!r}") from None
        if new_states and not atomic:
            await self.create_partition_states(topic, new_states)
        return new_assignment

    async def write_assignments(self, assignments: Sequence[TopicAssignment]) -> None:
        """The controller's reassignment writes: replace topics' assignments (same topic id and
        partitions, other replicas) in one multi, CAS on each znode's version, fenced."""
        ops: list[Op] = []
        for assignment in assignments:
            got = await self._get_or_none(topic_path(assignment.name))
            if got is None:
                raise UnknownTopic(assignment.name)
            current = decode_topic_assignment(assignment.name, got[0])
            if (current.topic_id, current.replicas.keys()) != (assignment.topic_id, assignment.replicas.keys()):
                raise ConcurrentUpdate(f"the partitions of {assignment.name} changed meanwhile")
            ops.append(("set", topic_path(assignment.name), encode_topic_assignment(assignment), got[1].version))
        try:
            await self._commit_atomic(ops)
        except (BadVersionError, NoNodeError) as e:
            raise ConcurrentUpdate(f"a topic being reassigned changed meanwhile: {e!r}") from None

    async def set_topic_config(self, topic: str, configs: Mapping[str, Any]) -> None:
        """Replace the topic's config overrides (the topic must exist)."""
        await self.update_topic_config(topic, lambda _: configs)

    async def update_broker_config(self, entity: str, change: ConfigChange, *, write: bool = True) -> dict:
        """`entity`'s dynamic broker configs (Kafka's /config/brokers/<entity>) as `change` makes
        them from the current ones, written unless not `write` (see `_update_config`)."""
        return await self._update_config(broker_config_path(entity), change, (), write)

    async def update_topic_config(self, topic: str, change: ConfigChange, *, write: bool = True) -> dict:
        """The topic's config overrides as `change` makes them from the current ones, written unless
        not `write` (see `_update_config`); UnknownTopic if the topic is not there."""
        try:
            return await self._update_config(topic_config_path(topic), change, [("check", topic_path(topic), -1)],
                                              write)
        except NoNodeError:
            raise UnknownTopic(topic) from None

    async def _update_config(self, path: str, change: ConfigChange, checks: Sequence[Op], write: bool) -> dict:
        """Read a config znode, apply `change` (it may raise: nothing is written), and create or
        replace the znode with the result, compare-and-set on the version read, with `checks` in the
        multi: ConcurrentUpdate if another writer changed it in between, whose change would else
        be lost."""
        got = await self._get_or_none(path)
        configs = dict(change(decode_topic_config(got[0]) if got else {}))
        if write:
            data = encode_topic_config(configs)
            op = ("create", path, data) if got is None else ("set", path, data, got[1].version)
            try:
                await self._commit_atomic([*checks, op], fenced=False)
            except (BadVersionError, NodeExistsError):
                raise ConcurrentUpdate(f"{path} changed meanwhile") from None
        return configs

    async def _subtree(self, root: str) -> list[str]:
        """Every path under `root` (inclusive), children before parents; level by level, each
        level's listings pipelined."""
        levels = [[root]]
        while levels[-1]:
            listings = await asyncio.gather(
                *(self._wait(self.client.get_children_async(path)) for path in levels[-1]),
                return_exceptions=True)
            next_level = []
            for path, children in zip(levels[-1], listings):
                if isinstance(children, NoNodeError):
                    continue
                if isinstance(children, Exception):
                    raise children
                next_level.extend(f"{path}/{child}" for child in children)
            levels.append(next_level)
        return [path for level in reversed(levels) for path in level]

    async def delete_topic(self, topic: str) -> None:
        """Delete the topic's znodes (states, partitions, assignment, config, delete marker).

        One multi when it fits (under ~5000 partitions), so watchers see the whole topic vanish at
        once; bigger topics go in several ordered multis, the assignment last. Raises UnknownTopic.
        """
        if await self._wait(self.client.exists_async(topic_path(topic))) is None:
            raise UnknownTopic(topic)
        paths = await self._subtree(topic_path(topic))
        extra = await asyncio.gather(
            self._wait(self.client.exists_async(topic_config_path(topic))),
            self._wait(self.client.exists_async(f"{ADMIN_DELETE_TOPICS_PATH}/{topic}")))
        ops: list[Op] = [("delete", path, -1) for path in paths]
        for path, stat in zip((topic_config_path(topic), f"{ADMIN_DELETE_TOPICS_PATH}/{topic}"), extra):
            if stat is not None:
                ops.append(("delete", path, -1))
        chunks = self._chunks(range(len(ops)), lambda i: [ops[i]], max_items=len(ops))
        try:
            # Ordered: ZooKeeper applies a session's requests in order, so pipelining is safe.
            await asyncio.gather(*(self._commit_atomic([ops[i] for i in chunk], fenced=False) for chunk in chunks))
        except (NotEmptyError, NoNodeError) as e:
            raise ConcurrentUpdate(f"{topic} changed while being deleted: {e!r}") from None

    async def mark_topic_for_deletion(self, topic: str) -> None:
        """Kafka's admin path: create /admin/delete_topics/<t> (unfenced) for the controller."""
        try:
            await self._wait(self.client.create_async(f"{ADMIN_DELETE_TOPICS_PATH}/{topic}", b"",
                                                      makepath=True))
        except NodeExistsError:
            pass
