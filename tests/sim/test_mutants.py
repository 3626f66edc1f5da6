"""Each mutant breaks one rule; the checker must catch it within a bounded number of seeds."""

import pytest

from weir.sim.mutants import LeaderPartition, MUTANTS, applied, partition_change
from weir.sim.runner import run_many

SEED_BOUND = 60


@pytest.mark.parametrize("mutant", MUTANTS)
def test_mutant_is_caught(mutant):
    summary = run_many(range(SEED_BOUND), jobs=2, mutant=mutant, stop_on_failure=True)
    assert summary["failures"], f"{mutant} survived {SEED_BOUND} seeds"
    seed, violation = summary["failures"][0]
    print(f"{mutant}: caught at seed {seed} by {violation.rule}")


def test_mutants_are_restored():
    before = (LeaderPartition.maybe_increment_high_watermark, partition_change.elect_leader)
    for mutant in MUTANTS:
        with applied(mutant):
            pass
    assert (LeaderPartition.maybe_increment_high_watermark, partition_change.elect_leader) == before
