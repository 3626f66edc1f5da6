"""`weir bench spark`: Spark reading N 100-byte records from Weir, against Parquet.

Produces N records into a topic of a broker, then times, in a local SparkSession:

- weir count:    spark.read.format("weir")...load().count()
- weir group-by: the same, grouped by the first byte of the value, counted
- weir, value only: both queries reading only the value column (`.schema("value binary")`: Spark's
                 Python data source API pushes no columns down, Parquet reads only what a query needs)
- parquet:       the same two queries over the same rows written once to Parquet
- replay:        the same two queries over a Python data source that only replays one prebuilt
                 Arrow batch of the same columns, as many rows in as many partitions: the most any
                 Python data source gets out of Spark (the JVM turns every Arrow row into a row)

and prints rows/s and the ratios to Parquet (the best of the rounds), and the rate at which the
source's own `read` decodes the topic in this process, without Spark. Parquet's count() reads only
file footers, so the group-by is the fairer comparison. Results are printed, never asserted.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from weir.spark.options import parse_read_options
from weir.spark.source import WeirBatchReader, arrow_schema, kafka_schema, read_partition

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


def spark_vs_parquet(bootstrap: str, records: int, record_size: int, partitions: int, rounds: int) -> dict:
    """Creates the topic on the cluster at `bootstrap`, produces `records` records, and times the
    queries: {(source, query): best seconds} for sources weir, parquet, replay and queries count,
    group-by; and "decode rows/s", the source's own read without Spark."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from pyspark.sql import functions as F

    from weir.spark import local_session

    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(30)
    produce(bootstrap, records, record_size, partitions)
    spark = local_session("weir-spark-bench", **{"spark.ui.showConsoleProgress": "false"})
    scratch = tempfile.mkdtemp(prefix="weir-spark-bench-")
    try:
        def weir_read(schema: str | None = None):
            reader = spark.read.format("weir")
            if schema is not None:
                reader = reader.schema(schema)
            # the source's own split: a Spark partition per topic partition (of up to 1M offsets);
            # splitting further (more Spark partitions than topic partitions) reads slower
            return reader.option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC).load()
        weir = weir_read()
        parquet_path = str(Path(scratch) / "rows.parquet")
        weir.select("key", "value", "topic", "partition", "offset", "timestamp", "timestampType") \
            .write.parquet(parquet_path)
        parquet = spark.read.parquet(parquet_path)
        spark.dataSource.register(ReplaySource)
        replay = (spark.read.format("weir-bench-replay").option("rows", str(records))
                  .option("partitions", str(weir.rdd.getNumPartitions())).load())

        def group_by(df):
            return lambda: df.groupBy(F.substring("value", 1, 1)).count().collect()

        dfs = {"weir": weir, "weir value": weir_read("value binary"), "parquet": parquet, "replay": replay}
        results: dict = {}
        for name, df in dfs.items():
            assert df.count() == records
        turns = list(dfs.items())
        for round_ in range(rounds):
            # the sources take turns, each round starting with the next one, so that a busy moment
            # or the JVM's warming up hits them alike
            first = round_ % len(turns)
            for name, df in turns[first:] + turns[:first]:
                for query, action in (("count", df.count), ("group-by", group_by(df))):
                    results[(name, query)] = min(results.get((name, query), float("inf")), best_of(1, action))
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    results["decode rows/s"] = decode_rate(bootstrap, records, rounds)
    return results


def report(records: int, results: dict) -> None:
    for query in ("count", "group-by"):
        w, v, p, r = (results[(name, query)] for name in ("weir", "weir value", "parquet", "replay"))
        print(f"Spark {query:>8}: weir {records / w:>11,.0f} rows/s   weir, value only {records / v:>11,.0f}   "
              f"parquet {records / p:>11,.0f}   replay {records / r:>11,.0f}   weir/parquet {p / w:.2f}   "
              f"value only/parquet {p / v:.2f}   replay/parquet {p / r:.2f}")
    print(f"Spark source's read in this process, no Spark: {results['decode rows/s']:,.0f} rows/s")
