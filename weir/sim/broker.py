"""A simulated broker: simulated I/O around the broker's own partition objects.

Every decision about a partition is weir.replication.partition.Partition's, and what the
controller's decisions do to the hosted replicas is weir.replication.hosted_partitions', as in the real
broker; this file (ReplicaManager's part) only supplies memory logs, carries messages, timers and
process life, and the modules beside it mirror the real shell's: apis.py (Produce, Fetch,
OffsetForLeaderEpoch), replica_fetcher.py (around production's FetcherCore), isr_sender.py
(around production's IsrOutbox), watcher.py (metadata and the controller election),
zk_session.py (the ZooKeeper client), controller.py (the controller's shell, around the real
event handlers).
Process state is lost on a crash; the logs (minus what was not flushed, if the crash loses it) and
the HW checkpoint survive.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from weir.replication.hosted_partitions import HostedPartitions
from weir.replication.leader import ReplicationConfig
from weir.replication.partition import Effects, Partition
from weir.replication.shutdown_wait import ASK, GAVE_UP, MOVED, WAIT, ShutdownWait
from weir.sim.apis import SimApis
from weir.sim.isr_sender import SimIsrSender
from weir.sim.memlog import MemoryLog
from weir.sim.network import ZK
from weir.sim.replica_fetcher import SimFetcher
from weir.sim.watcher import SimWatcher
from weir.sim.zk_session import ZkSession
from weir.sim.zookeeper import NODE_EXISTS, OK
from weir.zk.formats import CONTROLLED_SHUTDOWN_PATH
from weir.zk.model import NO_LEADER, TopicAssignment

NOT_LEADER = ErrorCode.not_leader_or_follower
NO_PARTITION = {"produce": (NOT_LEADER, -1), "read": (NOT_LEADER, -1, -1, [])}
HANDOVER_CHECK_MS = 20  # how often a broker in controlled shutdown looks whether its leaderships moved


class SimBroker:
    def __init__(self, world, broker_id: int) -> None:
        self.world = world
        self.id = broker_id
        self.settings = world.settings
        self.logs: dict[tuple[str, int], MemoryLog] = {}  # the disk: survives crashes
        self.hw_checkpoint: dict[tuple[str, int], int] = {}
        self.up = self.paused = False
        self.incarnation = 0
        self._held: list = []
        self._next_id = 0  # never reset: answers to a previous incarnation's requests must not match
        world.network.register(broker_id, self._receive)
        self._reset()

    def _reset(self) -> None:
        self.zk = ZkSession(self)
        self.watcher = SimWatcher(self)
        self.can_lead = False
        self.pending: dict[int, tuple] = {}
        self.configs: dict[str, dict] = {}
        self.assignments: dict[str, TopicAssignment] = {}  # as this broker last read them
        self.controller_id = NO_LEADER
        self.hosting = HostedPartitions(self.id, self)  # production's rules for the replicas hosted here
        self.partitions = self.hosting.partitions
        self.waiters = self.hosting.waiters  # followers' fetches parked here, as leader (production's long poll)
        self.isr_sender = SimIsrSender(self)
        self.fetcher = SimFetcher(self)
        self.apis = SimApis(self)
        self.stalled: list | None = None  # requests waiting while request handling is stalled
        self.controller = None
        self.shutting_down = False

    # ----- scheduling gated on this process being alive and not paused

    def later(self, delay_ms: int, fn, *args) -> None:
        self.world.events.after(delay_ms, self._gate, self.incarnation, fn, args)

    def _gate(self, incarnation: int, fn, args) -> None:
        if incarnation == self.incarnation and self.up:
            self.world.touched.add(self)
            self._held.append((fn, args)) if self.paused else fn(*args)

    def _receive(self, src, message) -> None:
        if self.up:
            self.world.touched.add(self)
            if self.paused:
                self._held.append((self._handle, (src, message)))
            elif self.stalled is not None and src != ZK:
                self.stalled.append((src, message))
            else:
                self._handle(src, message)

    def _rid(self) -> int:
        self._next_id += 1
        return self._next_id

    def send(self, dst, message) -> None:
        self.world.network.send(self.id, dst, message)

    def request(self, dst, kind: str, args: tuple, on_answer, timeout_ms: int, on_timeout) -> None:
        rid = self._rid()
        self.pending[rid] = (on_answer, on_timeout)
        self.send(dst, (kind, rid, *args))
        self.later(timeout_ms, self._timed_out, rid)

    def _timed_out(self, rid: int) -> None:
        entry = self.pending.pop(rid, None)
        if entry is not None:
            entry[1]()

    @property
    def now(self) -> int:
        return self.world.events.now

    def trace(self, text: str) -> None:
        self.world.trace(f"b{self.id}: {text}")

    # ----- life cycle (the nemesis calls these)

    def start(self) -> None:
        assert not self.up
        self.up, self.paused = True, False
        self.incarnation += 1
        self._held.clear()
        self._reset()
        self.trace("start")
        self.world.touched.add(self)
        self.zk.connect()
        s = self.settings
        self.later(s.zk_heartbeat_ms, self.zk.heartbeat)
        self.later(s.replica_lag_time_max_ms // 2, self._every_partition, "check_isr", s.replica_lag_time_max_ms // 2)
        self.later(100, self._every_partition, "expire", 100)
        self.later(s.flush_interval_ms, self._flush)
        self.later(s.log_retention_check_interval_ms, self._maintain)

    def crash(self, lose_unflushed: bool) -> None:
        assert self.up
        lost = {key: log.crash(lose_unflushed) for key, log in sorted(self.logs.items())}
        self._end(f"crash{' losing unflushed data ' + str(lost) if lose_unflushed else ''}")

    def _end(self, how: str) -> None:
        """The process is gone, and its state with it (the logs and the HW checkpoint stay)."""
        self.up = False
        self.incarnation += 1
        self._held.clear()
        self.trace(how)
        self._reset()

    def shut_down(self, on_stopped) -> None:
        """server.py's stop with controlled.shutdown.enable: ask the controller to move the
        leaderships away (an ephemeral child of CONTROLLED_SHUTDOWN_PATH; asked again once
        registered in a new session, which the request did not outlive, or a retry backoff after a
        request that failed), wait until no partition led here awaits a handover (the partition's
        own rule) or controlled_shutdown_timeout_ms has passed, then stop cleanly and call
        `on_stopped`. A crash meanwhile ends all this."""
        self.shutting_down = True
        self.world.checker.on_shutdown_request(self.id, self.incarnation)
        wait = ShutdownWait(self.now + self.settings.controlled_shutdown_timeout_ms,
                            self.settings.controlled_shutdown_retry_backoff_ms,
                            self.settings.controlled_shutdown_max_retries)
        self.trace("requests controlled shutdown")
        self._ask_controlled_shutdown(wait, self._registration())
        self.later(HANDOVER_CHECK_MS, self._await_handover, wait, on_stopped)

    def _ask_controlled_shutdown(self, wait: ShutdownWait, registration: int | None, again: bool = False) -> None:
        """As server.py's: taken as asked at once; a failed answer has it asked again later."""
        def answered(status, _) -> None:
            if status not in (OK, NODE_EXISTS):
                if self.shutting_down:
                    self.trace(f"cannot request controlled shutdown ({status})")
                    wait.ask_failed(self.now)
            elif again:
                self.trace("controlled shutdown: asked again")
        wait.asked(registration)
        if not self.zk.registered:
            answered("not registered", None)
            return
        self.zk.request("create", f"{CONTROLLED_SHUTDOWN_PATH}/{self.id}", None, True, callback=answered)

    def _registration(self) -> int | None:
        """As server.py's: our registration (the zxid that is our broker epoch), None while unregistered."""
        return self.zk.registration_zxid if self.zk.registered else None

    def _await_handover(self, wait: ShutdownWait, on_stopped) -> None:
        if not self.up or not self.shutting_down:
            return
        registration = self._registration()
        step = wait.next_step(self.partitions.values(), registration, self.now)
        if step in (ASK, WAIT):
            if step == ASK:
                self._ask_controlled_shutdown(wait, registration, again=True)
            self.later(HANDOVER_CHECK_MS, self._await_handover, wait, on_stopped)
            return
        self.trace("controlled shutdown: leadership moved" if step == MOVED
                   else f"controlled shutdown: {wait.failures} requests failed; stopping anyway" if step == GAVE_UP
                   else "controlled shutdown timed out; stopping anyway")
        self._stop(on_stopped)

    def _stop(self, on_stopped) -> None:
        """A clean stop (server.py's stop): logs flushed and the HW checkpointed, the ZooKeeper
        session closed, so its registration and shutdown request go at once."""
        self._fail_parked()
        self._write_back()
        if self.zk.sid is not None:
            self.zk.request("close")
        self._end("stopped")
        on_stopped()

    def pause(self) -> None:
        self.paused = True
        self.trace("pause")

    def resume(self) -> None:
        self.paused = False
        self.trace("resume")
        held, self._held = self._held, []
        for fn, args in held:
            self.later(0, fn, *args)

    def stall(self) -> None:
        self.stalled = []
        self.trace("request handling stalls")

    def unstall(self) -> None:
        held, self.stalled = self.stalled or [], None
        self.trace(f"request handling resumes ({len(held)} waiting)")
        for src, message in held:
            self.later(0, self._handle, src, message)

    # ----- the ZooKeeper session's states (server.py's _on_zk_state)

    def on_zk_suspended(self) -> None:
        self.can_lead = False
        self._fail_parked()

    def _fail_parked(self) -> None:
        """Parked produces whose fate this broker can no longer learn: REQUEST_TIMED_OUT."""
        for partition in self.partitions.values():
            self.act(partition, Effects(partition.lose_leadership_proof()))

    def on_zk_session_lost(self) -> None:
        self.on_zk_suspended()
        self.watcher.resign("session lost")

    def on_zk_registered(self) -> None:  # and reconnected: read everything (again)
        self.watcher.read_all()

    on_zk_reconnected = on_zk_registered

    def on_config(self, topic: str, config: dict) -> None:
        self.configs[topic] = config
        for partition in self.partitions.values():
            if partition.topic == topic:
                self.act(partition, partition.on_config(self.replication_config(topic), self.now))

    # ----- partitions (ReplicaManager)

    def replication_config(self, topic: str) -> ReplicationConfig:
        value = self.configs.get(topic, {}).get("min.insync.replicas")
        return ReplicationConfig(int(value) if value is not None else 1, self.settings.replica_lag_time_max_ms)

    def on_assignment(self, assignment: TopicAssignment) -> None:
        """The topic's replicas changed (a reassignment): replicas no longer assigned here go; the
        caller reads the states of partitions newly assigned here. Hosted ones take the new
        replicas with the state that follows."""
        self.assignments[assignment.name] = assignment
        for key in self.hosting.drop_assigned_elsewhere({assignment.name: assignment}, self.logs):
            self.trace(f"{key[0]}-{key[1]}: reassigned away, replica deleted")

    def apply_state(self, key, state, mzxid: int) -> None:
        assignment = self.assignments.get(key[0])
        if assignment is None or not self.zk.registered:
            return
        applied = self.hosting.apply_state(assignment, key[1], state, self.now, mzxid, self.zk.registration_zxid)
        if applied is not None and applied[1].role_changed:
            partition = applied[0]
            self.trace(f"{key[0]}-{key[1]}: {partition.role}, leader {state.leader}, epoch {state.leader_epoch}, "
                       f"isr {list(state.isr)}, LEO {partition.log.log_end_offset}")

    def on_live_brokers(self, live: frozenset[int]) -> None:
        self.hosting.on_live_brokers(live, self.now)

    def act(self, partition: Partition, effects: Effects) -> None:
        self.hosting.act(partition, effects)

    # ----- HostedPartitions' shell: storage and effects

    def open_partition(self, topic: str, index: int, now_ms: int) -> Partition:
        key = (topic, index)
        log = self.logs.setdefault(key, MemoryLog())
        partition = Partition(self.id, topic, index, log, self.hw_checkpoint.get(key, 0))
        partition.load_producers(None)
        return partition

    def delete_log(self, key: tuple[str, int]) -> None:
        self.logs.pop(key, None)
        self.hw_checkpoint.pop(key, None)

    def complete(self, completions) -> None:
        self.apis.complete(completions)

    def role_changed(self, partition: Partition) -> None:
        self.isr_sender.withdraw(partition.key)
        self.fetcher.on_role_change(partition)

    def send_isr_change(self, partition: Partition, proposal) -> None:
        self.trace(f"{partition.topic}-{partition.index}: proposing ISR {sorted(proposal.new_isr)}")
        self.world.checker.on_isr_proposal(partition.key, self.id, proposal.leader_epoch, proposal.new_isr,
                                           self.incarnation)
        self.isr_sender.submit(partition.key, proposal)

    def _every_partition(self, event: str, interval_ms: int) -> None:
        """ReplicaManager.check_isr and expire_produces: a partition that decides nothing is not acted on."""
        for partition in self.partitions.values():
            effects = getattr(partition, event)(self.now)
            if not effects.decide_nothing:
                self.act(partition, effects)
        self.later(interval_ms, self._every_partition, event, interval_ms)

    def _maintain(self) -> None:
        """ReplicaManager.maintain: producers idle for producer.id.expiration.ms are forgotten (the
        memory log keeps every record: no retention)."""
        for partition in self.partitions.values():
            partition.expire_producers(self.now, self.settings.producer_id_expiration_ms)
        self.later(self.settings.log_retention_check_interval_ms, self._maintain)

    def _flush(self) -> None:
        self._write_back()
        self.later(self.settings.flush_interval_ms, self._flush)

    def _write_back(self) -> None:
        for log in self.logs.values():
            log.flush()
        for key, partition in self.partitions.items():
            self.hw_checkpoint[key] = partition.high_watermark

    # ----- messages

    def _handle(self, src, message) -> None:
        kind, rid, *args = message
        if kind == "resp":
            self.zk.on_response(rid, *args)
        elif kind == "watch":
            self.watcher.on_watch(rid, *args)
        elif kind == "alter":
            if self.controller is not None:
                self.controller.on_alter_partition(src, rid, *args)
            else:
                self.send(src, ("alter_resp", rid, ErrorCode.not_controller, {}))
        elif kind.endswith("_resp"):
            entry = self.pending.pop(rid, None)
            if entry is not None:
                entry[0](*args)
        elif kind in ("fetch", "ofle"):  # of several partitions, each answered for itself
            getattr(self.apis, kind)(src, rid, *args)
        elif (partition := self.partitions.get(args[0])) is not None:
            getattr(self.apis, kind)(src, rid, partition, *args[1:])
        elif kind != "produce" or args[-1] != 0:
            self.send(src, (kind + "_resp", rid) + NO_PARTITION[kind])
