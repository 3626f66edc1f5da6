"""A simulated broker: simulated I/O around the broker's own partition object.

Every decision about a partition is weir.replication.partition.Partition's, as in the real broker
(weir/broker/replica_manager.py, replica_fetcher.py, isr_sender.py feed it the same events); this
file only carries messages, timers and process life. Its ZooKeeper client is zk_session.py, its
controller shell controller.py. Process state is lost on a crash; the logs (minus what was not
flushed, if the crash loses it) and the HW checkpoint survive.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from weir.coordination.model import NO_LEADER
from weir.protocol.errors import KafkaError
from weir.replication.follower import AppendRecords, Backoff, SendOffsetForLeaderEpoch
from weir.replication.leader import IsrChangeAccepted, IsrChangeRejected, ReplicationConfig
from weir.replication.partition import Effects, Partition
from weir.replication.truncation import EpochEndOffset

from weir.sim.memlog import MemoryLog, SimBatch
from weir.sim.zk_session import ZkSession
from weir.sim.zookeeper import BROKERS, CONTROLLER, NODE_EXISTS, OK

NOT_CONTROLLER = ErrorCode.not_controller
NOT_LEADER = ErrorCode.not_leader_or_follower
NO_PARTITION = {"produce": (NOT_LEADER, -1), "read": (NOT_LEADER, -1, -1, []), "fetch": (NOT_LEADER, -1, None),
                "ofle": (EpochEndOffset(ErrorCode.unknown_topic_or_partition),)}


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
        self.can_lead = False
        self.pending: dict[int, tuple] = {}
        self.configs: dict[str, dict] = {}
        self.controller_id = NO_LEADER
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.isr_outbox: dict = {}
        self.parked: dict = {}
        self.controller = None

    # ----- scheduling gated on this process being alive and not paused

    def later(self, delay_ms: int, fn, *args) -> None:
        self.world.events.after(delay_ms, self._gate, self.incarnation, fn, args)

    def _gate(self, incarnation: int, fn, args) -> None:
        if incarnation == self.incarnation and self.up:
            self._held.append((fn, args)) if self.paused else fn(*args)

    def _receive(self, src, message) -> None:
        if self.up:
            self._held.append((self._handle, (src, message))) if self.paused else self._handle(src, message)

    def _rid(self) -> int:
        self._next_id += 1
        return self._next_id

    def send(self, dst, message) -> None:
        self.world.network.send(self.id, dst, message)

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
        self.zk.connect()
        s = self.settings
        self.later(s.zk_heartbeat_ms, self.zk.heartbeat)
        self.later(s.replica_lag_time_max_ms // 2, self._every_partition, "check_isr", s.replica_lag_time_max_ms // 2)
        self.later(100, self._every_partition, "expire", 100)
        self.later(s.flush_interval_ms, self._flush)

    def crash(self, lose_unflushed: bool) -> None:
        assert self.up
        self.up = False
        self.incarnation += 1
        self._held.clear()
        lost = {key: log.crash(lose_unflushed) for key, log in sorted(self.logs.items())}
        self.trace(f"crash{' losing unflushed data ' + str(lost) if lose_unflushed else ''}")
        self._reset()

    def pause(self) -> None:
        self.paused = True
        self.trace("pause")

    def resume(self) -> None:
        self.paused = False
        self.trace("resume")
        held, self._held = self._held, []
        for fn, args in held:
            self.later(0, fn, *args)

    # ----- the ZooKeeper session's states (server.py's _on_zk_state)

    def on_zk_suspended(self) -> None:
        self.can_lead = False
        for partition in self.partitions.values():
            self._act(partition, Effects(partition.lose_leadership_proof()))

    def on_zk_reconnected(self) -> None:
        self._read_all()

    def on_zk_session_lost(self) -> None:
        self.on_zk_suspended()
        self._resign("session lost")

    def on_zk_registered(self) -> None:
        self._read_all()

    def _read_all(self) -> None:
        sid = self.zk.sid

        def loaded(status, snapshot):
            if sid != self.zk.sid or not self.zk.registered:
                return
            if status != OK:
                self.later(100, self._read_all)
                return
            self.configs = snapshot["configs"]
            self.controller_id = snapshot["controller"]
            self.can_lead = True
            for key, (state, mzxid) in sorted(snapshot["states"].items()):
                self._apply_state(key, state, mzxid)
            if self.controller is not None:
                self.controller.on_metadata_change() if self.controller_id == self.id else self._resign("/controller")
            if self.controller_id == NO_LEADER:
                self._try_elect()
        self.zk.request("read_all", self.world.topics, True, callback=loaded)

    def _on_watch(self, sid: int, path: str) -> None:
        if sid != self.zk.sid:
            return
        if path == CONTROLLER:
            self.zk.request("get", CONTROLLER, True, callback=self._on_controller_znode)
        elif path == BROKERS:
            if self.controller is not None:
                self.controller.on_metadata_change()
        elif path.startswith("/config/topics/"):
            topic = path.rsplit("/", 1)[1]
            self.zk.request("get", path, True, callback=lambda status, r: self._on_config(topic, status, r))
        elif path.endswith("/state"):
            parts = path.split("/")
            key = (parts[3], int(parts[5]))
            self.zk.request("get", path, True, callback=lambda status, r: status == OK and r is not None
                            and self._apply_state(key, r[0], r[2]))

    def _on_controller_znode(self, status, result) -> None:
        if status == OK:
            self.controller_id = NO_LEADER if result is None else result[0]
            if self.controller is not None and self.controller_id != self.id:
                self._resign("/controller changed")
            if self.controller_id == NO_LEADER:
                self._try_elect()

    def _on_config(self, topic: str, status, result) -> None:
        if status != OK:
            return
        self.configs[topic] = {} if result is None else result[0]
        for partition in self.partitions.values():
            if partition.topic == topic:
                self._act(partition, partition.on_config(self.replication_config(topic), self.now))
        if self.controller is not None:
            self.controller.on_metadata_change()

    def _try_elect(self) -> None:
        if not self.zk.registered or self.controller is not None:
            return
        sid = self.zk.sid

        def elected(status, result):
            if sid == self.zk.sid and self.zk.registered and status in (OK, NODE_EXISTS):
                self.controller_id = self.id if status == OK else result
                if status == OK:
                    from weir.sim.controller import SimController
                    self.trace(f"won the controller election (epoch {result[0]})")
                    self.controller = SimController(self, *result)
                    self.controller.start()
        self.zk.request("elect", self.id, callback=elected)

    def _resign(self, why: str) -> None:
        if self.controller is not None:
            self.trace(f"resigns as controller: {why}")
            self.controller = None

    # ----- partitions (ReplicaManager)

    def replication_config(self, topic: str) -> ReplicationConfig:
        value = self.configs.get(topic, {}).get("min.insync.replicas")
        return ReplicationConfig(int(value) if value is not None else 1, self.settings.replica_lag_time_max_ms)

    def _apply_state(self, key, state, mzxid: int) -> None:
        replicas = self.world.assignment[key]
        if self.id not in replicas or not self.zk.registered:
            return
        partition = self.partitions.get(key)
        if partition is None:
            log = self.logs.setdefault(key, MemoryLog())
            partition = self.partitions[key] = Partition(self.id, *key, log, self.hw_checkpoint.get(key, 0))
            partition.load_producers(None)
        effects = partition.apply_state(state, replicas, self.replication_config(key[0]), self.now, mzxid,
                                        self.zk.registration_zxid)
        if effects.role_changed:
            self.trace(f"{key[0]}-{key[1]}: {partition.role}, leader {state.leader}, epoch {state.leader_epoch}, "
                       f"isr {list(state.isr)}, LEO {partition.log.log_end_offset}")
        self._act(partition, effects)

    def _act(self, partition: Partition, effects: Effects) -> None:
        for completion in effects.completions:
            first = self.parked.pop(completion.key, None)
            if first is not None:
                self.send(completion.key[0], ("produce_resp", completion.key[1], completion.error, first))
        if effects.role_changed:
            self.isr_outbox.pop(partition.key, None)
            if partition.follower is not None:
                self.later(0, self._fetch_tick, partition.key, partition.follower)
        if effects.isr_proposal is not None:
            self.trace(f"{partition.topic}-{partition.index}: proposing ISR {sorted(effects.isr_proposal.new_isr)}")
            self.isr_outbox[partition.key] = effects.isr_proposal
            self._send_alter(partition.key, effects.isr_proposal)

    def _every_partition(self, event: str, interval_ms: int) -> None:
        for partition in self.partitions.values():
            self._act(partition, getattr(partition, event)(self.now))
        self.later(interval_ms, self._every_partition, event, interval_ms)

    def _flush(self) -> None:
        for log in self.logs.values():
            log.flush()
        for key, partition in self.partitions.items():
            self.hw_checkpoint[key] = partition.high_watermark
        self.later(self.settings.flush_interval_ms, self._flush)

    # ----- messages

    def _handle(self, src, message) -> None:
        kind, rid, *args = message
        if kind == "resp":
            self.zk.on_response(rid, *args)
        elif kind == "watch":
            self._on_watch(rid, *args)
        elif kind == "alter":
            if self.controller is not None:
                self.controller.on_alter_partition(src, rid, *args)
            else:
                self.send(src, ("alter_resp", rid, NOT_CONTROLLER, None))
        elif kind.endswith("_resp"):
            entry = self.pending.pop(rid, None)
            if entry is not None:
                getattr(self, "_on_" + kind)(*entry, *args)
        elif (partition := self.partitions.get(args[0])) is not None:
            getattr(self, "_on_" + kind)(src, rid, partition, *args[1:])
        elif kind != "produce" or args[-1] != 0:
            self.send(src, (kind + "_resp", rid) + NO_PARTITION[kind])

    def _on_produce(self, src, rid, partition: Partition, value: str, producer_id: int, acks: int) -> None:
        batch = SimBatch(value, producer_id)
        try:
            produced = partition.produce(batch, batch, acks, self.now, proven=self.can_lead)
        except KafkaError as e:
            if acks != 0:
                self.send(src, ("produce_resp", rid, e.code, -1))
            return
        self._act(partition, produced.effects)
        if acks == 1:
            self.send(src, ("produce_resp", rid, ErrorCode.none, produced.first_offset))
        elif acks == -1:
            key = (src, rid, self._rid())  # a duplicated request is parked twice, as the real broker would
            done = partition.await_replication(key, produced.last_offset, self.now + self.settings.request_timeout_ms,
                                               self.now)
            self.parked[key] = produced.first_offset
            if done is not None:
                self._act(partition, Effects([done]))

    def _on_read(self, src, rid, partition: Partition, offset: int, current_leader_epoch: int) -> None:
        error = partition.check_request(current_leader_epoch, proven=self.can_lead)
        error, limit = (error, 0) if error else partition.read_limit(offset, follower=False)
        hw = partition.high_watermark if partition.leader else -1
        batches = partition.log.read(offset, limit, 50) if not error else ()
        self.send(src, ("read_resp", rid, error, hw, offset, [b.value for b in batches]))

    def _on_fetch(self, src, rid, partition: Partition, offset: int, current_leader_epoch: int,
                  replica_epoch: int) -> None:
        error, effects = partition.on_follower_fetch(src, replica_epoch, offset, current_leader_epoch, self.now)
        self._act(partition, effects)
        error, limit = (error, 0) if error else partition.read_limit(offset, follower=True)
        batches = partition.log.read(offset, limit, self.settings.replica_fetch_max_records) if not error else None
        self.send(src, ("fetch_resp", rid, error, partition.high_watermark, batches or None))

    def _on_ofle(self, src, rid, partition: Partition, current_leader_epoch: int, requested_epoch: int) -> None:
        answer = partition.answer_epoch_request(requested_epoch, current_leader_epoch)
        self.send(src, ("ofle_resp", rid, answer))

    # ----- the follower loop (ReplicaFetcher)

    def _fetch_tick(self, key, follower) -> None:
        partition = self.partitions.get(key)
        if partition is None or partition.follower is not follower:
            return
        request = partition.next_fetch_request()
        rid = self._rid()
        self.pending[rid] = (partition, follower, request)
        if isinstance(request, SendOffsetForLeaderEpoch):
            self.send(request.leader_id, ("ofle", rid, key, request.current_leader_epoch, request.leader_epoch))
        else:
            self.send(request.leader_id, ("fetch", rid, key, request.fetch_offset, request.current_leader_epoch,
                                          self.zk.registration_zxid))
        self.later(self.settings.fetch_timeout_ms, self._fetch_timeout, rid)

    def _fetch_timeout(self, rid) -> None:
        entry = self.pending.pop(rid, None)
        if entry is not None:
            self.later(self.settings.replica_fetch_backoff_ms, self._fetch_tick, entry[0].key, entry[1])

    # Answers go to the partition's current follower, whose core matches them to what it asked.
    def _on_ofle_resp(self, partition: Partition, follower, request, answer: EpochEndOffset) -> None:
        if partition.follower is not None:
            backoff = partition.on_epoch_answer(request, answer)
            self.later(self.settings.replica_fetch_backoff_ms if backoff else 0, self._fetch_tick, partition.key,
                       follower)

    def _on_fetch_resp(self, partition: Partition, follower, request, error, leader_hw, batches) -> None:
        if partition.follower is not None:
            decision = partition.on_fetched(request, error, leader_hw, batches, batches, self.now)
            delay = {AppendRecords: 0, Backoff: self.settings.replica_fetch_backoff_ms}.get(
                type(decision), self.settings.replica_fetch_wait_ms)
            self.later(delay, self._fetch_tick, partition.key, follower)

    # ----- ISR changes (isr_sender.py)

    def _send_alter(self, key, proposal) -> None:
        if self.isr_outbox.get(key) is not proposal:
            return
        if self.controller_id == NO_LEADER:
            self.later(self.settings.alter_partition_timeout_ms, self._send_alter, key, proposal)
            return
        rid = self._rid()
        self.pending[rid] = (key, proposal)
        self.send(self.controller_id, ("alter", rid, key, self.id, self.zk.registration_zxid, proposal))
        self.later(self.settings.alter_partition_timeout_ms, self._alter_timeout, rid)

    def _alter_timeout(self, rid) -> None:
        entry = self.pending.pop(rid, None)
        if entry is not None:
            self._send_alter(*entry)

    def _on_alter_resp(self, key, proposal, error, state) -> None:
        partition = self.partitions.get(key)
        if error == NOT_CONTROLLER or partition is None:
            self.later(100, self._send_alter, key, proposal)
            return
        if self.isr_outbox.get(key) is proposal:
            del self.isr_outbox[key]
        result = (IsrChangeRejected(error) if error else
                  IsrChangeAccepted(state.leader_epoch, state.partition_epoch, frozenset(state.isr)))
        effects = partition.on_isr_change_result(proposal, result, self.now)
        if effects.isr_proposal is not None:  # a retry, after a backoff
            self.isr_outbox[key] = effects.isr_proposal
            self.later(100, self._send_alter, key, effects.isr_proposal)
            effects.isr_proposal = None
        self._act(partition, effects)
