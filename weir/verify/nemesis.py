"""The nemesis: faults injected into the running cluster, on a schedule, each recorded in the history.

Faults, by kind:

- kill: kill -9 a partition leader; restart it when the fault ends.
- pause: SIGSTOP a partition leader; SIGCONT it.
- partition-leader: cut a partition leader from its followers (both ways); heal.
- partition-zk: cut a broker from ZooKeeper; heal.
- isolate: cut a broker from every other broker and from ZooKeeper (the harness's clients still
  reach it, as Jepsen's control node does); heal.
- zk-restart: kill -9 ZooKeeper; start it again (its data survives).
- zk-pause: SIGSTOP ZooKeeper while the controller is writing: just after a leader is killed (an
  election), or once a paused follower is due to leave a leader's ISR (an AlterPartition); for
  half to one and a half session timeouts, so sessions are suspended and some expire on resume;
  then SIGCONT, and the killed or paused broker returns.
- stop: SIGTERM a partition leader, the controlled shutdown an operator starts; half the time
  while it is cut from ZooKeeper (healed half a fault later), so its request to the controller
  fails and is made again; restart it when the fault ends.
- jepsen: the schedule of Jepsen's 2013 Kafka analysis. Isolate a leader from its followers, so
  its ISR shrinks to itself and it acknowledges writes alone; then cut it from ZooKeeper too, so
  its session expires and the controller elects one of the stale followers (uncleanly, if allowed);
  then heal. The leader chosen is the controller's: since KIP-497 an ISR change is committed by the
  controller, so a leader cut from a controller that is one of its followers could never shrink
  its ISR (Jepsen's 2013 leader wrote the ISR to ZooKeeper itself).
- mixed: one of the first eight at random, each time.
- reassign: move a random partition to random brokers (AlterPartitionReassignments, KIP-455) and,
  while its new replicas catch up, kill -9 a partition leader; restart it when the fault ends.

A fault is a window: its "start" op (the invocation's time) to its "stop" op (the completion's
time); every op's value says {"fault": kind, "phase": "start" | "step" | "stop", ...}.
Only one fault is active at a time, and every fault is over before `run` returns.
"""

from __future__ import annotations

import logging
import random
import threading

from weir.verify.cluster import Cluster
from weir.verify.history import INFO, History
from weir.verify.network import ZOOKEEPER, broker_node

log = logging.getLogger(__name__)

SIMPLE_KINDS = ("kill", "pause", "partition-leader", "partition-zk", "isolate", "zk-restart", "zk-pause", "stop")
KINDS = SIMPLE_KINDS + ("jepsen", "reassign", "mixed", "none")
MATRIX_KINDS = SIMPLE_KINDS + ("jepsen",)  # a matrix's nemeses unless told: each simple fault alone, and Jepsen's
PROCESS = "nemesis"


class Nemesis:
    def __init__(self, cluster: Cluster, history: History, topic: str, kind: str, rng: random.Random,
                 quiet_s: float = 5.0, fault_s: float = 8.0) -> None:
        assert kind in KINDS, kind
        self.cluster = cluster
        self.history = history
        self.topic = topic
        self.kind = kind
        self.rng = rng
        self.quiet_s = quiet_s
        self.fault_s = fault_s
        self.faults = 0

    # -- recording ---------------------------------------------------------------------------

    def _do(self, fault: str, phase: str, f: str, action, **value) -> None:
        """Invoke, act, complete: the op's value says what was done (or why not)."""
        value = {"fault": fault, "phase": phase, **value}
        op_id = self.history.invoke(PROCESS, f, value)
        error = None
        try:
            action()
        except Exception as e:  # a fault that could not be applied is noted, and the run goes on
            log.warning("nemesis %s failed: %r", f, e)
            error = repr(e)
        self.history.complete(op_id, PROCESS, INFO, f, value, error=error)

    # -- choosing targets --------------------------------------------------------------------

    def _partitions(self):
        try:
            md = self.cluster.metadata(self.topic, timeout_s=3)
            return md.controller_id, {p.id: (p.leader, list(p.replicas)) for p in md.topics[self.topic].partitions.values()}
        except Exception as e:
            log.info("nemesis could not read metadata: %r", e)
            return -1, {}

    def _a_leader(self) -> tuple[int, list[int]]:
        """(leader, its followers) of a random partition with a leader, else a random broker."""
        _, partitions = self._partitions()
        led = [(leader, [r for r in replicas if r != leader]) for leader, replicas in partitions.values() if leader >= 0]
        if led:
            return self.rng.choice(sorted(led))
        broker = self.rng.randrange(self.cluster.size)
        return broker, [b for b in range(self.cluster.size) if b != broker]

    # -- faults ------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Faults until `stop` is set; returns with the last one healed."""
        while not stop.wait(self.quiet_s):
            kind = self.rng.choice(SIMPLE_KINDS) if self.kind == "mixed" else self.kind
            if kind == "none":
                continue
            self.faults += 1
            getattr(self, "_" + kind.replace("-", "_"))(kind, stop)

    def _kill(self, kind, stop):
        target, _ = self._a_leader()
        self._do(kind, "start", "kill", lambda: self.cluster.kill(target), broker=target)
        stop.wait(self.fault_s)
        self._do(kind, "stop", "restart", lambda: self.cluster.restart(target), broker=target)

    def _stop(self, kind, stop):
        target, _ = self._a_leader()
        net = self.cluster.network
        cut = self.rng.random() < 0.5
        if cut:
            self._do(kind, "start", "cut", lambda: net.cut([broker_node(target)], [ZOOKEEPER]), broker=target,
                     a=[broker_node(target)], b=[ZOOKEEPER])
        self._do(kind, "step" if cut else "start", "sigterm", lambda: self.cluster.terminate(target), broker=target)
        if cut:
            stop.wait(self.fault_s / 2)
            self._do(kind, "step", "heal", net.heal)
        self._do(kind, "step", "stopped", lambda: self.cluster.wait_stopped(target), broker=target)
        stop.wait(self.fault_s)
        self._do(kind, "stop", "restart", lambda: self.cluster.restart(target), broker=target)

    def _reassign(self, kind, stop):
        _, partitions = self._partitions()
        if not partitions:
            return
        partition = self.rng.choice(sorted(partitions))
        target = self.rng.sample(range(self.cluster.size), len(partitions[partition][1]))
        self._do(kind, "start", "reassign", lambda: self.cluster.reassign(self.topic, partition, target),
                 partition=partition, replicas=target)
        victim, _ = self._a_leader()
        self._do(kind, "step", "kill", lambda: self.cluster.kill(victim), broker=victim)
        stop.wait(self.fault_s)
        self._do(kind, "stop", "restart", lambda: self.cluster.restart(victim), broker=victim)

    def _pause(self, kind, stop):
        target, _ = self._a_leader()
        self._do(kind, "start", "pause", lambda: self.cluster.pause(target), broker=target)
        stop.wait(self.fault_s)
        self._do(kind, "stop", "resume", lambda: self.cluster.resume(target), broker=target)

    def _cut(self, kind, stop, group_a, group_b, **value):
        net = self.cluster.network
        self._do(kind, "start", "cut", lambda: net.cut(group_a, group_b), a=group_a, b=group_b, **value)
        stop.wait(self.fault_s)
        self._do(kind, "stop", "heal", net.heal)

    def _partition_leader(self, kind, stop):
        leader, followers = self._a_leader()
        self._cut(kind, stop, [broker_node(leader)], [broker_node(f) for f in followers], leader=leader)

    def _partition_zk(self, kind, stop):
        target, _ = self._a_leader()
        self._cut(kind, stop, [broker_node(target)], [ZOOKEEPER], broker=target)

    def _isolate(self, kind, stop):
        target, _ = self._a_leader()
        others = [broker_node(b) for b in range(self.cluster.size) if b != target]
        self._cut(kind, stop, [broker_node(target)], others + [ZOOKEEPER], broker=target)

    def _zk_restart(self, kind, stop):
        zk = self.cluster.zookeeper
        self._do(kind, "start", "kill-zookeeper", zk.kill)
        stop.wait(self.fault_s)
        self._do(kind, "stop", "restart-zookeeper", lambda: zk.running or zk.start())

    def _zk_pause(self, kind, stop):
        zk = self.cluster.zookeeper
        leader, followers = self._a_leader()
        if followers and self.rng.random() < 0.5:
            follower = self.rng.choice(followers)
            self._do(kind, "start", "pause", lambda: self.cluster.pause(follower), broker=follower)
            # The leader's ISR check runs every half lag time: the shrink is proposed within this.
            stop.wait(self.cluster.lag_time_s * self.rng.uniform(1.0, 1.5))
            target, undo_name, undo = follower, "resume", lambda: self.cluster.resume(follower)
        else:
            self._do(kind, "start", "kill", lambda: self.cluster.kill(leader), broker=leader)
            stop.wait(self.rng.uniform(0, self.cluster.session_timeout_s + 1))  # before, during, after the election
            target, undo_name, undo = leader, "restart", lambda: self.cluster.restart(leader)
        self._do(kind, "step", "pause-zookeeper", zk.pause)
        stop.wait(self.cluster.session_timeout_s * self.rng.uniform(0.5, 1.5))
        self._do(kind, "step", "resume-zookeeper", zk.resume)
        stop.wait(self.fault_s / 2)
        self._do(kind, "stop", undo_name, undo, broker=target)

    def _jepsen(self, kind, stop):
        controller, partitions = self._partitions()
        led_by_controller = sorted(p for p, (leader, _) in partitions.items() if leader == controller >= 0)
        if led_by_controller:
            partition = led_by_controller[0]
            leader, replicas = partitions[partition]
        else:  # noted in the history: the ISR shrink may then never be committed
            leader, followers = self._a_leader()
            partition, replicas = None, [leader, *followers]
        followers = [broker_node(r) for r in replicas if r != leader]
        net = self.cluster.network
        self._do(kind, "start", "cut", lambda: net.cut([broker_node(leader)], followers), leader=leader,
                 partition=partition, controller=controller, a=[broker_node(leader)], b=followers)
        # The ISR shrinks after replica.lag.time.max.ms (checked every half of it); then the leader
        # acknowledges alone for a while.
        stop.wait(1.5 * self.cluster.lag_time_s + max(self.fault_s / 2, 2))
        self._do(kind, "step", "cut", lambda: net.cut([broker_node(leader)], [ZOOKEEPER]), leader=leader,
                 a=[broker_node(leader)], b=[ZOOKEEPER])
        # Its session expires, a new controller elects another leader, which takes writes.
        stop.wait(self.cluster.session_timeout_s + max(self.fault_s / 2, 3))
        self._do(kind, "stop", "heal", net.heal)

    def heal_everything(self) -> None:
        """The final heal: every link, every process (recorded as one more fault-free op)."""
        self._do("all", "heal", "heal-all", self.cluster.heal)
