"""The fault schedule of one seed, and the nemesis that applies it.

A schedule is a list of `Fault`s drawn from the seed: when, what, against whom, for how long.
Targets are roles ("the leader of partition 0", "the replica a clean election would pick next",
"the controller") resolved when the fault fires,
so a schedule keeps its meaning when the shrinker deletes faults before it.

Faults:
- crash: the broker process dies and restarts after a while. `lossy` crashes also lose what the
  broker had not flushed (a machine crash). A lossy crash only loses data while every broker is up
  and reachable (no network partition) and every ISR is full, i.e. while another copy of
  everything exists and stays in the ISR, and only on a broker that leads nothing. Kafka's
  durability rests on replication, not fsync: two overlapping machine crashes lose acknowledged
  writes in Kafka itself, and so does a replica that loses its tail and is kept as the last ISR
  member while the others' sessions expire, then elected (the case KIP-966 addresses: seed 831444
  of reassign cut two of an ISR's three replicas off ZooKeeper just before the third's machine
  crash). Otherwise the crash is downgraded to a process crash, and the trace says so.
- pause: the process stops (a GC pause, SIGSTOP); everything sent to it and its timers wait.
- stall: the broker's request handling stops (busy handler threads, a stuck disk) while its
  ZooKeeper session, its timers and its own replica fetchers go on; the requests that arrived
  are handled, in order, when it ends: a fetch can be handled long after its sender restarted.
- partition, by shape: leader-followers (the leader of a partition from the other brokers),
  leader-zk (the leader from ZooKeeper), leader-replicas (the leader from the partition's other
  replicas only, so that it can still reach a controller elsewhere), isolate (a broker from everyone, ZooKeeper included),
  halves (a random split of brokers, ZooKeeper on one side), client (clients from the leader),
  flap (leader-followers on and off every few hundred milliseconds).
- slow: a broker's traffic to other brokers takes hundreds of milliseconds more (a slow follower).
- controller: the controller crashes, or /controller is deleted (an operator forcing failover).
- config: the topic's unclean.leader.election.enable or min.insync.replicas is flipped.
- reassign: an admin client asks the controller to move partition <p> to other replicas, or (no
  replicas) to cancel its move (AlterPartitionReassignments; only in the `reassign` scenario).
- shutdown: an operator stops the broker (controlled shutdown, server.py's stop): it asks the
  controller to move its leaderships away, waits for that or controlled_shutdown_timeout_ms,
  stops cleanly (flushed, its ZooKeeper session closed) and starts again after the fault's
  duration (only in the `controlled-shutdown` scenario).

At `heal_at_ms` everything is healed: partitions removed, paused brokers resumed, crashed brokers
restarted, slow links cleared. Configs stay as the schedule left them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from weir.sim.network import ZK
from weir.sim.zookeeper import CONTROLLER, config_path


@dataclass(frozen=True)
class Fault:
    at_ms: int
    kind: str
    target: str = ""  # "leader:<p>", "controller", "broker:<id>"
    duration_ms: int = 0
    option: object = None

    def __str__(self) -> str:
        parts = [f"{self.kind}"]
        if self.target:
            parts.append(self.target)
        if self.option is not None:
            parts.append(str(self.option))
        if self.duration_ms:
            parts.append(f"for {self.duration_ms}ms")
        return f"@{self.at_ms} " + " ".join(parts)


KINDS = ("crash", "crash", "pause", "stall", "partition", "partition", "partition", "slow", "controller", "config")
SHAPES = ("leader-followers", "leader-zk", "isolate", "halves", "client", "flap")


def random_schedule(rng: random.Random, settings, *, config_flips: bool = True) -> list[Fault]:
    start, end = settings.fault_window_ms
    faults = []
    for _ in range(rng.randint(1, 8)):
        at = rng.randint(start, end)
        kind = rng.choice(KINDS)
        target = rng.choice([f"leader:{rng.randrange(settings.partitions)}", "controller",
                             f"broker:{rng.randint(1, settings.brokers)}"])
        duration = rng.randint(150, 2500)
        if kind == "crash":
            faults.append(Fault(at, kind, target, duration, rng.random() < 0.5))
        elif kind in ("pause", "stall"):
            faults.append(Fault(at, kind, target, rng.randint(100, 2500)))
        elif kind == "partition":
            shape = rng.choice(SHAPES)
            faults.append(Fault(at, kind, target if shape in ("isolate", "halves") else
                                f"leader:{rng.randrange(settings.partitions)}", duration, shape))
        elif kind == "slow":
            faults.append(Fault(at, kind, target, duration, rng.choice((150, 400, 900))))
        elif kind == "controller":
            faults.append(Fault(at, kind, "controller", duration, rng.choice(("crash", "resign"))))
        elif config_flips:
            flip = rng.choice((("unclean.leader.election.enable", "true"), ("unclean.leader.election.enable", "false"),
                               ("min.insync.replicas", "1"), ("min.insync.replicas", "2")))
            faults.append(Fault(at, kind, "", 0, flip))
    return sorted(faults, key=lambda f: (f.at_ms, f.kind))


class Nemesis:
    def __init__(self, world, schedule: list[Fault]) -> None:
        self.world = world
        self.schedule = schedule
        self.cuts: dict[int, set] = {}  # fault index -> links it blocks
        self.crashed: dict[int, int] = {}  # broker -> fault index that crashed it
        self.paused: dict[int, int] = {}
        for index, fault in enumerate(schedule):
            world.events.at(fault.at_ms, self._apply, index, fault)
        world.events.at(world.settings.heal_at_ms, self.heal_all)

    # ----- targets

    def _resolve(self, target: str) -> int | None:
        world = self.world
        if target.startswith("leader:"):
            key = world.keys[int(target.split(":")[1]) % len(world.keys)]
            state = world.zk.partition_state(*key)
            return None if state is None or state.leader < 0 else state.leader
        if target.startswith("successor:"):  # successor:<p>[:<k>]: whom a clean election would pick next (k-th)
            _, p, *rank = target.split(":")
            key = world.keys[int(p) % len(world.keys)]
            state = world.zk.partition_state(*key)
            candidates = [r for r in world.assignment[key] if state is not None and r != state.leader
                          and r in state.isr and world.brokers_by_id[r].up]
            k = int(rank[0]) if rank else 1
            return candidates[k - 1] if len(candidates) >= k else None
        if target == "controller":
            controller = world.zk.controller_id()
            return None if controller < 0 else controller
        return int(target.split(":")[1])

    def _say(self, fault: Fault, text: str) -> None:
        self.world.trace(f"nemesis: {fault} -> {text}")

    # ----- applying

    def _apply(self, index: int, fault: Fault) -> None:
        world = self.world
        if world.events.now >= world.settings.heal_at_ms:
            return
        if fault.kind == "config":
            name, value = fault.option
            topic = world.settings.topic
            config = dict(world.zk.get(config_path(topic)) or {})
            config[name] = value
            world.zk.set(config_path(topic), config)
            self._say(fault, f"{topic} {name}={value}")
            return
        if fault.kind == "reassign":
            self._reassign(fault)
            return
        if fault.kind == "controller":
            broker_id = self._resolve("controller")
            if broker_id is None:
                self._say(fault, "no controller")
                return
            if fault.option == "resign":
                world.zk.delete(CONTROLLER)
                self._say(fault, f"deleted /controller (was b{broker_id})")
                return
            self._crash(index, fault, broker_id, lossy=False)
            return
        broker_id = self._resolve(fault.target)
        if broker_id is None:
            self._say(fault, "no target")
            return
        broker = world.brokers_by_id[broker_id]
        if fault.kind == "crash":
            self._crash(index, fault, broker_id, lossy=bool(fault.option))
        elif fault.kind == "shutdown":
            if broker.up and not broker.shutting_down:
                self._say(fault, f"b{broker_id}: controlled shutdown")
                # asked of the process: not while it is paused
                broker.later(0, broker.shut_down, lambda: self._stopped(index, fault, broker_id))
        elif fault.kind == "pause":
            if not broker.up or broker.paused:
                return
            broker.pause()
            self.paused[broker_id] = index
            self._say(fault, f"paused b{broker_id}")
            world.events.after(fault.duration_ms, self._resume, index, broker_id)
        elif fault.kind == "stall":
            if broker.up and broker.stalled is None:
                broker.stall()
                self._say(fault, f"b{broker_id} stalls")
                world.events.after(fault.duration_ms, self._unstall, broker)
        elif fault.kind == "slow":
            world.network.extra_delay[broker_id] = fault.option
            self._say(fault, f"b{broker_id} slow by {fault.option}ms")
            world.events.after(fault.duration_ms, self._unslow, broker_id)
        elif fault.kind == "partition":
            self._partition(index, fault, broker_id)

    def _reassign(self, fault: Fault) -> None:
        world = self.world
        key = world.keys[int(fault.target.split(":")[1]) % len(world.keys)]
        controller = self._resolve("controller")
        broker = None if controller is None else world.brokers_by_id.get(controller)
        if broker is None or not broker.up:
            self._say(fault, "no controller to ask")
            return
        self._say(fault, f"b{controller}: move {key[0]}-{key[1]} to {fault.option}")

        def ask() -> None:  # as a request arriving at the broker: not while it is paused
            if broker.controller is not None:
                broker.controller.reassign({key: fault.option})
        broker.later(0, ask)

    def _crash(self, index, fault, broker_id, lossy) -> None:
        world = self.world
        broker = world.brokers_by_id[broker_id]
        if not broker.up:
            return
        if lossy and not world.may_lose_unflushed(broker_id):
            lossy = False
            self._say(fault, f"b{broker_id}: lossy crash downgraded (a leader, a broker down or cut off, or an ISR not full)")
        broker.crash(lose_unflushed=lossy)
        self.crashed[broker_id] = index
        self._say(fault, f"crashed b{broker_id}{' losing unflushed data' if lossy else ''}")
        world.events.after(fault.duration_ms or 500, self._restart, index, broker_id)

    def _stopped(self, index, fault, broker_id) -> None:
        """A controlled shutdown ended with the broker stopped: it starts again after the fault's
        duration, or at once when everything was healed while it waited for its handover."""
        world = self.world
        if world.events.now >= world.settings.heal_at_ms:
            world.events.after(1, self._start_if_down, broker_id)
            return
        self.crashed[broker_id] = index
        world.events.after(fault.duration_ms or 500, self._restart, index, broker_id)

    def _start_if_down(self, broker_id) -> None:
        broker = self.world.brokers_by_id[broker_id]
        if not broker.up:
            broker.start()

    def _restart(self, index, broker_id) -> None:
        if self.crashed.get(broker_id) == index and self.world.events.now < self.world.settings.heal_at_ms:
            del self.crashed[broker_id]
            self.world.brokers_by_id[broker_id].start()

    def _resume(self, index, broker_id) -> None:
        if self.paused.get(broker_id) == index:
            del self.paused[broker_id]
            broker = self.world.brokers_by_id[broker_id]
            if broker.paused:
                broker.resume()

    def _unstall(self, broker) -> None:
        if broker.up and broker.stalled is not None:
            broker.unstall()

    def _unslow(self, broker_id) -> None:
        self.world.network.extra_delay.pop(broker_id, None)

    def _partition(self, index, fault, broker_id) -> None:
        world = self.world
        others = [b.id for b in world.brokers if b.id != broker_id]
        shape = fault.option
        if shape in ("leader-followers", "flap"):
            links = {(broker_id, o) for o in others}
        elif shape == "leader-replicas":  # only the partition's other replicas: the controller may stay reachable
            key = world.keys[int(fault.target.split(":")[1]) % len(world.keys)] if fault.target.startswith(
                "leader:") else world.keys[0]
            links = {(broker_id, o) for o in world.assignment[key] if o != broker_id}
        elif shape == "leader-zk":
            links = {(broker_id, ZK)}
        elif shape == "isolate":
            links = {(broker_id, o) for o in others + [ZK, "c"]}
        elif shape == "client":
            links = {(broker_id, "c")}
        else:  # halves: the target and a random subset of the others, ZooKeeper with the rest
            side = [broker_id] + [o for o in others if world.nemesis_rng.random() < 0.3]
            rest = [o for o in others if o not in side] + [ZK]
            links = {(a, b) for a in side for b in rest}
        self._say(fault, f"cut {sorted(map(str, links))}")
        if shape == "flap":
            period = world.nemesis_rng.choice((100, 250, 500))
            for k, t in enumerate(range(0, fault.duration_ms, period)):
                world.events.after(t, self._set_cut, index, links if k % 2 == 0 else set())
            world.events.after(fault.duration_ms, self._set_cut, index, set())
            return
        self._set_cut(index, links)
        world.events.after(fault.duration_ms, self._set_cut, index, set())

    def _set_cut(self, index, links) -> None:
        if self.world.events.now >= self.world.settings.heal_at_ms and links:
            return
        if links:
            self.cuts[index] = links
        else:
            self.cuts.pop(index, None)
        network = self.world.network
        network.heal()
        for cut in self.cuts.values():
            for a, b in cut:
                network.block(a, b)

    def heal_all(self) -> None:
        world = self.world
        world.trace("nemesis: heal everything")
        self.cuts.clear()
        world.network.heal()
        world.network.extra_delay.clear()
        for broker in world.brokers:
            if broker.paused:
                broker.resume()
            self._unstall(broker)
            if not broker.up:
                broker.start()
        self.crashed.clear()
        self.paused.clear()
