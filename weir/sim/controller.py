"""The simulated controller: weir/broker/controller_service.py on simulated time.

One event at a time into `ControllerCore` (brokers changed, topic config changed, AlterPartition,
the leader-balance timer); each event's StateChanges are written as one ZooKeeper request of
compare-and-sets fenced by the controller epoch, and the next event waits until they are settled
(`on_state_written` / `on_write_conflict`, up to MAX_CONFLICT_ROUNDS rounds of re-decisions).
A write whose answer is lost is sent again: the compare-and-set makes that safe. A fenced write
means another controller has won: this one resigns.

Brokers are live when registered under /brokers/ids; a registration whose czxid changed since the
last look is a bounce (Kafka's broker epoch), reported to `on_brokers_changed` as such. A new
controller has no last look: it counts as bounced every broker registered after a partition state
naming it in the ISR was written (the state describes its previous incarnation).
"""

from __future__ import annotations

from collections import deque

from kio.schema.errors import ErrorCode

from weir.controller.decisions import ControllerConfig, ControllerCore
from weir.coordination.model import NO_LEADER, BrokerInfo, ClusterView, TopicAssignment

from weir.sim.zookeeper import BAD_VERSION, BROKERS, FENCED, OK, config_path, state_path

MAX_CONFLICT_ROUNDS = 10


class SimController:
    def __init__(self, broker, epoch: int, epoch_version: int) -> None:
        self.broker = broker
        self.world = broker.world
        self.epoch = epoch
        self.epoch_version = epoch_version
        self.core: ControllerCore | None = None
        self.queue: deque = deque()
        self.busy = True
        self.known: dict[int, int] = {}  # broker id -> registration czxid
        self._load()

    @property
    def active(self) -> bool:
        return self.broker.controller is self and self.broker.up

    def _load(self) -> None:
        def loaded(status, snapshot):
            if not self.active:
                return
            if status != OK:
                self.broker.later(100, self._load)
                return
            self._start(snapshot)
        self.broker.zk.request("read_all", self.world.topics, True, callback=loaded)

    def _start(self, snapshot) -> None:
        world = self.world
        self.known = dict(snapshot["brokers"])
        view = ClusterView(brokers={b: BrokerInfo(b, "sim", 9092) for b in sorted(self.known)},
                           controller_id=self.broker.id, controller_epoch=self.epoch)
        new_topics = []
        for topic, partitions in world.topics.items():
            assignment = TopicAssignment(topic, world.topic_ids[topic], {p: world.assignment[(topic, p)]
                                                                          for p in partitions})
            if all((topic, p) in snapshot["states"] for p in partitions):
                view.topics[topic] = assignment
                view.topic_configs[topic] = dict(snapshot["configs"].get(topic, {}))
                for p in partitions:
                    view.states[(topic, p)] = snapshot["states"][(topic, p)][0]
            else:
                new_topics.append(assignment)
        s = world.settings
        self.core = ControllerCore(view, ControllerConfig(
            unclean_leader_election_enable=False, auto_leader_rebalance_enable=s.auto_leader_rebalance_enable))
        # A broker registered after a state naming it in the ISR was written has bounced since
        # (its previous incarnation is the one in the ISR): the core must hear it as such.
        bounced = {b for b, czxid in self.known.items()
                   if any(b in state.isr and czxid > mzxid for state, mzxid in snapshot["states"].values())}
        if bounced:
            world.trace(f"controller b{self.broker.id}: registered after their states were written: {sorted(bounced)}")
        changes = self.core.on_brokers_changed(view.brokers, bounced, self.known)
        for assignment in new_topics:
            changes += self.core.on_topic_created(assignment, snapshot["configs"].get(assignment.name, {}))
        self._write(changes, lambda written: self._done())
        self.broker.later(s.leader_imbalance_check_interval_ms, self._balance_timer)

    def _balance_timer(self) -> None:
        if self.active:
            self.enqueue(("balance",))
            self.broker.later(self.world.settings.leader_imbalance_check_interval_ms, self._balance_timer)

    # ----- the broker tells

    def on_metadata_change(self) -> None:
        self.enqueue(("brokers",))
        for topic in self.world.topics:
            self.enqueue(("config", topic))

    def on_alter_partition(self, src, rid, key, leader_id, broker_epoch, proposal) -> None:
        self.enqueue(("alter", src, rid, key, leader_id, broker_epoch, proposal))

    def on_session_suspended(self) -> None:
        pass

    # ----- the event queue

    def enqueue(self, event) -> None:
        self.queue.append(event)
        self._next()

    def _done(self) -> None:
        self.busy = False
        self._next()

    def _next(self) -> None:
        while self.active and not self.busy and self.queue:
            event = self.queue.popleft()
            self.busy = True
            if self.core.unconfirmed_keys:
                self._settle(event)
            else:
                getattr(self, "_on_" + event[0])(*event[1:])

    def _settle(self, event) -> None:
        """ControllerService._settle: states decided whose write had no answer are read back and
        adopted before the next decision; the event fails if ZooKeeper cannot be read."""
        keys = self.core.unconfirmed_keys

        def read(status, snapshot):
            if not self.active:
                return
            if status != OK:
                self._fail(event)
                return
            self.world.trace(f"controller b{self.broker.id}: re-read {keys} whose write had no answer")
            changes = []
            for key in keys:
                stored = snapshot["states"].get(key)
                changes += self.core.adopt_stored(key, None if stored is None else stored[0])
            self._write(changes, lambda written: getattr(self, "_on_" + event[0])(*event[1:]),
                        failed=lambda: self._fail(event))
        self.broker.zk.request("read_all", self.world.topics, False, callback=read)

    def _fail(self, event) -> None:
        """An event whose ZooKeeper request failed: an AlterPartition is answered REQUEST_TIMED_OUT
        (admin_apis), anything else is dropped (the shell logs it); the next event settles first."""
        if event[0] == "alter":
            self.broker.send(event[1], ("alter_resp", event[2], ErrorCode.request_timed_out, None))
        self._done()

    def _on_brokers(self) -> None:
        def read(status, children):
            if not self.active:
                return
            if status != OK:
                self.busy = False
                self.enqueue(("brokers",))
                return
            now = {int(name): czxid for name, (_, czxid) in children.items()}
            bounced = {b for b, czxid in now.items() if b in self.known and self.known[b] != czxid}
            if now.keys() == self.known.keys() and not bounced:
                self._done()
                return
            self.world.trace(f"controller b{self.broker.id}: brokers {sorted(now)}"
                             f"{' bounced ' + str(sorted(bounced)) if bounced else ''}")
            self.known = now
            changes = self.core.on_brokers_changed({b: BrokerInfo(b, "sim", 9092) for b in sorted(now)}, bounced, now)
            self._write(changes, lambda written: self._done())
        self.broker.zk.request("children", BROKERS, True, callback=read)

    def _on_config(self, topic: str) -> None:
        def read(status, result):
            if not self.active:
                return
            if status != OK:
                self._done()
                return
            config = {} if result is None else result[0]
            changes = self.core.on_topic_config_changed(topic, config)
            self._write(changes, lambda written: self._done())
        self.broker.zk.request("get", config_path(topic), True, callback=read)

    def _on_balance(self) -> None:
        self._write(self.core.check_leader_balance(), lambda written: self._done())

    def _on_alter(self, src, rid, key, leader_id, broker_epoch, proposal) -> None:
        if self.core.is_stale_broker_epoch(leader_id, broker_epoch):
            self.broker.send(src, ("alter_resp", rid, ErrorCode.stale_broker_epoch, None))
            self._done()
            return
        outcome = self.core.on_alter_partition(key[0], key[1], leader_id, proposal.leader_epoch,
                                               proposal.partition_epoch, tuple(sorted(proposal.new_isr)),
                                               dict(proposal.broker_epochs))
        if outcome.error or outcome.change is None:
            self.broker.send(src, ("alter_resp", rid, outcome.error, outcome.state))
            self._done()
            return

        def written(states):
            if outcome.change.key in states:
                self.broker.send(src, ("alter_resp", rid, ErrorCode.none, states[outcome.change.key]))
            else:
                self.broker.send(src, ("alter_resp", rid, ErrorCode.invalid_update_version, None))
            self._done()
        self._write([outcome.change], written,
                    failed=lambda: self._fail(("alter", src, rid, key, leader_id, broker_epoch, proposal)))

    # ----- writing decisions (ControllerService._write)

    def _write(self, changes, then, written=None, rounds: int = 0, failed=None) -> None:
        written = {} if written is None else written
        if not changes or rounds >= MAX_CONFLICT_ROUNDS:
            then(written)
            return
        payload = [(state_path(c.topic, c.partition), c.expected_version, c.new) for c in changes]

        def answered(status, results):
            if not self.active:
                return
            if status == FENCED:
                self.broker._resign("fenced by a newer controller epoch")
                return
            if status != OK:  # no answer: the write may or may not be stored (the core knows it is unconfirmed)
                failed() if failed is not None else self._done()
                return
            follow_ups = []
            for change, (result, data) in zip(changes, results):
                if result == OK:
                    self.core.on_state_written(change, data)
                    written[change.key] = change.new
                    self.world.on_state_written(self, change)
                else:
                    follow_ups += self.core.on_write_conflict(change, data if result == BAD_VERSION else None)
            self._write(follow_ups, then, written, rounds + 1, failed)
        self.broker.zk.request("write_states", self.epoch_version, payload, callback=answered)


def describe(state) -> str:
    leader = "none" if state.leader == NO_LEADER else f"b{state.leader}"
    return f"leader {leader} epoch {state.leader_epoch} isr {list(state.isr)} v{state.partition_epoch}"
