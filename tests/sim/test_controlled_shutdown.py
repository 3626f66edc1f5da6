"""weir sim stops brokers as operators do (controlled shutdown): the broker's rule for waiting is the
partition's own (Partition.awaits_leadership_handover, as server.py's), the controller's answer is
ControllerCore.on_controlled_shutdown, as the real controller's."""

from weir.sim.nemesis import Fault
from weir.sim.runner import World, run_many, run_seed
from weir.sim.settings import SimSettings
from weir.zk.model import PartitionState


def test_a_stopping_leader_hands_its_partitions_over_before_it_stops():
    schedule = [Fault(2000, "shutdown", "leader:0", 1000)]
    result = run_seed(3, SimSettings(), schedule)
    assert result.ok, result.violations
    trace = result.trace
    asked = next(i for i, line in enumerate(trace) if "requests controlled shutdown" in line)
    stopping = trace[asked].split()[1].rstrip(":")
    stopped = next(i for i, line in enumerate(trace) if f"{stopping}: stopped" in line)
    handovers = [line for line in trace[asked:stopped] if "(controlled_shutdown)" in line and "t-0" in line]
    assert handovers and f"leader {stopping} " not in handovers[-1], trace[asked:stopped + 1]
    assert any(f"{stopping}: controlled shutdown: leadership moved" in line for line in trace)
    assert any(f"{stopping}: start" in line for line in trace[stopped:]), "started again after the fault"
    assert any("healthy" in line for line in trace)


def test_controlled_shutdowns_among_random_faults_lose_nothing_acknowledged():
    summary = run_many(range(300), jobs=2, scenario="controlled-shutdown")
    assert summary["failures"] == []
    assert summary["acked"] > 0


def _state(leader, epoch, isr, version):
    return PartitionState(leader=leader, leader_epoch=epoch, isr=tuple(isr), controller_epoch=1,
                          partition_epoch=version)


def test_the_checker_takes_a_handover_to_a_replica_the_leader_asked_into_the_isr_as_clean():
    """A leader in controlled shutdown proposing ISR [1, 2] hands the partition to 2 in the same
    write (KRaft's PartitionChangeBuilder): clean, even when the controller answers late, after the
    leader stopped and started again (seed 750825 of controlled-shutdown: the leader's HW waited for
    2 from its proposal on, and its new incarnation leads nothing of that epoch). A proposal from an
    incarnation that did not ask to stop hands nothing over, and electing 3, which nobody asked
    for, is not clean."""
    world = World(0, SimSettings(), schedule=[])
    checker, key = world.checker, world.keys[0]
    checker.on_isr_proposal(key, 1, 4, (1, 2), incarnation=1)
    checker.on_state_written(key, _state(1, 4, [1], 7), _state(2, 5, [2], 8), unclean_allowed=False)
    assert [v.rule for v in checker.violations] == ["clean-election"], "1 is not shutting down"
    checker.violations.clear()
    checker.on_shutdown_request(1, incarnation=1)
    checker.on_state_written(key, _state(1, 4, [1], 7), _state(2, 5, [2], 8), unclean_allowed=False)
    assert checker.violations == []
    checker.on_isr_proposal(key, 1, 6, (1, 2), incarnation=3)  # started again, not stopping
    checker.on_state_written(key, _state(1, 6, [1], 9), _state(2, 7, [2], 10), unclean_allowed=False)
    assert [v.rule for v in checker.violations] == ["clean-election"]
    checker.violations.clear()
    checker.on_state_written(key, _state(1, 4, [1], 7), _state(3, 5, [3], 8), unclean_allowed=False)
    assert [v.rule for v in checker.violations] == ["clean-election"]


def test_the_checker_holds_a_leader_to_its_latest_isr_proposal():
    """Only the proposal the leader still stands by counts: one it replaced does not."""
    world = World(0, SimSettings(), schedule=[])
    checker, key = world.checker, world.keys[0]
    checker.on_shutdown_request(1, incarnation=1)
    checker.on_isr_proposal(key, 1, 4, (1, 2, 3), incarnation=1)
    checker.on_isr_proposal(key, 1, 4, (1, 3), incarnation=1)
    checker.on_state_written(key, _state(1, 4, [1, 3], 7), _state(2, 5, [2], 8), unclean_allowed=False)
    assert [v.rule for v in checker.violations] == ["clean-election"]


def test_a_read_answered_before_an_allowed_unclean_election_arrives_consistent():
    """Seed 1051: a leader answered a read, stopped, and an allowed unclean election dropped what it
    had read before the answer arrived. That read was of committed records; one of a value never
    committed is still a violation."""
    from types import SimpleNamespace
    world = World(0, SimSettings(), schedule=[])
    checker, key = world.checker, world.keys[0]
    ledger = checker.ledgers[key]
    ledger.committed[:] = ["0:1", "0:2", "0:3"]
    ledger.commit_epochs[:] = [0, 0, 0]
    ledger.unclean_epochs.add(1)
    checker._new_leadership(SimpleNamespace(id=2), key, 1, SimpleNamespace(values=["0:1"], log_end_offset=1))
    assert ledger.committed == ["0:1"]
    checker.on_read(key, 1, 3, 1, ["0:2", "0:3"])
    assert checker.violations == []
    checker.on_read(key, 1, 3, 1, ["0:9"])
    assert [v.rule for v in checker.violations] == ["read-consistent"]


def test_the_seeds_that_found_the_checkers_rules_too_strict_stay_clean():
    """177: a machine crash's lost tail (now process crashes only in this scenario, the KIP-966 case);
    407 and 863: a handover to the replica the leader asked into the ISR, and an older proposal that
    must not excuse an unclean election; 1051: a read answered before an allowed unclean election;
    623: a follower's HW kept from a voided history; 3726: an election won whose answer was lost;
    14880: an unclean election shaped like a handover; 167 and 3880: handovers written after the
    leader stopped, and proposed before it asked."""
    for seed in (167, 177, 407, 623, 863, 1051, 3726, 3880, 14880):
        result = run_seed(seed, scenario="controlled-shutdown")
        assert result.ok, (seed, result.violations)
