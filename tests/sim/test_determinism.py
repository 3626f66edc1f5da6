"""One seed is one run: the same seed gives the same trace, byte for byte."""

from weir.sim.runner import run_seed


def test_same_seed_same_trace():
    for seed in (0, 7, 42):
        first, second = run_seed(seed), run_seed(seed)
        assert first.trace == second.trace
        assert first.trace_hash == second.trace_hash
        assert first.events == second.events


def test_different_seeds_differ():
    assert len({run_seed(seed).trace_hash for seed in range(5)}) == 5


def test_shrunk_schedule_replays():
    result = run_seed(3)
    kept = result.schedule[:1]
    assert run_seed(3, schedule=kept).trace_hash == run_seed(3, schedule=kept).trace_hash
