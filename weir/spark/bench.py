"""`python -m weir.spark.bench`: Spark reading N 100-byte records from Weir, against Parquet.

Starts one broker, produces N records of `--record-size` bytes into a topic of `--partitions`
partitions, then times, in a local SparkSession:

- weir count:    spark.read.format("weir")...load().count()
- weir group-by: the same, grouped by the first byte of the value, counted
- parquet:       the same two queries over the same rows written once to Parquet
- replay:        the same two queries over a Python data source that only replays one prebuilt
                 Arrow batch of the same columns, as many rows in as many partitions: the most any
                 Python data source gets out of Spark (the JVM turns every Arrow row into a row)

and prints rows/s and the ratios to Parquet (the best of `--rounds`), and the rate at which the
source's own `read` decodes the topic in this process, without Spark. Parquet's count() reads only
file footers, so the group-by is the fairer comparison. Results are printed, never asserted.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from .options import parse_read_options
from .source import WeirBatchReader, arrow_schema, kafka_schema, read_partition

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


class ReplayReader(DataSourceReader):
    def __init__(self, options) -> None:
        self.rows, self.count = int(options["rows"]), int(options["partitions"])

    def partitions(self):
        share, left = divmod(self.rows, self.count)
        return [InputPartition(share + (i < left)) for i in range(self.count)]

    def read(self, partition):
        schema = arrow_schema(kafka_schema())
        n = 30_000  # about one 4 MiB Fetch answer
        columns = {"key": pa.nulls(n, pa.binary()),
                   "value": pa.array([bytes([97 + i % 26]) + b"x" * 99 for i in range(n)], pa.binary()),
                   "topic": pa.repeat(pa.scalar(TOPIC), n), "partition": pa.repeat(pa.scalar(0, pa.int32()), n),
                   "offset": pa.array(range(n), pa.int64()),
                   "timestamp": pa.array(range(n), schema.field("timestamp").type),
                   "timestampType": pa.repeat(pa.scalar(0, pa.int32()), n)}
        batch = pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)
        for begin in range(0, partition.value, n):
            yield batch.slice(0, min(n, partition.value - begin))


class ReplaySource(DataSource):
    """`format("weir-bench-replay")`: `rows` rows in `partitions` partitions, each partition one
    prebuilt Arrow batch of the Kafka source's columns (100-byte values) yielded again and again."""

    @classmethod
    def name(cls) -> str:
        return "weir-bench-replay"

    def schema(self):
        return kafka_schema()

    def reader(self, schema):
        return ReplayReader(self.options)


def decode_rate(bootstrap: str, records: int, rounds: int) -> float:
    """Rows/s of the source's own `read` over the whole topic, in this process, one partition at a time."""
    reader = WeirBatchReader(parse_read_options({"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC},
                                                streaming=False), kafka_schema())
    partitions = reader.partitions()
    return records / best_of(rounds, lambda: sum(b.num_rows for p in partitions for b in read_partition(p)))


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
        spark.dataSource.register(ReplaySource)
        replay = (spark.read.format("weir-bench-replay").option("rows", str(args.records))
                  .option("partitions", str(weir.rdd.getNumPartitions())).load())

        def group_by(df):
            return lambda: df.groupBy(F.substring("value", 1, 1)).count().collect()

        dfs = {"weir": weir, "parquet": parquet, "replay": replay}
        results = {}
        for name, df in dfs.items():
            assert df.count() == args.records
        for _ in range(args.rounds):  # the sources take turns, so a busy moment hits them alike
            for name, df in dfs.items():
                for query, action in (("count", df.count), ("group-by", group_by(df))):
                    results[(name, query)] = min(results.get((name, query), float("inf")), best_of(1, action))
        for query in ("count", "group-by"):
            w, p, r = (results[(name, query)] for name in dfs)
            print(f"{query:>8}: weir {args.records / w:>12,.0f} rows/s   parquet {args.records / p:>12,.0f} rows/s"
                  f"   replay {args.records / r:>12,.0f} rows/s   weir/parquet {p / w:.2f}"
                  f"   replay/parquet {p / r:.2f}")
        decoded = decode_rate(bootstrap, args.records, args.rounds)
        print(f"  decode: the source's read in this process, no Spark: {decoded:,.0f} rows/s")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        cluster.kill()


if __name__ == "__main__":
    raise SystemExit(main())
