"""Each mutant breaks one rule; the checker must catch it within a bounded number of seeds."""

import pytest

from weir.sim.mutants import MUTANTS, LeaderPartition, applied, partition_change
from weir.sim.runner import run_many
from weir.transactions.coordinator import TransactionCoordinator
from weir.transactions.partition_txns import PartitionTransactions, VerificationGuard

# Seeds each mutant must be caught within, on random schedules or on the named scenario that tells
# its story. Random schedules rarely or never reach issue 11's holes in 2,000 seeds, so their
# scenarios stage them, with seeded timings: an old incarnation's fetch needs a stalled leader and
# a machine crash. (An epoch cache left untrimmed by a truncation had a mutant while a follower
# refused records of an epoch below its cache's latest; the append now drops the entries they
# contradict, as Kafka's LeaderEpochFileCache.assign does, and the empty-leadership scenario that
# staged it still runs below.) (Hole 2, an OffsetForLeaderEpoch answer taken
# for a later leadership than it was asked in, had a mutant while the simulator's follower took
# answers from any leader; it now fetches per leader as production does, and an answer from a
# leader it no longer follows is dropped before the follower core sees it, as in production: the
# stalled-successor scenario still runs below, and tests/replication/test_follower.py keeps the
# core's own check.)
# Reassignments happen only in their scenario (random faults plus moves). The transaction mutants
# need the transactions scenario's world: txn-unsafe-prepare is caught at seed 0 (88 of the first
# 100 seeds), txn-skip-verification at seed 2 (33 of 100), txn-lso-ignores-unreplicated at seed 0
# (5 of 100: a leader change must cut a marker the LSO already passed), and the bug the scenario
# found, txn-stale-marker-drops-completion, at seed 31 (1 of the first 200: an old epoch's marker
# answer must arrive after the same broker loaded the partition again). controller-view-drift is
# rare on random schedules (6 of the first 400 seeds, the first at 108). read-past-hw breaks the
# read bound of `Partition.answer_fetch`, which the broker's Fetch and the simulator's both ask:
# caught at seed 0.
SEED_BOUNDS = {"hw-max": (60, None), "elect-outside-isr": (60, None), "no-truncation": (60, None),
               "isr-shrink-without-controller": (60, None), "controller-view-drift": (200, None),
               "no-broker-epoch": (20, "bounced-follower"), "reassign-unchecked-isr": (20, "reassign"),
               "read-past-hw": (20, None),
               "txn-unsafe-prepare": (10, "transactions"), "txn-skip-verification": (30, "transactions"),
               "txn-lso-ignores-unreplicated": (60, "transactions"),
               "txn-stale-marker-drops-completion": (60, "transactions")}


def test_every_mutant_has_a_bound():
    assert set(SEED_BOUNDS) == set(MUTANTS)


@pytest.mark.parametrize("mutant", SEED_BOUNDS)
def test_mutant_is_caught(mutant):
    bound, scenario = SEED_BOUNDS[mutant]
    summary = run_many(range(bound), jobs=2, mutant=mutant, scenario=scenario, stop_on_failure=True)
    assert summary["failures"], f"{mutant} survived {bound} seeds"
    seed, violation = summary["failures"][0]
    print(f"{mutant}: caught at seed {seed} by {violation.rule}")


@pytest.mark.parametrize("scenario", ["stalled-successor", "empty-leadership", "bounced-follower", "reassign"])
def test_the_mutants_scenarios_pass_without_a_mutant(scenario):
    summary = run_many(range(100), jobs=2, scenario=scenario)
    assert not summary["failures"], summary["failures"][:3]


def test_mutants_are_restored():
    def patched():
        return (LeaderPartition.maybe_increment_high_watermark, partition_change.elect_leader,
                TransactionCoordinator.on_write_done, PartitionTransactions.maybe_start_transaction_verification,
                VerificationGuard.verify)
    before = patched()
    for mutant in MUTANTS:
        with applied(mutant):
            pass
    assert patched() == before
