"""A simulated broker: the shell of weir/broker (replica_manager, replica_fetcher, isr_sender,
server's ZooKeeper handling) rebuilt on simulated time, around the very same cores.

What is the same as the real broker (read it side by side):
- roles come from `weir.broker.partition.Partition.apply_state` (LeaderPartition.become_leader /
  on_partition_state, FollowerPartition), fed the partition states read from ZooKeeper;
- produce: check_acks_all -> log append -> on_leader_append -> ProducePurgatory.park;
- a follower fetch at the leader: epoch check -> on_follower_fetch -> AlterPartition proposal ->
  HW advance -> purgatory.complete_ready; the leader answers followers even while its ZooKeeper
  session is suspended (as `_leader_for_follower` does), but not producers or consumers;
- the follower loop: next_request -> OffsetForLeaderEpoch (answer_offset_for_leader_epoch at the
  leader) or Fetch -> truncate / append_as_follower -> on_truncated / on_appended;
- check_isr every replica.lag.time.max.ms / 2; on_isr_change_result; lose_leadership_proof when
  the ZooKeeper connection is suspended or the session lost.

What the simulator adds or decides differently (each is named in the report):
- min.insync.replicas changes reach a sitting leader at once (Kafka reads the topic config at
  each produce; the real shell freezes it at become_leader);
- with `fence_stale_states`, a restarted broker ignores partition states written before its
  registration that count it in the ISR, until the controller rewrites them (broker epochs);
- with `fence_regressed_followers`, the leader refuses a fetch from an ISR member below that
  member's known LEO (a restarted replica that lost its tail; KIP-903);
- with `kip207_reads`, a consumer read at a new leader whose HW is still below its leader epoch's
  start offset is answered OFFSET_NOT_AVAILABLE (KIP-207), so readers never see the HW go back.

Process state is lost on a crash; the logs (minus what was not flushed, if the crash loses it)
and the HW checkpoint survive.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from weir.broker.partition import Partition
from weir.coordination.model import NO_LEADER
from weir.replication.epoch_fencing import check_current_leader_epoch
from weir.replication.follower import AppendRecords, Backoff, SendOffsetForLeaderEpoch
from weir.replication.leader import IsrChangeAccepted, IsrChangeRejected, ReplicationConfig
from weir.replication.truncation import EpochEndOffset, Truncation, answer_offset_for_leader_epoch

from weir.sim.memlog import MemoryLog
from weir.sim.network import ZK
from weir.sim.zookeeper import (BROKERS, CONTROLLER, NODE_EXISTS, OK, SESSION_EXPIRED, broker_path, config_path,
                                state_path)

TIMEOUT = "timeout"
NOT_CONTROLLER = ErrorCode.not_controller


class SimBroker:
    def __init__(self, world, broker_id: int) -> None:
        self.world = world
        self.id = broker_id
        self.settings = world.settings
        self.logs: dict[tuple[str, int], MemoryLog] = {}  # the disk: survives crashes
        self.hw_checkpoint: dict[tuple[str, int], int] = {}
        self.up = False
        self.paused = False
        self.incarnation = 0
        self._held: list = []
        self._next_id = 0
        world.network.register(broker_id, self._receive)
        self._reset()

    def _reset(self) -> None:
        self.sid: int | None = None
        self.registered = False
        self.registration_zxid = 0
        self.can_lead = False
        self.suspended = False
        self.last_zk_ok = self.world.events.now
        self.zk_pending: dict[int, tuple] = {}
        self.pending: dict[int, tuple] = {}
        self.states: dict = {}
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
        if incarnation != self.incarnation or not self.up:
            return
        if self.paused:
            self._held.append((fn, args))
            return
        fn(*args)

    def _receive(self, src, message) -> None:
        if not self.up:
            return
        if self.paused:
            self._held.append((self._handle, (src, message)))
            return
        self._handle(src, message)

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
        self._connect()
        s = self.settings
        self.later(s.zk_heartbeat_ms, self._heartbeat)
        self.later(s.replica_lag_time_max_ms // 2, self._check_isr)
        self.later(s.flush_interval_ms, self._flush)
        self.later(100, self._expire_produces)

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

    # ----- ZooKeeper session (server.py's _on_zk_state, zk_client's session)

    def zk(self, op: str, *args, callback=None) -> None:
        rid = self._rid()
        self.zk_pending[rid] = (callback, self.sid)
        self.send(ZK, ("req", self.sid, rid, op, args))
        self.later(self.settings.zk_request_timeout_ms, self._zk_timeout, rid)

    def _zk_timeout(self, rid: int) -> None:
        entry = self.zk_pending.pop(rid, None)
        if entry is None:
            return
        self._suspend()
        if entry[0] is not None:
            entry[0](TIMEOUT, None)

    def _suspend(self) -> None:
        if not self.suspended and self.sid is not None:
            self.suspended = True
            self.trace("ZooKeeper connection suspended: no acknowledgements")
            self.lose_leadership_proof()

    def _on_zk_response(self, rid, status, result, missed) -> None:
        entry = self.zk_pending.pop(rid, None)
        sid = entry[1] if entry is not None else self.sid
        if status == SESSION_EXPIRED:
            if sid is not None and sid == self.sid:
                self._session_lost()
            return
        self.last_zk_ok = self.now
        if (self.suspended or missed) and self.sid is not None and sid == self.sid:
            self.suspended = False
            self.trace("ZooKeeper connection back; reading everything again")
            self._read_all()
            if self.controller is not None:  # watches may have been missed: look again (the watcher's "current")
                self.controller.enqueue(("brokers",))
                for topic in self.world.topics:
                    self.controller.enqueue(("config", topic))
        if entry is not None and entry[0] is not None:
            entry[0](status, result)

    def _session_lost(self) -> None:
        self.trace("ZooKeeper session lost")
        self.lose_leadership_proof()
        self.registered = False
        if self.controller is not None:
            self.trace("no longer controller (session lost)")
        self.controller = None
        self.sid = None
        self.suspended = False
        self.zk_pending.clear()
        self._connect()

    def _connect(self) -> None:
        def connected(status, sid):
            if status == OK:
                self.sid = sid
                self.last_zk_ok = self.now
                self._register()
            else:
                self.later(100, self._connect)
        rid = self._rid()
        self.zk_pending[rid] = (connected, None)
        self.send(ZK, ("req", None, rid, "connect", (self.settings.zookeeper_session_timeout_ms,)))
        self.later(self.settings.zk_request_timeout_ms, self._zk_timeout, rid)

    def _register(self) -> None:
        sid = self.sid

        def registered(status, result):
            if sid != self.sid:
                return
            if status == OK:
                self.registered = True
                self.registration_zxid = result
                self.trace(f"registered (session {sid})")
                self._read_all(first=True)
            else:  # an old session's registration lingers until it expires (server.py's _register)
                self.later(200, self._register)
        self.zk("create", broker_path(self.id), self.id, True, callback=registered)

    def _heartbeat(self) -> None:
        if self.sid is not None:
            if self.now - self.last_zk_ok > 2 * self.settings.zookeeper_session_timeout_ms // 3:
                self._suspend()
            self.zk("heartbeat")
        self.later(self.settings.zk_heartbeat_ms, self._heartbeat)

    def _read_all(self, first: bool = False) -> None:
        sid = self.sid

        def loaded(status, snapshot):
            if sid != self.sid or not self.registered:
                return
            if status != OK:
                self.later(100, self._read_all)
                return
            self.configs = snapshot["configs"]
            self.controller_id = snapshot["controller"]
            self.can_lead = True
            for key, (state, mzxid) in sorted(snapshot["states"].items()):
                self._apply_state(key, state, mzxid)
            if self.controller is not None and self.controller_id != self.id:
                self._resign("another broker holds /controller")
            if self.controller_id == NO_LEADER:
                self._try_elect()
        self.zk("read_all", self.world.topics, True, callback=loaded)

    def lose_leadership_proof(self) -> None:
        self.can_lead = False
        for partition in self.partitions.values():
            self._complete(partition.purgatory.fail_all(ErrorCode.not_leader_or_follower))

    # ----- watches

    def _on_watch(self, sid: int, path: str) -> None:
        if sid != self.sid:
            return
        if path == CONTROLLER:
            self.zk("get", CONTROLLER, True, callback=self._on_controller_znode)
        elif path == BROKERS:
            if self.controller is not None:
                self.controller.enqueue(("brokers",))
        elif path.startswith("/config/topics/"):
            topic = path.rsplit("/", 1)[1]
            self.zk("get", path, True, callback=lambda status, r: self._on_config(topic, status, r))
        elif path.endswith("/state"):
            parts = path.split("/")
            key = (parts[3], int(parts[5]))
            self.zk("get", path, True, callback=lambda status, r: self._on_state(key, status, r))

    def _on_controller_znode(self, status, result) -> None:
        if status != OK:
            return
        self.controller_id = NO_LEADER if result is None else result[0]
        if self.controller is not None and self.controller_id != self.id:
            self._resign("/controller changed")
        if self.controller_id == NO_LEADER:
            self._try_elect()

    def _on_config(self, topic: str, status, result) -> None:
        if status != OK:
            return
        self.configs[topic] = {} if result is None else result[0]
        config = self.replication_config(topic)
        for partition in self.partitions.values():
            if partition.topic == topic and partition.leader is not None:
                partition.leader.config = config  # Kafka reads min.insync.replicas at each produce
                self._complete(partition.purgatory.complete_ready(partition.status(), self.now))
        if self.controller is not None:
            self.controller.enqueue(("config", topic))

    def _on_state(self, key, status, result) -> None:
        if status == OK and result is not None:
            self._apply_state(key, result[0], result[2])

    # ----- controller election (ControllerService._elect)

    def _try_elect(self) -> None:
        if not self.registered or self.controller is not None:
            return
        sid = self.sid

        def elected(status, result):
            if sid != self.sid or not self.registered:
                return
            if status == OK:
                from weir.sim.controller import SimController
                epoch, epoch_version = result
                self.controller_id = self.id
                self.trace(f"won the controller election (epoch {epoch})")
                self.controller = SimController(self, epoch, epoch_version)
            elif status == NODE_EXISTS:
                self.controller_id = result
        self.zk("elect", self.id, callback=elected)

    def _resign(self, why: str) -> None:
        if self.controller is not None:
            self.trace(f"resigns as controller: {why}")
            self.controller = None

    # ----- partition roles (ReplicaManager._apply_state)

    def replication_config(self, topic: str) -> ReplicationConfig:
        value = self.configs.get(topic, {}).get("min.insync.replicas")
        return ReplicationConfig(int(value) if value is not None else 1, self.settings.replica_lag_time_max_ms)

    def _apply_state(self, key, state, mzxid: int) -> None:
        if not self.can_lead and not self.registered:
            return
        replicas = self.world.assignment[key]
        if self.id not in replicas:
            return
        if self.settings.fence_stale_states and self.is_stale_for_us(state, mzxid):
            return
        self.states[key] = state
        partition = self.partitions.get(key)
        if partition is None:
            log = self.logs.setdefault(key, MemoryLog())
            partition = self.partitions[key] = Partition(self.id, key[0], key[1], log,
                                                         self.hw_checkpoint.get(key, 0))
        changed, done = partition.apply_state(state, replicas, self.replication_config(key[0]), self.now)
        if changed:
            self.trace(f"{key[0]}-{key[1]}: {partition.role}, leader {state.leader}, epoch {state.leader_epoch}, "
                       f"isr {list(state.isr)}, LEO {partition.log.log_end_offset}")
            self.isr_outbox.pop(key, None)
            if partition.follower is not None:
                self.later(0, self._fetch_tick, key, partition.follower)
        self._complete(done)

    def is_stale_for_us(self, state, mzxid: int) -> bool:
        """A state written before our registration that counts us in its ISR (as leader or
        member) describes our previous incarnation, which may have held more than we hold now.
        Wait until a controller has seen our registration: it always writes a new state then (we
        bounced: controller.py), which we take. The real broker acts on such states at
        once (see the report); Kafka fences them with broker epochs (KIP-380, KIP-903)."""
        return self.id in state.isr and mzxid < self.registration_zxid

    # ----- messages

    def _handle(self, src, message) -> None:
        kind = message[0]
        if kind == "resp":
            self._on_zk_response(*message[1:])
        elif kind == "watch":
            self._on_watch(*message[1:])
        elif kind == "fetch":
            self._on_fetch(src, *message[1:])
        elif kind == "fetch_resp":
            self._on_fetch_response(*message[1:])
        elif kind == "ofle":
            self._on_offset_for_leader_epoch(src, *message[1:])
        elif kind == "ofle_resp":
            self._on_offset_for_leader_epoch_response(*message[1:])
        elif kind == "produce":
            self._on_produce(src, *message[1:])
        elif kind == "read":
            self._on_read(src, *message[1:])
        elif kind == "alter":
            if self.controller is not None:
                self.controller.enqueue(("alter", src) + message[1:])
            else:
                self.send(src, ("alter_resp", message[1], NOT_CONTROLLER, None))
        elif kind == "alter_resp":
            self._on_alter_response(*message[1:])
        else:
            raise AssertionError(f"unknown message {message!r}")

    # ----- leader side: produce (ReplicaManager.append / await_replication)

    def _on_produce(self, src, rid, key, values, acks) -> None:
        partition = self.partitions.get(key)
        if partition is None or partition.leader is None or not self.can_lead:
            if acks != 0:
                self.send(src, ("produce_resp", rid, ErrorCode.not_leader_or_follower, -1))
            return
        leader = partition.leader
        if acks == -1:
            error = leader.check_acks_all()
            if error:
                self.send(src, ("produce_resp", rid, error, -1))
                return
        first, last = partition.log.append(values, leader.leader_epoch)
        if leader.on_leader_append(partition.log.log_end_offset):
            self._high_watermark_advanced(partition)
        if acks == 0:
            return
        if acks == 1:
            self.send(src, ("produce_resp", rid, ErrorCode.none, first))
            return
        pkey = (src, rid, self._rid())  # a duplicated request is parked twice, as the real broker would
        done = partition.purgatory.park(pkey, last + 1, leader.leader_epoch,
                                        self.now + self.settings.request_timeout_ms, partition.status(), self.now)
        if done is not None:
            self.send(src, ("produce_resp", rid, done.error, first))
        else:
            self.parked[pkey] = first

    def _complete(self, completions) -> None:
        for completion in completions:
            first = self.parked.pop(completion.key, None)
            if first is not None:
                src, rid, _ = completion.key
                self.send(src, ("produce_resp", rid, completion.error, first))

    def _high_watermark_advanced(self, partition: Partition) -> None:
        self._complete(partition.purgatory.complete_ready(partition.status(), self.now))

    # ----- leader side: reads (ReplicaManager.read)

    def _on_read(self, src, rid, key, offset, current_leader_epoch) -> None:
        partition = self.partitions.get(key)
        if partition is None or partition.leader is None or not self.can_lead:
            self.send(src, ("read_resp", rid, ErrorCode.not_leader_or_follower, -1, offset, (), ()))
            return
        error = check_current_leader_epoch(current_leader_epoch, partition.leader_epoch)
        if error:
            self.send(src, ("read_resp", rid, error, -1, offset, (), ()))
            return
        leader = partition.leader
        hw = leader.high_watermark
        if self.settings.kip207_reads and hw < leader.leader_epoch_start_offset:
            self.send(src, ("read_resp", rid, ErrorCode.offset_not_available, -1, offset, (), ()))
            return
        if offset > hw:
            self.send(src, ("read_resp", rid, ErrorCode.offset_out_of_range, hw, offset, (), ()))
            return
        epochs, values = partition.log.read(offset, hw, 50)
        self.send(src, ("read_resp", rid, ErrorCode.none, hw, offset, epochs, values))

    def _on_fetch(self, src, rid, key, fetch_offset, current_leader_epoch) -> None:
        partition = self.partitions.get(key)
        if partition is None or partition.leader is None:
            self.send(src, ("fetch_resp", rid, ErrorCode.not_leader_or_follower, -1, fetch_offset, (), ()))
            return
        error = check_current_leader_epoch(current_leader_epoch, partition.leader_epoch)
        if error:
            self.send(src, ("fetch_resp", rid, error, -1, fetch_offset, (), ()))
            return
        leader = partition.leader
        known = leader.followers.get(src)
        if (self.settings.fence_regressed_followers and known is not None and src in leader.maximal_isr
                and fetch_offset < known.log_end_offset):
            # A replica in our ISR fetching below its known LEO restarted with less than it had
            # (KIP-903's case): its lower LEO must not count. It waits until we learn the ISR without it.
            self.send(src, ("fetch_resp", rid, ErrorCode.not_leader_or_follower, -1, fetch_offset, (), ()))
            return
        outcome = leader.on_follower_fetch(src, fetch_offset, self.now)
        if outcome.error:
            self.send(src, ("fetch_resp", rid, outcome.error, leader.high_watermark, fetch_offset, (), ()))
            return
        if outcome.alter_partition is not None:
            self._send_isr_change(partition, outcome.alter_partition)
        if outcome.high_watermark_advanced:
            self._high_watermark_advanced(partition)
        epochs, values = partition.log.read(fetch_offset, partition.log.log_end_offset,
                                            self.settings.replica_fetch_max_records)
        self.send(src, ("fetch_resp", rid, ErrorCode.none, leader.high_watermark, fetch_offset, epochs, values))

    def _on_offset_for_leader_epoch(self, src, rid, key, current_leader_epoch, requested_epoch) -> None:
        partition = self.partitions.get(key)
        if partition is None:
            answer = EpochEndOffset(ErrorCode.unknown_topic_or_partition)
        else:
            answer = answer_offset_for_leader_epoch(
                requested_epoch, current_leader_epoch, is_leader=partition.leader is not None,
                our_leader_epoch=partition.leader_epoch, epochs=partition.log.leader_epochs,
                log_end_offset=partition.log.log_end_offset)
        self.send(src, ("ofle_resp", rid, answer.error, answer.leader_epoch, answer.end_offset))

    # ----- follower side (ReplicaFetcher)

    def _fetch_tick(self, key, follower) -> None:
        partition = self.partitions.get(key)
        if partition is None or partition.follower is not follower:
            return
        request = follower.next_request()
        rid = self._rid()
        self.pending[rid] = (key, follower, request)
        if isinstance(request, SendOffsetForLeaderEpoch):
            self.send(request.leader_id, ("ofle", rid, key, request.current_leader_epoch, request.leader_epoch))
        else:
            self.send(request.leader_id, ("fetch", rid, key, request.fetch_offset, request.current_leader_epoch))
        self.later(self.settings.fetch_timeout_ms, self._fetch_timeout, rid)

    def _fetch_timeout(self, rid) -> None:
        entry = self.pending.pop(rid, None)
        if entry is not None:
            self.later(self.settings.replica_fetch_backoff_ms, self._fetch_tick, entry[0], entry[1])

    def _follower_entry(self, rid):
        entry = self.pending.pop(rid, None)
        if entry is None:
            return None
        key, follower, request = entry
        partition = self.partitions.get(key)
        if partition is None or partition.follower is not follower:
            return None
        return partition, follower, request

    def _on_offset_for_leader_epoch_response(self, rid, error, leader_epoch, end_offset) -> None:
        entry = self._follower_entry(rid)
        if entry is None:
            return
        partition, follower, request = entry
        decision = follower.on_offset_for_leader_epoch_response(
            request.current_leader_epoch, request.leader_epoch, EpochEndOffset(error, leader_epoch, end_offset))
        delay = 0
        if isinstance(decision, Truncation):
            log = partition.log
            if decision.offset < log.log_end_offset:
                self.trace(f"{partition.topic}-{partition.index}: truncating to {decision.offset} by leader epoch "
                           f"(LEO was {log.log_end_offset})")
            log.truncate_to(decision.offset)  # trims the epoch cache even when no record goes
            follower.on_truncated(log.log_end_offset)
        elif isinstance(decision, Backoff):
            delay = self.settings.replica_fetch_backoff_ms
        self.later(delay, self._fetch_tick, partition.key, follower)

    def _on_fetch_response(self, rid, error, leader_hw, base_offset, epochs, values) -> None:
        entry = self._follower_entry(rid)
        if entry is None:
            return
        partition, follower, request = entry
        decision = follower.on_fetch_response(request.fetch_offset, error, leader_hw,
                                              base_offset if values else None)
        delay = 0
        if isinstance(decision, AppendRecords):
            partition.log.append_as_follower(decision.base_offset, list(epochs), list(values))
            follower.on_appended(partition.log.log_end_offset, decision.leader_high_watermark)
        elif isinstance(decision, Backoff):
            delay = self.settings.replica_fetch_backoff_ms
        else:
            delay = self.settings.replica_fetch_wait_ms
        self.later(delay, self._fetch_tick, partition.key, follower)

    # ----- ISR changes (isr_sender.py, ReplicaManager.on_isr_change_result)

    def _send_isr_change(self, partition: Partition, proposal) -> None:
        self.isr_outbox[partition.key] = proposal
        self._send_alter(partition.key, proposal)

    def _send_alter(self, key, proposal) -> None:
        if self.isr_outbox.get(key) is not proposal:
            return
        if self.controller_id == NO_LEADER:
            self.later(self.settings.alter_partition_timeout_ms, self._send_alter, key, proposal)
            return
        rid = self._rid()
        self.pending[rid] = (key, proposal, None)
        self.send(self.controller_id, ("alter", rid, key, self.id, proposal.leader_epoch, proposal.partition_epoch,
                                       tuple(sorted(proposal.new_isr))))
        self.later(self.settings.alter_partition_timeout_ms, self._alter_timeout, rid)

    def _alter_timeout(self, rid) -> None:
        entry = self.pending.pop(rid, None)
        if entry is not None:
            self._send_alter(entry[0], entry[1])

    def _on_alter_response(self, rid, error, state) -> None:
        entry = self.pending.pop(rid, None)
        if entry is None:
            return
        key, proposal, _ = entry
        if error == NOT_CONTROLLER:
            self.later(100, self._send_alter, key, proposal)
            return
        partition = self.partitions.get(key)
        if partition is None or partition.leader is None or partition.leader.pending is not proposal:
            return
        self.isr_outbox.pop(key, None)
        result = (IsrChangeRejected(error) if error else
                  IsrChangeAccepted(state.leader_epoch, state.partition_epoch, frozenset(state.isr)))
        outcome = partition.leader.on_isr_change_result(result)
        if outcome.retry is not None:
            self.isr_outbox[key] = outcome.retry
            self.later(100, self._send_alter, key, outcome.retry)
        if outcome.high_watermark_advanced:
            self._high_watermark_advanced(partition)
        self._complete(partition.purgatory.complete_ready(partition.status(), self.now))

    # ----- timers

    def _check_isr(self) -> None:
        for partition in self.partitions.values():
            if partition.leader is not None:
                proposal = partition.leader.maybe_shrink_isr(self.now)
                if proposal is not None:
                    self.trace(f"{partition.topic}-{partition.index}: proposing ISR {sorted(proposal.new_isr)}")
                    self._send_isr_change(partition, proposal)
        self.later(self.settings.replica_lag_time_max_ms // 2, self._check_isr)

    def _expire_produces(self) -> None:
        for partition in self.partitions.values():
            if len(partition.purgatory):
                self._complete(partition.purgatory.complete_ready(partition.status(), self.now))
        self.later(100, self._expire_produces)

    def _flush(self) -> None:
        for log in self.logs.values():
            log.flush()
        for key, partition in self.partitions.items():
            self.hw_checkpoint[key] = partition.high_watermark
        self.later(self.settings.flush_interval_ms, self._flush)
