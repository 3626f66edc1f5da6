"""Writing a DataFrame to Weir: batch (`df.write`) and streaming (`writeStream`, append/update).

Columns, as Spark's Kafka sink takes them:

    value      string or binary, required (null writes a tombstone)
    key        string or binary, optional
    topic      string, required unless the `topic` option is set (the option wins)
    partition  int, optional (else the producer's partitioner, by key)
    headers    array<struct<key:string, value:binary>>, optional
    timestamp  timestamp (or double: seconds since the epoch), optional: the record's CreateTime
               (else the producer's clock), as Spark's Kafka sink takes it (KafkaWriteTask)

Other columns are ignored. The schema is checked on the driver, before any task runs.

Guarantee: at least once by default, like Spark's Kafka sink. Each task produces its rows with
acks=all and waits for every acknowledgement before it reports success; any producer error fails
the task, and Spark retries it (or the micro-batch), which may write some rows twice. No row is
lost once a task or a micro-batch has committed. Streaming writes with
deliveryGuarantee=exactly-once write each micro-batch once: weir/spark/exactly_once.py.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, DoubleType, IntegerType, StringType, StructType, TimestampType

from .options import OptionError, WriteOptions

FLUSH_TIMEOUT_S = 300
HEADERS_HINT = "array<struct<key:string,value:binary>>"


class ProduceError(RuntimeError):
    """Records could not be written: the task fails and Spark retries it."""


@dataclass
class WriteCount(WriterCommitMessage):
    rows: int


def check_schema(opts: WriteOptions, schema: StructType) -> None:
    """Readable errors for a DataFrame the sink cannot write."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError(f"writing to Weir needs a 'value' column (string or binary); the DataFrame has "
                          f"{', '.join(fields) or 'no columns'}")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], (StringType, BinaryType)):
            raise OptionError(f"column {name!r} must be string or binary, not {fields[name].simpleString()}")
    if "topic" in fields:
        if not isinstance(fields["topic"], StringType):
            raise OptionError(f"column 'topic' must be a string, not {fields['topic'].simpleString()}")
    elif opts.topic is None:
        raise OptionError("say where to write: set the 'topic' option or add a 'topic' column")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise OptionError(f"column 'partition' must be an int, not {fields['partition'].simpleString()}")
    if "timestamp" in fields and not isinstance(fields["timestamp"], (TimestampType, DoubleType)):
        raise OptionError(f"column 'timestamp' must be a timestamp or a double, not {fields['timestamp'].simpleString()}")
    if "headers" in fields:
        h = fields["headers"]
        ok = (h.typeName() == "array" and isinstance(h.elementType, StructType)
              and [f.name for f in h.elementType.fields] == ["key", "value"]
              and isinstance(h.elementType.fields[0].dataType, StringType)
              and isinstance(h.elementType.fields[1].dataType, (BinaryType, StringType)))
        if not ok:
            raise OptionError(f"column 'headers' must be {HEADERS_HINT}, not {h.simpleString()}")


def _bytes(v):
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    return bytes(v)  # bytearray, memoryview


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _millis(ts) -> int:
    """A timestamp column's value as the record's milliseconds, as KafkaWriteTask casts it (a double is
    seconds: to whole microseconds, then to milliseconds, truncated)."""
    if isinstance(ts, datetime.datetime):  # PySpark hands it naive, in this process's local time
        micros = (ts.astimezone(datetime.timezone.utc) - _EPOCH) // datetime.timedelta(microseconds=1)
    else:
        micros = int(ts * 1_000_000)
    return int(micros / 1000)  # toward zero, as Java's long division


def producer_config(opts: WriteOptions, **extra) -> dict:
    return {"bootstrap.servers": opts.bootstrap, "acks": "all", "linger.ms": 5,
            "enable.idempotence": True,  # the producer's own retries write no duplicate
            "message.timeout.ms": 120_000, "retry.backoff.ms": 200, "queue.buffering.max.messages": 200_000,
            "client.id": "weir-spark-sink",
            "log_level": 2,  # errors reach us through delivery reports, not librdkafka's log
            **extra, **opts.producer_config}


def send_rows(producer, opts: WriteOptions, rows, errors: list[str]) -> int:
    """Hand every row to the producer (stops early once a delivery failed); the rows handed."""
    def delivered(err, msg) -> None:
        if err is not None and len(errors) < 10:
            errors.append(f"{msg.topic()}: {err.str()}")

    count = 0
    for row in rows:
        if errors:
            break
        d = row.asDict() if hasattr(row, "asDict") else dict(row)
        topic = opts.topic or d.get("topic")
        if not topic:
            raise ProduceError(f"row {count} has no topic (null 'topic' column and no 'topic' option)")
        kwargs = {"value": _bytes(d.get("value")), "key": _bytes(d.get("key")), "on_delivery": delivered}
        if d.get("partition") is not None:
            kwargs["partition"] = d["partition"]
        if d.get("timestamp") is not None:
            kwargs["timestamp"] = _millis(d["timestamp"])
        headers = d.get("headers")
        if headers:
            kwargs["headers"] = [(h["key"], _bytes(h["value"])) for h in headers]
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
        if count % 1000 == 0:
            producer.poll(0)
    return count


def flush_or_fail(producer, errors: list[str], count: int) -> None:
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    if errors:
        raise ProduceError(f"producing to Weir failed after {count} rows: {'; '.join(errors)}")
    if remaining:
        raise ProduceError(f"{remaining} records were not acknowledged within {FLUSH_TIMEOUT_S} s")


def produce_rows(opts: WriteOptions, rows) -> int:
    """Produce every row and wait for all acknowledgements; ProduceError on any failure."""
    from confluent_kafka import Producer
    producer = Producer(producer_config(opts))
    errors: list[str] = []
    count = send_rows(producer, opts, rows, errors)
    flush_or_fail(producer, errors, count)
    return count


class WeirWriter(DataSourceWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        check_schema(opts, schema)
        if opts.exactly_once and opts.batch_id is None:
            raise OptionError("deliveryGuarantee=exactly-once writes each micro-batch once: a batch write needs the "
                              "batchId option (foreachBatch's batch id), or use writeStream")
        self.opts = opts

    def write(self, iterator) -> WriteCount:
        if self.opts.exactly_once:
            from .exactly_once import produce_exactly_once, task_partition
            return WriteCount(produce_exactly_once(self.opts, iterator, self.opts.batch_id, task_partition()))
        return WriteCount(produce_rows(self.opts, iterator))


class WeirStreamWriter(DataSourceStreamWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        check_schema(opts, schema)
        self.opts = opts

    def write(self, iterator) -> WriteCount:
        if self.opts.exactly_once:
            from .exactly_once import produce_exactly_once, task_batch_id, task_partition
            return WriteCount(produce_exactly_once(self.opts, iterator, task_batch_id(), task_partition()))
        return WriteCount(produce_rows(self.opts, iterator))

    def commit(self, messages, batchId: int) -> None:
        pass  # every row was acknowledged (exactly once: committed) before its task reported success

    def abort(self, messages, batchId: int) -> None:
        pass  # what was acknowledged stays: at least once (exactly once: a replay skips what committed)
