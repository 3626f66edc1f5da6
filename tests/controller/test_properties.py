"""Random sequences of broker deaths, returns and bounces, leader ISR changes (fresh and stale),
controlled shutdowns, preferred elections and balance checks, with every decided write checked
against a model store (compare-and-set on the partition epoch).

After every step, for every partition: the leader is in the ISR (or there is none), the ISR is a
non-empty subset of the replicas, the leader is live, leader epochs never go down and go up on
every leader change, dead brokers stay in an ISR only while the partition is offline, and a
partition with a live, acceptable ISR member is never left without a leader. With unclean election
off, every ISR member holds every committed record (so no committed record is ever lost) and no
replica outside the ISR is ever elected."""

import random

from hypothesis import example, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from weir.controller import ControllerConfig, ElectionType, assign_replicas
from weir.zk.model import NO_LEADER

from .cluster import brokers, make_core

BROKERS = (1, 2, 3, 4, 5)

steps = st.lists(st.one_of(
    st.tuples(st.just("kill"), st.sampled_from(BROKERS)),
    st.tuples(st.just("revive"), st.sampled_from(BROKERS)),
    st.tuples(st.just("revive"), st.sampled_from(BROKERS)),
    st.tuples(st.just("bounce"), st.sampled_from(BROKERS)),
    st.tuples(st.just("shrink"), st.integers(0, 99), st.integers(0, 2**5)),
    st.tuples(st.just("expand"), st.integers(0, 99), st.sampled_from(BROKERS)),
    st.tuples(st.just("expand"), st.integers(0, 99), st.sampled_from(BROKERS)),
    st.tuples(st.just("stale_alter"), st.integers(0, 99), st.integers(0, 2**5)),
    st.tuples(st.just("commit"), st.integers(0, 99)),
    st.tuples(st.just("shutdown"), st.sampled_from(BROKERS)),
    st.tuples(st.just("preferred"), st.integers(0, 99)),
    st.tuples(st.just("balance"),),
    st.tuples(st.just("unclean_elect"), st.integers(0, 99)),
), max_size=60)


class Harness:
    def __init__(self, seed: int, unclean: bool):
        rng = random.Random(seed)
        topics = {"t": assign_replicas(brokers(*BROKERS).values(), 6, 3, rng),
                  "u": assign_replicas(brokers(*BROKERS).values(), 3, 2, rng)}
        self.unclean = unclean
        self.core = make_core(BROKERS, topics, config=ControllerConfig(unclean_leader_election_enable=unclean,
                                                                       leader_imbalance_per_broker_percentage=0))
        self.live = set(BROKERS)
        self.store = dict(self.core.view.states)  # what the metadata store holds
        self.history = {k: [s] for k, s in self.store.items()}  # every state a partition went through
        # Brokers holding every committed record of the partition: at creation, all (logs are empty).
        self.holders = {k: set(self.core.replicas(*k)) for k in self.store}
        # (key, partition epoch) of states that handed a partition from a leader in controlled
        # shutdown to the member its AlterPartition added (2630e25): clean, that member caught up
        self.handovers: set = set()

    @property
    def keys(self):
        return sorted(self.store)

    def pick(self, n):
        return self.keys[n % len(self.keys)]

    def write(self, changes, proposed=frozenset()):
        """The shell: each change is a compare-and-set on the store's version; `proposed`: the ISR
        an AlterPartition proposed, when the changes answer one."""
        seen = set()
        for change in changes:
            assert change.key not in seen, "one write per partition per event"
            seen.add(change.key)
            current = self.store[change.key]
            assert change.expected_version == current.partition_epoch, (change, current)
            assert change.new.partition_epoch == current.partition_epoch + 1
            assert set(change.notify) == set(self.core.replicas(*change.key)) & self.live
            old_isr = set(current.isr)
            if change.new.leader != current.leader and change.new.leader != NO_LEADER:
                if change.new.leader in set(proposed) - old_isr:
                    assert change.reason == "controlled_shutdown", change
                    self.handovers.add((change.key, change.new.partition_epoch))
                elif change.new.leader not in old_isr:  # an unclean election
                    assert self.unclean or change.reason == "unclean_election", change
                    self.holders[change.key] = {change.new.leader}
            self.store[change.key] = change.new
            self.history[change.key].append(change.new)
            self.core.on_state_written(change, change.new.partition_epoch)
        assert not self.core.has_unconfirmed_writes

    def alter(self, key, leader_epoch, partition_epoch, isr):
        state = self.store[key]
        outcome = self.core.on_alter_partition(*key, state.leader, leader_epoch, partition_epoch, isr)
        if outcome.change is not None:
            self.write([outcome.change], proposed=isr)
        return outcome

    def step(self, step):
        kind = step[0]
        core = self.core
        if kind in ("kill", "revive", "bounce"):
            broker = step[1]
            if kind == "kill":
                self.live.discard(broker)
            elif kind == "revive":
                self.live.add(broker)
            elif broker not in self.live:
                return
            self.write(core.on_brokers_changed(brokers(*sorted(self.live)), [broker] if kind == "bounce" else []))
        elif kind in ("shrink", "stale_alter"):
            key = self.pick(step[1])
            state = self.store[key]
            if state.leader == NO_LEADER:
                return
            mask = step[2]
            isr = [r for i, r in enumerate(state.isr) if r == state.leader or mask >> i & 1]
            if kind == "shrink":
                outcome = self.alter(key, state.leader_epoch, state.partition_epoch, isr)
                assert outcome.error is ErrorCode.none, outcome
            else:
                older = [s for s in self.history[key] if s.partition_epoch < state.partition_epoch]
                if not older:
                    return
                old = older[mask % len(older)]
                before = self.store[key]
                outcome = self.alter(key, old.leader_epoch, old.partition_epoch, isr)
                if set(isr) != set(before.isr) or old.leader_epoch != before.leader_epoch:
                    assert outcome.error is not ErrorCode.none and self.store[key] is before, outcome
        elif kind == "expand":
            key = self.pick(step[1])
            state, broker = self.store[key], step[2]
            if state.leader == NO_LEADER or broker in state.isr or broker not in core.replicas(*key):
                return
            outcome = self.alter(key, state.leader_epoch, state.partition_epoch, [*state.isr, broker])
            if broker in self.live and broker not in core.shutting_down:
                assert outcome.error is ErrorCode.none
                self.holders[key].add(broker)  # it caught up before its leader proposed it
            else:
                assert outcome.error is ErrorCode.ineligible_replica
        elif kind == "commit":
            # acks=all: a record commits once every ISR member has it (so all must be live).
            key = self.pick(step[1])
            state = self.store[key]
            if state.leader != NO_LEADER and set(state.isr) <= self.live:
                self.holders[key] = set(state.isr)
        elif kind == "shutdown":
            if step[1] in self.live:
                outcome = core.on_controlled_shutdown(step[1])
                self.write(outcome.changes)
                assert outcome.remaining == sorted(k for k, s in self.store.items() if s.leader == step[1])
        elif kind == "preferred":
            self.write(core.elect_leaders(ElectionType.PREFERRED, [self.pick(step[1])]).changes)
        elif kind == "balance":
            self.write(core.check_leader_balance())
        elif kind == "unclean_elect" and self.unclean:
            self.write(core.elect_leaders(ElectionType.UNCLEAN, [self.pick(step[1])]).changes)

    def check(self):
        assert self.core.view.states == self.store, "the core's view is what was written"
        for key, state in self.store.items():
            replicas = self.core.replicas(*key)
            assert state.isr and len(set(state.isr)) == len(state.isr) and set(state.isr) <= set(replicas)
            assert state.leader == NO_LEADER or (state.leader in state.isr and state.leader in self.live)
            dead_members = set(state.isr) - self.live
            if dead_members:
                assert state.leader == NO_LEADER and not set(state.isr) & self.live, (key, state)
            acceptable = set(state.isr) & self.live - self.core.shutting_down
            assert not acceptable or state.leader != NO_LEADER, (key, state)
            history = self.history[key]
            for before, after in zip(history, history[1:]):
                assert after.leader_epoch >= before.leader_epoch
                assert after.partition_epoch == before.partition_epoch + 1
                assert after.leader == before.leader or after.leader_epoch > before.leader_epoch
                if (not self.unclean and after.leader != before.leader and after.leader != NO_LEADER
                        and (key, after.partition_epoch) not in self.handovers):
                    assert after.leader in before.isr, "a clean election picks an ISR member"
            if not self.unclean:
                assert set(state.isr) <= self.holders[key], ("an ISR member lacks committed records", key)


@settings(max_examples=300, deadline=None)
@given(steps=steps, seed=st.integers(0, 2**16))
@example(steps=[("bounce", 4), ("shutdown", 3), ("expand", 51, 4)], seed=15783)  # a handover, once taken for unclean
def test_clean_elections_never_lose_committed_records(steps, seed):
    harness = Harness(seed, unclean=False)
    for step in steps:
        harness.step(step)
        harness.check()


@settings(max_examples=150, deadline=None)
@given(steps=steps, seed=st.integers(0, 2**16))
def test_unclean_elections_keep_the_structural_invariants(steps, seed):
    harness = Harness(seed, unclean=True)
    for step in steps:
        harness.step(step)
        harness.check()
