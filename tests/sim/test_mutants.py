"""Each mutant breaks one rule; the checker must catch it within a bounded number of seeds."""

import pytest

from weir.sim.mutants import MUTANTS, LeaderPartition, applied, partition_change
from weir.sim.runner import run_many

# Seeds each mutant must be caught within. untrimmed-epoch-cache is rare (4 of the first 2,000
# seeds, the first at 808): a leader that wrote nothing in its epoch, then follows a leader holding
# more of the previous epoch. stale-epoch-answer and no-broker-epoch survive 2,000 seeds (issue 11):
# the schedules do not reach them.
SEED_BOUNDS = {"hw-max": 60, "elect-outside-isr": 60, "no-truncation": 60, "isr-shrink-without-controller": 60,
               "controller-view-drift": 100, "untrimmed-epoch-cache": 1000}


@pytest.mark.parametrize("mutant", SEED_BOUNDS)
def test_mutant_is_caught(mutant):
    bound = SEED_BOUNDS[mutant]
    summary = run_many(range(bound), jobs=2, mutant=mutant, stop_on_failure=True)
    assert summary["failures"], f"{mutant} survived {bound} seeds"
    seed, violation = summary["failures"][0]
    print(f"{mutant}: caught at seed {seed} by {violation.rule}")


def test_mutants_are_restored():
    before = (LeaderPartition.maybe_increment_high_watermark, partition_change.elect_leader)
    for mutant in MUTANTS:
        with applied(mutant):
            pass
    assert (LeaderPartition.maybe_increment_high_watermark, partition_change.elect_leader) == before
