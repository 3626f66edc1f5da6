"""Page views -> Weir (3 brokers, replicated) -> Spark Structured Streaming -> counts per URL per minute.

    .venv/bin/python examples/pageview_pipeline.py            # the same as `weir demo pipeline`
    .venv/bin/python examples/pageview_pipeline.py --events 50000 --rate 2000

Midway, the broker leading most partitions is killed (kill -9). At the end, the per-minute counts in
Parquet are compared with the ground truth computed from the events the producer saw acknowledged.
The pipeline itself is in weir/spark/demo.py (`counting_query` is the Spark part); this file runs it.
"""

import argparse
import logging
import sys
from pathlib import Path

from weir.spark.demo import run_pipeline


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=1_000)
    parser.add_argument("--minutes", type=int, default=5)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--no-kill", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    result = run_pipeline(Path(args.data_dir) if args.data_dir else None, events=args.events, rate=args.rate,
                          minutes=args.minutes, kill=not args.no_kill)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
