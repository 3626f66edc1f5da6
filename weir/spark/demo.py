"""`weir demo pipeline`: page views through a replicated Weir topic into Spark, exactly once, with a
broker killed.

What it does, in order:

1. starts ZooKeeper and three brokers on this machine, and creates `page-views` (6 partitions,
   replication 3, min.insync.replicas 2) and `url-counts`;
2. a transactional producer streams page-view events - {"id", "user", "url"} keyed by user, event
   time in the record timestamp - 50 per transaction; a transaction that fails is aborted and its
   events sent again in a new one, and an event counts as sent once its transaction committed;
3. a Structured Streaming query reads `page-views` through the `weir` source with
   read_committed (never an aborted event, never one of a transaction still open), counts views
   per URL per one-minute event-time window, and on every micro-batch writes the updated counts to
   Parquet and, exactly once (one transaction per task, with the micro-batch's progress), to the
   `url-counts` topic;
4. midway, the broker leading most `page-views` partitions is killed (kill -9): the producer and
   the query carry on with the new leaders;
5. the producer stops; the query is stopped and run once more from its checkpoint with
   Trigger.AvailableNow, which reads up to the end. Then the last count of each (minute, URL), in
   the Parquet output and in `url-counts` (read_committed), is compared with the ground truth
   computed from the committed events, and `url-counts` must hold no count update twice.

No step drops duplicates: if an event were read twice, or a micro-batch's counts written twice,
the comparison would show it. Event time runs faster than the wall clock (`--minutes` of event
time over the whole run), so a short demo still spans several windows.
"""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

URLS = ["/", "/pricing", "/docs", "/docs/spark", "/blog", "/signup", "/login", "/about"]
EVENTS_TOPIC = "page-views"
COUNTS_TOPIC = "url-counts"
MINUTE_MS = 60_000
EVENTS_PER_TRANSACTION = 50
TRANSACTION_CALL_TIMEOUT_S = 300


@dataclass
class DemoResult:
    acked: int
    failed: int
    killed_broker: int | None
    truth: dict  # (window start ms, url) -> count
    counted: dict  # the same, from Parquet
    batches: int
    seconds: float
    counts_topic_records: int = 0
    notes: list = field(default_factory=list)
    topic_counted: dict = field(default_factory=dict)  # the same, the last update of each in url-counts
    counts_written_twice: int = 0  # (minute, url, count) updates found more than once in url-counts
    aborted_transactions: int = 0

    @property
    def ok(self) -> bool:
        return (self.failed == 0 and self.truth == self.counted == self.topic_counted
                and self.counts_written_twice == 0)


class PageViewProducer:
    """Produces `total` events at about `rate` per second from a thread, in transactions; keeps the
    ids of the committed ones."""

    def __init__(self, bootstrap: str, total: int, rate: float, event_minutes: int, seed: int = 7) -> None:
        from confluent_kafka import Producer
        self.total, self.rate = total, rate
        self.start_ms = (int(time.time() * 1000) // MINUTE_MS - event_minutes - 1) * MINUTE_MS
        self.step_ms = event_minutes * MINUTE_MS / total
        self.random = random.Random(seed)
        self.acked: dict[int, tuple[int, str]] = {}  # id -> (event time ms, url), once committed
        self.failed: list[str] = []
        self.sent = 0
        self.aborted_transactions = 0
        self._producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "page-view-producer",
                                   "acks": "all", "linger.ms": 10, "message.timeout.ms": 120_000,
                                   "transaction.timeout.ms": 120_000, "retry.backoff.ms": 200,
                                   "log_level": 2})  # a killed broker is the point: no connection noise
        self._thread = threading.Thread(target=self._run, name="page-view-producer", daemon=True)

    def start(self) -> PageViewProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        from confluent_kafka import KafkaException
        try:
            self._producer.init_transactions(TRANSACTION_CALL_TIMEOUT_S)
            began = time.monotonic()
            transaction = []
            for i in range(self.total):
                due = began + i / self.rate
                while (wait := due - time.monotonic()) > 0:
                    time.sleep(min(wait, 0.05))
                ts = int(self.start_ms + i * self.step_ms)
                user = f"user-{self.random.randrange(200)}"
                url = self.random.choice(URLS)
                transaction.append((i, ts, user, url))
                if len(transaction) == EVENTS_PER_TRANSACTION or i == self.total - 1:
                    self._commit(transaction)
                    transaction = []
                self.sent = i + 1
        except KafkaException as e:
            self.failed.append(f"after {self.sent} events: {e.args[0].str()}")

    def _commit(self, events) -> None:
        """Send the events in one transaction, again in a new one each time it has to be aborted."""
        while True:
            self._producer.begin_transaction()
            for i, ts, user, url in events:
                value = json.dumps({"id": i, "user": user, "url": url}).encode()
                while True:
                    try:
                        self._producer.produce(EVENTS_TOPIC, value, user.encode(), timestamp=ts)
                        break
                    except BufferError:
                        self._producer.poll(0.05)
            if self._committed():
                self.acked.update((i, (ts, url)) for i, ts, _, url in events)
                return
            self.aborted_transactions += 1

    def _committed(self) -> bool:
        from confluent_kafka import KafkaException
        while True:
            try:
                self._producer.commit_transaction(TRANSACTION_CALL_TIMEOUT_S)
                return True
            except KafkaException as e:
                if e.args[0].txn_requires_abort():
                    self._producer.abort_transaction(TRANSACTION_CALL_TIMEOUT_S)
                    return False
                if not e.args[0].retriable():
                    raise

    def join(self, timeout_s: float = 600) -> None:
        self._thread.join(timeout_s)

    def truth(self) -> dict:
        counts = Counter(((ts // MINUTE_MS) * MINUTE_MS, url) for ts, url in self.acked.values())
        return dict(counts)


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """partition -> leader broker id, fresh from the cluster."""
    from weir.client import ClusterClient

    async def ask() -> dict[int, int]:
        async with ClusterClient(bootstrap) as client:
            await client.refresh_metadata([topic])
            return {p: info.leader for p, info in client.topics[topic].partitions.items()}
    return asyncio.run(ask())


def counting_query(spark, bootstrap: str, out_dir: Path, checkpoint: Path, *, available_now: bool,
                   max_offsets: int = 2000):
    """Per-minute views per URL; each micro-batch's updated counts go to Parquet and to a topic."""
    from pyspark.sql import functions as F
    views = (spark.readStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", EVENTS_TOPIC).option("startingOffsets", "earliest")
             .option("kafka.isolation.level", "read_committed")
             .option("maxOffsetsPerTrigger", str(max_offsets)).load())
    event = F.from_json(F.col("value").cast("string"), "id long, user string, url string")
    counts = (views.select(event.alias("e"), "timestamp").select("e.*", "timestamp")
              .groupBy(F.window("timestamp", "1 minute").alias("w"), "url").count()
              .select(F.col("w.start").alias("minute"), "url", "count"))

    def write_batch(batch, batch_id: int) -> None:
        batch = batch.persist()
        # Parquet: one directory per micro-batch, overwritten if Spark replays the batch
        batch.withColumn("batch_id", F.lit(batch_id)).write.mode("overwrite").parquet(
            str(out_dir / f"batch_id={batch_id}"))
        (batch.select(F.concat_ws(" ", F.col("minute").cast("string"), "url").alias("key"),
                      F.to_json(F.struct("minute", "url", "count")).alias("value"))
         .write.format("weir").option("kafka.bootstrap.servers", bootstrap).option("topic", COUNTS_TOPIC)
         .option("deliveryGuarantee", "exactly-once").option("transactionalIdPrefix", "url-counts-demo")
         .option("batchId", str(batch_id)).mode("append").save())
        batch.unpersist()

    writer = (counts.writeStream.outputMode("update").foreachBatch(write_batch)
              .option("checkpointLocation", str(checkpoint)))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="2 seconds")
    return writer.start()


def wait_caught_up(query, bootstrap: str, timeout_s: float) -> bool:
    """Wait until the query's last micro-batch ended at every partition's high watermark and no
    trigger is running (so stopping it interrupts nothing)."""
    from weir.spark.log_reader import from_json_offsets, list_offsets
    from weir.spark.options import LATEST, parse_read_options
    opts = parse_read_options({"kafka.bootstrap.servers": bootstrap, "subscribe": EVENTS_TOPIC}, streaming=True)
    tps = [(EVENTS_TOPIC, p) for p in range(6)]
    latest = list_offsets(opts, {tp: LATEST for tp in tps})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and query.isActive:
        progress = query.lastProgress
        if progress and progress["sources"] and not query.status["isTriggerActive"]:
            end = progress["sources"][0]["endOffset"]
            end = from_json_offsets(json.loads(end) if isinstance(end, str) else end)
            if all(end.get(tp, -1) >= off for tp, off in latest.items()):
                return True
        time.sleep(0.2)
    return False


def final_counts(spark, out_dir: Path) -> dict:
    """The last count written for each (minute, url)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    if not out_dir.exists() or not any(out_dir.iterdir()):
        return {}
    df = spark.read.parquet(str(out_dir))
    last = Window.partitionBy("minute", "url").orderBy(F.col("batch_id").desc())
    rows = (df.withColumn("n", F.row_number().over(last)).where("n = 1")
            .select(F.expr("unix_millis(minute)").alias("minute_ms"), "url", "count").collect())
    return {(r.minute_ms, r.url): r["count"] for r in rows}


def run_pipeline(data_dir: Path | None = None, *, events: int = 20_000, rate: float = 1_000, minutes: int = 5,
                 kill: bool = True, spark=None, zookeeper_connect: str | None = None, echo=print) -> DemoResult:
    from weir.lab.local_cluster import LocalCluster
    from weir.spark import local_session
    began = time.monotonic()
    data_dir = Path(data_dir or tempfile.mkdtemp(prefix="weir-demo-"))
    overrides = {"zookeeper.session.timeout.ms": "6000", "replica.fetch.backoff.ms": "200",
                 "replica.lag.time.max.ms": "5000", "auto.create.topics.enable": "false"}
    cluster = LocalCluster(data_dir / "cluster", 3, zookeeper_connect=zookeeper_connect, overrides=overrides)
    cluster.start()
    own_spark = spark is None
    try:
        bootstrap = cluster.bootstrap
        echo(f"demo: 3 brokers up ({bootstrap}); data in {data_dir}")
        _create_topics(bootstrap)
        if own_spark:
            spark = local_session("weir-demo", **{"spark.ui.showConsoleProgress": "false"})
        out_dir, checkpoint = data_dir / "counts.parquet", data_dir / "checkpoint"
        query = counting_query(spark, bootstrap, out_dir, checkpoint, available_now=False)
        killed = None
        try:
            while query.lastProgress is None and query.isActive:  # the query is up and running
                time.sleep(0.2)
            producer = PageViewProducer(bootstrap, events, rate, minutes).start()
            echo(f"demo: producing {events} page views at ~{rate:g}/s over {minutes} minutes of event time")
            give_up = time.monotonic() + 60
            while producer._thread.is_alive() and time.monotonic() < give_up and (
                    producer.sent < events // 2 or not sum(p["numInputRows"] for p in query.recentProgress)):
                time.sleep(0.2)  # midway, once the query is reading
            if kill:
                by_leader = Counter(leaders(bootstrap, EVENTS_TOPIC).values())
                killed = by_leader.most_common(1)[0][0]
                read = sum(p["numInputRows"] for p in query.recentProgress)
                echo(f"demo: {producer.sent} sent, {len(producer.acked)} acknowledged, {read} read by the query; "
                     f"kill -9 broker {killed}, leader of {by_leader[killed]} of 6 partitions")
                cluster.brokers[killed].kill()
            producer.join()
            echo(f"demo: producer done: {len(producer.acked)} acknowledged, {len(producer.failed)} failed")
            caught_up = wait_caught_up(query, bootstrap, timeout_s=120)
            if query.exception() is not None:
                raise query.exception()
            read = sum(p["numInputRows"] for p in query.recentProgress)
            echo(f"demo: the running query {'caught up' if caught_up else 'is still behind'} ({read} records read);"
                 " stopping it")
        finally:
            query.stop()
        # the same query from its checkpoint, once more, to the end of what is committed
        query = counting_query(spark, bootstrap, out_dir, checkpoint, available_now=True)
        query.awaitTermination(600)
        if query.exception() is not None:
            raise query.exception()
        batches = len(list(out_dir.glob("batch_id=*")))
        counted = final_counts(spark, out_dir)
        updates = topic_updates(spark, bootstrap)
        topic_counted: dict = {}
        for minute_ms, url, count in updates:
            topic_counted[(minute_ms, url)] = max(count, topic_counted.get((minute_ms, url), 0))
        twice = sum(n - 1 for n in Counter(updates).values() if n > 1)
        result = DemoResult(len(producer.acked), len(producer.failed), killed, producer.truth(), counted, batches,
                            time.monotonic() - began, len(updates), producer.failed[:5], topic_counted, twice,
                            producer.aborted_transactions)
        _print_result(result, echo)
        return result
    finally:
        if own_spark and spark is not None:
            spark.stop()
        cluster.kill()


def topic_updates(spark, bootstrap: str) -> list[tuple[int, str, int]]:
    """Every (minute ms, url, count) update in url-counts, read_committed."""
    from pyspark.sql import functions as F
    rows = (spark.read.format("weir").option("kafka.bootstrap.servers", bootstrap).option("subscribe", COUNTS_TOPIC)
            .option("kafka.isolation.level", "read_committed").load()
            .select(F.from_json(F.col("value").cast("string"), "minute timestamp, url string, count long").alias("c"))
            .select(F.expr("unix_millis(c.minute)").alias("minute_ms"), "c.url", "c.count").collect())
    return [(r.minute_ms, r.url, r["count"]) for r in rows]


def _create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(EVENTS_TOPIC, 6, 3, config={"min.insync.replicas": "2"}),
              NewTopic(COUNTS_TOPIC, 3, 3, config={"min.insync.replicas": "2"})]
    for future in admin.create_topics(topics).values():
        future.result(30)


def _print_result(result: DemoResult, echo) -> None:
    import datetime
    echo(f"demo: {result.batches} micro-batches wrote counts to Parquet; {result.counts_topic_records} "
         f"count updates in topic {COUNTS_TOPIC} ({result.counts_written_twice} written twice); "
         f"{result.aborted_transactions} producer transactions aborted and sent again")
    minutes = sorted({m for m, _ in result.truth})
    echo("minute (UTC)  " + " ".join(f"{u:>11}" for u in URLS))
    for m in minutes:
        label = datetime.datetime.fromtimestamp(m / 1000, datetime.timezone.utc).strftime("%H:%M")
        cells = []
        for u in URLS:
            t, c = result.truth.get((m, u), 0), result.counted.get((m, u), 0)
            cells.append(f"{c:>11}" if t == c else f"{c:>5}≠{t:<5}")
        echo(f"{label:<13} " + " ".join(cells))
    def verdict(counted: dict) -> str:
        return "EQUAL to" if result.truth == counted else "DIFFERENT from"
    echo(f"demo: Parquet counts ({sum(result.counted.values())} views) are {verdict(result.counted)} and "
         f"{COUNTS_TOPIC}' last counts are {verdict(result.topic_counted)} the ground truth from "
         f"{result.acked} committed events; {result.failed} failed; {result.seconds:.0f} s")


# -- the command -----------------------------------------------------------------------------------

def register(sub) -> None:
    """`weir demo pipeline`: registered by weir/cli/main.py."""
    demo = sub.add_parser("demo", help="run a demo (pipeline: Weir -> Spark streaming -> Parquet, with a broker killed)")
    demo.add_argument("name", choices=["pipeline"])
    demo.add_argument("--events", type=int, default=20_000)
    demo.add_argument("--rate", type=float, default=1_000, help="events per second")
    demo.add_argument("--minutes", type=int, default=5, help="minutes of event time the events span")
    demo.add_argument("--data-dir", default=None, help="default: a new temporary directory")
    demo.add_argument("--no-kill", action="store_true", help="do not kill a broker midway")
    demo.set_defaults(func=_run_command)


def _run_command(args) -> int:
    import logging
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    result = run_pipeline(Path(args.data_dir) if args.data_dir else None, events=args.events, rate=args.rate,
                          minutes=args.minutes, kill=not args.no_kill)
    return 0 if result.ok else 1
