"""The loop's lock-free counters and histograms read as prometheus_client's own (less `_created`)."""

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from weir.broker.loop_metrics import LoopCounter, LoopHistogram

BUCKETS = (0.25, 0.5, 1, 2, 5)


def exposition(registry) -> list[str]:
    return sorted(line for line in generate_latest(registry).decode().splitlines() if "_created" not in line)


def test_the_same_text_as_prometheus_client():
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    counters = (LoopCounter("requests", "Requests.", ["request"], ours), Counter("requests", "Requests.", ["request"],
                                                                               registry=theirs))
    histograms = (LoopHistogram("timems", "Time.", ["request"], BUCKETS, ours),
                  Histogram("timems", "Time.", ["request"], buckets=BUCKETS, registry=theirs))
    for counter in counters:
        counter.labels("Produce").inc()
        counter.labels("Fetch").inc(3)
    for histogram in histograms:
        for value in (0.1, 0.25, 0.26, 1, 4.9, 5, 7, 1e9):  # on, between and past the bounds
            histogram.labels("Produce").observe(value)
        histogram.labels("Fetch").observe(2)
    assert exposition(ours) == exposition(theirs)
