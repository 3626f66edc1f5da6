"""Producing rows to Weir from a Spark task, with confluent-kafka and without pyspark: the part of
the sink (weir/spark/sink.py) and of its exactly-once mode (exactly_once.py) that both share."""

from __future__ import annotations

import datetime

from weir.spark.options import WriteOptions

FLUSH_TIMEOUT_S = 300


class ProduceError(RuntimeError):
    """Records could not be written: the task fails and Spark retries it."""


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
