"""What a run or a matrix of runs must show (weir verify's exit status), from their results alone."""

from weir.verify.runner import expectation_failures


def result(nemesis="mixed", unclean=False, min_isr=2, lost=0, complete=True, recovered=True) -> dict:
    return {"name": f"{nemesis}-run", "cell": {"unclean": unclean, "min_isr": min_isr, "acks": "all", "nemesis": nemesis},
            "result": {"counts": {"lost-write": lost}, "stats": {"final_read_complete": complete}},
            "recovered": recovered}


def test_the_safe_cell_must_lose_nothing_and_the_jepsen_cell_must_lose():
    assert expectation_failures([result(), result("jepsen", unclean=True, min_isr=1, lost=3)]) == []
    assert ["lost with unclean off" in f for f in expectation_failures([result(lost=1)])] == [True]
    assert ["expected lost writes" in f for f in expectation_failures([result("jepsen", unclean=True, min_isr=1)])] == [True]


def test_a_cluster_that_does_not_come_back_after_healing_fails_whatever_the_cell():
    """A liveness check: a follower that stops fetching for good loses no write, yet leaves its
    partition without a full ISR (and min ISR 2 without writes, should another replica fail); the
    run must say so."""
    for cell in (result(recovered=False), result("jepsen", unclean=True, min_isr=1, lost=2, recovered=False),
                 result(min_isr=1, recovered=False)):
        failures = expectation_failures([cell])
        assert len(failures) == 1 and "not recovered" in failures[0], failures
