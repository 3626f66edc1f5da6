"""After every fault heals, each partition has a live leader and a full ISR within a bound."""

from dataclasses import replace

from weir.sim.nemesis import Fault
from weir.sim.runner import run_seed
from weir.sim.settings import SimSettings


def test_recovers_after_every_broker_crashes():
    settings = SimSettings()
    schedule = [Fault(1000 + 300 * b, "crash", f"broker:{b}", 2500, False) for b in range(1, 4)]
    result = run_seed(11, settings, schedule)
    assert result.ok, result.violations
    assert any("healthy" in line for line in result.trace)
    assert result.sim_ms <= settings.heal_at_ms + settings.liveness_bound_ms


def test_recovers_from_controller_isolation_and_flapping():
    schedule = [Fault(900, "partition", "controller", 3000, "isolate"),
                Fault(1500, "partition", "leader:0", 2000, "flap"),
                Fault(2500, "controller", "controller", 500, "resign")]
    result = run_seed(5, SimSettings(), schedule)
    assert result.ok, result.violations
    assert any("healthy" in line for line in result.trace)


def test_liveness_violation_is_reported():
    """A bound too short to recover in is reported as a liveness violation, not a hang."""
    settings = replace(SimSettings(), liveness_bound_ms=100)
    schedule = [Fault(7900, "crash", "leader:0", 90, False)]
    result = run_seed(2, settings, schedule)
    assert [v.rule for v in result.violations] == ["liveness"]
