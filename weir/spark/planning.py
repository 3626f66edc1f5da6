"""Pure planning of reads: which offsets a micro-batch takes, and how ranges become Spark partitions.

No I/O here: the source resolves offsets over the wire and hands them in, so tests drive these
functions directly.

- `rate_limit` applies maxOffsetsPerTrigger (Spark's ReadMaxRows): the limit is shared among the
  partitions in proportion to how far each is behind, rounded down, with the remainder given out
  by largest fraction, so a micro-batch never takes more than the limit and always takes at least
  one offset while any partition has data. Offsets count records exactly when a partition has no
  gaps (gaps - control batches - only make a batch smaller).
- `split_ranges` cuts ranges longer than maxRecordsPerPartition, then, while there are fewer than
  minPartitions, cuts the ranges in proportion to their size (Spark's KafkaOffsetRangeCalculator
  does the same).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int  # exclusive

    @property
    def size(self) -> int:
        return self.end - self.start


def rate_limit(start: dict[TopicPartition, int], latest: dict[TopicPartition, int],
               limit: int) -> dict[TopicPartition, int]:
    """End offsets that advance from `start` toward `latest` by at most `limit` offsets in all."""
    assert limit > 0
    behind = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(behind.values())
    if total <= limit:
        return dict(latest)
    shares = {tp: limit * n / total for tp, n in behind.items()}
    take = {tp: math.floor(s) for tp, s in shares.items()}
    left = limit - sum(take.values())
    for tp in sorted(shares, key=lambda tp: (-(shares[tp] - take[tp]), tp))[:left]:
        take[tp] += 1
    out = {tp: start.get(tp, latest[tp]) + min(take[tp], behind[tp]) if behind[tp] else latest[tp]
           for tp in latest}
    assert sum(max(0, out[tp] - start.get(tp, latest[tp])) for tp in latest) <= limit
    return out


def split_ranges(ranges: list[OffsetRange], max_per_partition: int | None,
                 min_partitions: int | None) -> list[OffsetRange]:
    """Non-empty ranges, each at most `max_per_partition` long, at least `min_partitions` of them
    when there are enough offsets."""
    ranges = [r for r in ranges if r.size > 0]
    out = []
    for r in ranges:
        parts = math.ceil(r.size / max_per_partition) if max_per_partition else 1
        out.extend(_cut(r, parts))
    if min_partitions and len(out) < min_partitions:
        total = sum(r.size for r in out)
        again = []
        for r in out:
            parts = max(1, math.ceil(r.size / total * min_partitions))
            again.extend(_cut(r, parts))
        out = again
    assert sum(r.size for r in out) == sum(r.size for r in ranges)
    return out


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, r.size))
    bounds = [r.start + r.size * i // parts for i in range(parts + 1)]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
