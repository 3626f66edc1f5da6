"""`weir sim --scenario transactions`: the transaction coordinator and partitions under faults."""

from weir.cli.main import main
from weir.sim.runner import run_many, run_seed
from weir.sim.txn_world import TxnSimSettings, run_transactions_seed

SEEDS = 120


def test_clean_seeds_have_no_violation():
    summary = run_many(range(SEEDS), jobs=2, scenario="transactions")
    print(f"\n{summary['seeds']} seeds in {summary['elapsed_s']:.1f}s: {summary['seeds_per_s']:.1f} seeds/s, "
          f"{summary['events']} events, {summary['acked']} EndTxn answered OK")
    assert summary["seeds"] == SEEDS
    assert not summary["failures"], [f"seed {s}: {v.rule}: {v.detail}" for s, v in summary["failures"]]
    assert summary["acked"] > SEEDS * 20, "the producers ended transactions"


def test_a_seed_commits_and_aborts_and_ends_quiescent():
    result = run_seed(1, scenario="transactions")
    assert result.ok, result.violations
    assert result.committed > 5 and result.aborted > 0
    assert any(line.split(maxsplit=1)[1].startswith("quiescent") for line in result.trace)


def test_same_seed_same_run():
    for seed in (0, 9):
        first, second = run_transactions_seed(seed), run_transactions_seed(seed)
        assert first.trace == second.trace and first.events == second.events
        assert (first.committed, first.aborted) == (second.committed, second.aborted)
    assert len({run_transactions_seed(seed).trace_hash for seed in range(4)}) == 4


def test_without_faults_every_transaction_is_answered_as_asked():
    result = run_transactions_seed(5, schedule=[], settings=TxnSimSettings(
        drop_rate=0.0, duplicate_rate=0.0, late_rate=0.0, write_refused_rate=0.0, write_timeout_rate=0.0,
        marker_error_rate=0.0, transactional_ids=4))  # one producer per id: nobody is fenced
    assert result.ok, result.violations
    assert not any(" producer " in line for line in result.trace)  # nobody gave up nor aborted on an error
    assert result.committed > 40


def test_command_runs_the_scenario_and_reports_a_mutant(capsys):
    assert main(["sim", "--scenario", "transactions", "--seeds", "4", "--jobs", "1"]) == 0
    assert "EndTxn answered OK; 0 violations" in capsys.readouterr().out
    assert main(["sim", "--scenario", "transactions", "--seed", "0", "--mutant", "txn-unsafe-prepare",
                 "--no-shrink"]) == 1
    out = capsys.readouterr().out
    assert "VIOLATION durability" in out
    assert "replay: weir sim --seed 0 --trace --scenario transactions --mutant txn-unsafe-prepare" in out
