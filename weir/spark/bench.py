"""`python -m weir.spark.bench`: Spark reading N 100-byte records from Weir, against Parquet.

Starts one broker, produces N records of `--record-size` bytes into a topic of `--partitions`
partitions, then times, in a local SparkSession:

- weir count:    spark.read.format("weir")...load().count()
- weir group-by: the same, grouped by the first byte of the value, counted
- parquet:       the same two queries over the same rows written once to Parquet

and prints rows/s and the ratio weir/parquet (the best of `--rounds`). Parquet's count() reads only
file footers, so the group-by is the fairer comparison. Results are printed, never asserted.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

TOPIC = "spark-bench"


def produce(bootstrap: str, records: int, size: int, partitions: int) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000, "enable.idempotence": False})
    payload = bytearray(b"x" * size)
    for i in range(records):
        payload[0] = 97 + i % 26
        while True:
            try:
                producer.produce(TOPIC, bytes(payload), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def best_of(rounds: int, action) -> float:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return min(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    from confluent_kafka.admin import AdminClient, NewTopic
    from pyspark.sql import functions as F

    from ..local_cluster import LocalCluster
    from . import local_session

    data_dir = Path(tempfile.mkdtemp(prefix="weir-spark-bench-"))
    cluster = LocalCluster(data_dir / "cluster", 1).start()
    spark = None
    try:
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
        admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(30)
        began = time.perf_counter()
        produce(bootstrap, args.records, args.record_size, args.partitions)
        print(f"produced {args.records:,} records of {args.record_size} bytes in {time.perf_counter() - began:.1f} s")
        spark = local_session("weir-spark-bench", **{"spark.ui.showConsoleProgress": "false"})
        weir = (spark.read.format("weir").option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC)
                .option("maxRecordsPerPartition", str(max(1, args.records // 8))).load())
        parquet_path = str(data_dir / "rows.parquet")
        weir.select("key", "value", "topic", "partition", "offset", "timestamp", "timestampType") \
            .write.parquet(parquet_path)
        parquet = spark.read.parquet(parquet_path)

        def group_by(df):
            return lambda: df.groupBy(F.substring("value", 1, 1)).count().collect()

        results = {}
        for name, df in (("weir", weir), ("parquet", parquet)):
            assert df.count() == args.records
            results[(name, "count")] = best_of(args.rounds, df.count)
            results[(name, "group-by")] = best_of(args.rounds, group_by(df))
        for query in ("count", "group-by"):
            w, p = results[("weir", query)], results[("parquet", query)]
            print(f"{query:>8}: weir {args.records / w:>12,.0f} rows/s   parquet {args.records / p:>12,.0f} rows/s"
                  f"   weir/parquet {p / w:.2f}")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        cluster.kill()


if __name__ == "__main__":
    raise SystemExit(main())
