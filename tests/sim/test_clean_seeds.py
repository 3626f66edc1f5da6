"""The CI run: hundreds of random fault schedules, in parallel, with no violation."""

import os

from weir.sim.runner import run_many

SEEDS = int(os.environ.get("WEIR_SIM_SEEDS", "600"))  # more: WEIR_SIM_SEEDS=N, or weir sim --seeds N


def test_clean_seeds_have_no_violation():
    summary = run_many(range(SEEDS), jobs=os.cpu_count() or 2)
    print(f"\n{summary['seeds']} seeds in {summary['elapsed_s']:.1f}s on {summary['jobs']} jobs: "
          f"{summary['seeds_per_s']:.1f} seeds/s, {summary['events']} events, "
          f"{summary['acked']} acks=all writes acknowledged")
    assert summary["seeds"] == SEEDS
    assert not summary["failures"], [f"seed {s}: {v.rule}: {v.detail}" for s, v in summary["failures"]]
    assert summary["acked"] > SEEDS * 10, "the workload acknowledged writes"
