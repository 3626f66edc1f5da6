"""Counters and histograms written by the event loop alone: plain numbers, no locks.

prometheus_client's Counter.inc and Histogram.observe take a lock on every call (its values may
be written from any thread) and walk the buckets in Python. A broker updates its request and
topic metrics only on its event loop, several times per request, and is scraped on the loop too
(BrokerMetrics); these keep plain numbers per label values and hand prometheus_client the
metric families when scraped: the same names and text as its Counter and Histogram, less their
`_created` timestamps (which the JMX exporter does not give either).
"""

from bisect import bisect_left

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString


class _Count:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        self.value += amount


class _Buckets:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # a bucket holds values <= its bound
        self.sum += value


class LoopCounter:
    """A labelled counter; `labels(*values)` gives the child to `inc`."""

    def __init__(self, name: str, doc: str, labelnames, registry) -> None:
        self.name, self.doc, self.labelnames = name, doc, list(labelnames)
        self._children: dict[tuple, _Count] = {}
        registry.register(self)

    def labels(self, *values: str) -> _Count:
        return self._children.setdefault(values, _Count())

    def collect(self):
        family = CounterMetricFamily(self.name, self.doc, labels=self.labelnames)
        for values, child in list(self._children.items()):
            family.add_metric(list(values), child.value)
        yield family


class LoopHistogram:
    """A labelled histogram over fixed bucket bounds; `labels(*values)` gives the child to `observe`."""

    def __init__(self, name: str, doc: str, labelnames, buckets, registry) -> None:
        self.name, self.doc, self.labelnames = name, doc, list(labelnames)
        self.bounds = tuple(float(b) for b in buckets)
        self._children: dict[tuple, _Buckets] = {}
        registry.register(self)

    def labels(self, *values: str) -> _Buckets:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = _Buckets(self.bounds)
        return child

    def collect(self):
        family = HistogramMetricFamily(self.name, self.doc, labels=self.labelnames)
        for values, child in list(self._children.items()):
            cumulative, buckets = 0, []
            for bound, count in zip((*self.bounds, float("inf")), child.counts):
                cumulative += count
                buckets.append((floatToGoString(bound), cumulative))
            family.add_metric(list(values), buckets, child.sum)
        yield family
