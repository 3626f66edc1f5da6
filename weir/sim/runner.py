"""One simulated run per seed, many seeds in parallel, and the shrinker for failing seeds.

A `World` is one cluster: clock, network, ZooKeeper, brokers, clients, checker, nemesis, all
seeded from the run's seed through separate random streams (network, clients, schedule, nemesis)
so that deleting a fault perturbs as little as possible. `run()` steps the event queue and checks
the invariants after every step; after `heal_at_ms` it waits at most `liveness_bound_ms` for
every partition to have a live leader and a full ISR, then checks that every protected
acknowledged write is in the final leader's log.

The shrinker deletes faults one at a time (and keeps each deletion after which the run still
breaks the same rule), so the trace printed for a failure is that of a minimal schedule.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import random
import time
import uuid
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

from weir.controller.assignment import assign_replicas
from weir.sim import mutants as mutants_module
from weir.sim.broker import SimBroker
from weir.sim.checker import Checker, Violation
from weir.sim.clients import Clients
from weir.sim.events import EventLimitExceeded, EventQueue
from weir.sim.nemesis import Fault, Nemesis, random_schedule
from weir.sim.network import Network
from weir.sim.settings import SimSettings
from weir.sim.zookeeper import ZooKeeper, config_path, state_path, topic_path
from weir.zk.model import BrokerInfo, TopicAssignment

LIVENESS_CHECK_MS = 100


@dataclass
class RunResult:
    seed: int
    violations: list[Violation]
    trace_hash: str
    events: int
    sim_ms: int
    acked: int
    lost_writes: int
    schedule: list[Fault]
    trace: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


class World:
    def __init__(self, seed: int, settings: SimSettings, schedule: list[Fault] | None = None,
                 acks_choice=None) -> None:
        self.seed = seed
        self.settings = settings
        self.lines: list[str] = []
        self.events = EventQueue()
        self.network = Network(self.events, random.Random(f"net/{seed}"), max_delay_ms=settings.max_delay_ms,
                               drop_rate=settings.drop_rate, duplicate_rate=settings.duplicate_rate)
        self.nemesis_rng = random.Random(f"nemesis/{seed}")
        self.zk = ZooKeeper(self.events, self.network, self.trace)
        topic = settings.topic
        self.topics = {topic: list(range(settings.partitions))}
        self.topic_ids = {topic: uuid.UUID(int=seed & (2**128 - 1))}
        self.keys = [(topic, p) for p in range(settings.partitions)]
        infos = [BrokerInfo(b, "sim", 9092) for b in range(1, settings.brokers + 1)]
        assignment = assign_replicas(infos, settings.partitions, settings.replication_factor,
                                     random.Random(f"assign/{seed}"))
        self.zk.create(topic_path(topic), TopicAssignment(topic, self.topic_ids[topic],
                                                          {p: tuple(r) for p, r in assignment.items()}))
        self.zk.create(config_path(topic), {
            "min.insync.replicas": str(settings.min_insync_replicas),
            "unclean.leader.election.enable": "true" if settings.unclean_leader_election_enable else "false"})
        self.brokers = [SimBroker(self, b) for b in range(1, settings.brokers + 1)]
        self.brokers_by_id = {b.id: b for b in self.brokers}
        self.touched: set = set()  # brokers that ran code in the current step: the checker looks at them
        self.checker = Checker(self)
        self.zk.on_state_applied = self._on_state_applied
        # (state path, leader epoch) -> whether the controller writing it allowed an unclean election then
        self.unclean_allowed_by_write: dict[tuple[str, int], bool] = {}
        self.acks_choice = acks_choice or (lambda rng: rng.choice((-1, -1, -1, 1, 0)))
        if schedule is None:
            schedule = random_schedule(random.Random(f"schedule/{seed}"), settings)
        self.schedule = schedule
        outsiders = [b.id for b in self.brokers if all(b.id not in r for r in self.assignment.values())]
        for broker in self.brokers:
            start = random.Random(f"start/{seed}/{broker.id}").randint(0, 30)
            if settings.controller_outside_replicas and outsiders:
                start = 0 if broker.id == outsiders[0] else 60 + start
            self.events.at(start, broker.start)
        self.clients = Clients(self, random.Random(f"clients/{seed}"))
        self.network.duplicating.add("c")
        self.nemesis = Nemesis(self, schedule)
        self.finished = False
        self.events.at(settings.heal_at_ms, self._check_liveness)

    def trace(self, text: str) -> None:
        self.lines.append(f"{self.events.now:6d} {text}")

    @property
    def assignment(self) -> dict[tuple[str, int], tuple[int, ...]]:
        """Each partition's replicas, as ZooKeeper holds them now."""
        return {(t, p): replicas for t in self.topics for p, replicas in self.zk.assignment(t).replicas.items()}

    # ----- questions the nemesis and checker ask of the whole cluster

    def durable_config(self, topic: str) -> bool:
        config = self.zk.get(config_path(topic)) or {}
        return (int(config.get("min.insync.replicas", "1")) >= 2
                and config.get("unclean.leader.election.enable", "false") != "true")

    def may_lose_unflushed(self, broker_id: int) -> bool:
        """Inside Kafka's durability envelope (nemesis.py): everyone up and reachable, every ISR
        full, and `broker_id` leads nothing."""
        if self.network.blocked or not all(b.up and not b.paused for b in self.brokers):
            return False
        for key in self.keys:
            state = self.zk.partition_state(*key)
            if state is None or set(state.isr) != set(self.assignment[key]) or state.leader == broker_id:
                return False
        return True

    def on_state_written(self, controller, change) -> None:
        from weir.sim.controller import describe
        self.trace(f"controller b{controller.broker.id}: {change.topic}-{change.partition} {describe(change.new)} "
                   f"({change.reason})")

    def _on_state_applied(self, path: str, old, new) -> None:
        """The checker hears of an election when ZooKeeper applies it, not when the controller
        hears back: the new leader may read the state (and lead) before that answer arrives, or
        the answer may be lost. Whether unclean election was allowed is what the controller
        judged when it wrote."""
        key = next(key for key in self.keys if state_path(*key) == path)
        self.checker.on_state_written(key, old, new, self.unclean_allowed_by_write[(path, new.leader_epoch)])

    def healthy(self) -> bool:
        for key in self.keys:
            state = self.zk.partition_state(*key)
            if state is None or state.leader < 0 or set(state.isr) != set(self.assignment[key]):
                return False
            broker = self.brokers_by_id[state.leader]
            partition = broker.partitions.get(key)
            if (not broker.up or not broker.can_lead or partition is None or partition.leader is None
                    or partition.leader.leader_epoch != state.leader_epoch):
                return False
        return True

    def _check_liveness(self) -> None:
        if self.healthy():
            self.trace("healthy: every partition has a leader and a full ISR")
            self.checker.final_check()
            self.finished = True
            return
        if self.events.now >= self.settings.heal_at_ms + self.settings.liveness_bound_ms:
            states = {f"{k[0]}-{k[1]}": self.zk.partition_state(*k) for k in self.keys}
            self.checker.fail("liveness", f"not healthy {self.settings.liveness_bound_ms}ms after healing: {states}")
            return
        self.events.after(LIVENESS_CHECK_MS, self._check_liveness)

    # ----- running

    def run(self) -> RunResult:
        events, checker = self.events, self.checker
        try:
            while not self.finished and not checker.violations and events.step():
                checker.after_step()
        except (AssertionError, EventLimitExceeded) as e:
            import traceback
            checker.fail("core-assertion", f"{type(e).__name__}: {e} at {traceback.format_exc(limit=-3)}")
        digest = hashlib.sha256("\n".join(self.lines).encode()).hexdigest()[:16]
        return RunResult(self.seed, list(checker.violations), digest, events.events_run, events.now,
                         checker.acked_total, checker.lost_writes, self.schedule, self.lines)


def run_seed(seed: int, settings: SimSettings | None = None, schedule: list[Fault] | None = None,
             mutant: str | None = None, scenario: str | None = None) -> RunResult:
    """One run. A scenario fixes settings and schedule; a mutant breaks one rule for this run."""
    from weir.sim import scenarios
    if scenario == "transactions":  # its own world: weir.sim.txn_world
        from weir.sim.txn_world import run_transactions_seed
        with mutants_module.applied(mutant):
            return run_transactions_seed(seed, schedule)
    acks_choice = None
    if scenario is not None:
        settings, scenario_schedule, acks_choice = scenarios.build(scenario, seed)
        schedule = scenario_schedule if schedule is None else schedule
    settings = settings or SimSettings()
    shared = logging.getLogger("weir.controller")  # the shell's log lines; the run has its own trace
    level, shared.level = shared.level, logging.ERROR
    try:
        with mutants_module.applied(mutant):
            return World(seed, settings, schedule, acks_choice).run()
    finally:
        shared.setLevel(level)


# ----- shrinking

def shrink(result: RunResult, settings: SimSettings | None = None, mutant: str | None = None,
           scenario: str | None = None, max_runs: int = 200) -> RunResult:
    """Delete faults while the run still breaks the same rule; returns the smallest failing run."""
    assert not result.ok
    rule = result.violations[0].rule
    best = result
    runs = 0
    changed = True
    while changed and runs < max_runs:
        changed = False
        for i in reversed(range(len(best.schedule))):
            candidate = best.schedule[:i] + best.schedule[i + 1:]
            runs += 1
            trial = run_seed(result.seed, settings, candidate, mutant, scenario)
            if not trial.ok and trial.violations[0].rule == rule:
                best = trial
                changed = True
                break
    return best


# ----- many seeds

def _summary(args) -> tuple:
    seed, settings, mutant, scenario = args
    result = run_seed(seed, settings, None, mutant, scenario)
    first = result.violations[0] if result.violations else None
    return seed, first, result.events, result.acked, result.lost_writes


def _summaries(tasks: list) -> list[tuple]:
    return [_summary(task) for task in tasks]


def _executor(jobs: int) -> ProcessPoolExecutor:
    """Workers forked from a fresh server process that has imported the simulator, never from the
    caller: the caller's threads and C libraries' state do not survive a fork (a test process that
    had used pyarrow crashed a worker in its garbage collector). A worker that dies breaks the
    executor (BrokenProcessPool): the run fails at once, where multiprocessing.Pool would wait for
    the lost seeds for ever."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["weir.sim.runner"])
    return ProcessPoolExecutor(max_workers=jobs, mp_context=context)


def run_many(seeds, settings: SimSettings | None = None, jobs: int | None = None, mutant: str | None = None,
             scenario: str | None = None, stop_on_failure: bool = False, progress=None) -> dict:
    """Run seeds on `jobs` processes. Returns counts, failures and seeds per second."""
    seeds = list(seeds)
    jobs = jobs or os.cpu_count() or 1
    started = time.perf_counter()
    failures: list[tuple[int, Violation]] = []
    events = acked = lost = done = 0
    tasks = [(s, settings, mutant, scenario) for s in seeds]
    executor = None
    if jobs == 1:
        summaries = map(_summary, tasks)
    else:
        executor = _executor(jobs)
        size = max(1, min(50, len(tasks) // (jobs * 8) or 1))
        chunks = [executor.submit(_summaries, tasks[i:i + size]) for i in range(0, len(tasks), size)]
        summaries = (summary for chunk in as_completed(chunks) for summary in chunk.result())
    try:
        for seed, violation, n_events, n_acked, n_lost in summaries:
            done += 1
            events += n_events
            acked += n_acked
            lost += n_lost
            if violation is not None:
                failures.append((seed, violation))
                if stop_on_failure:
                    break
            if progress is not None and done % 500 == 0:
                progress(done, len(seeds), time.perf_counter() - started)
    finally:
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
    elapsed = time.perf_counter() - started
    return {"seeds": done, "failures": sorted(failures, key=lambda f: f[0]), "elapsed_s": elapsed,
            "seeds_per_s": done / elapsed if elapsed else 0.0, "events": events, "acked": acked,
            "lost_writes": lost, "jobs": jobs}
