"""The sink's exactly-once mode (deliveryGuarantee=exactly-once): one transaction per task.

Streaming writes (writeStream) take the micro-batch id from Spark; batch writes inside
foreachBatch pass it as the batchId option.

A micro-batch's task for Spark partition P writes its rows in one Kafka transaction whose
transactional id is `<transactionalIdPrefix>-P`, and in the same transaction commits the sink's
progress for P: offset `batchId + 1` of the output topic's partition 0 in consumer group
`<transactionalIdPrefix>-P` (TxnOffsetCommit, as a consume-transform-produce loop commits its
input offsets). The rows and the progress become visible together or not at all.

- A retried task (or a micro-batch Spark replays after a crash, before its commit log recorded
  the batch) starts with InitProducerId for the same transactional id: it fences every earlier
  attempt and the coordinator ends whatever transaction that attempt left open. It then reads
  the progress (read_committed, stable): at or past `batchId + 1`, an earlier attempt committed
  this partition of this batch, and the task writes nothing.
- So each micro-batch's output is in the topic exactly once, provided a replayed micro-batch
  hands each Spark partition the same rows (Spark replays the offsets in its offset log; the
  weir source plans partitions from offsets alone).
- Readers that must not see aborted attempts read with isolation.level=read_committed.
"""

from __future__ import annotations

from itertools import chain

from weir.spark.options import SECURITY_PREFIXES, WriteOptions
from weir.spark.produce import ProduceError, flush_or_fail, producer_config, send_rows

BATCH_ID_PROPERTY = "streaming.sql.batchId"  # set by Spark on every task of a micro-batch
TRANSACTION_TIMEOUT_S = 120


def task_batch_id() -> int:
    """The micro-batch a streaming write's task belongs to."""
    from pyspark import TaskContext
    batch_id = TaskContext.get().getLocalProperty(BATCH_ID_PROPERTY)
    if batch_id is None:
        raise ProduceError(f"no micro-batch id in this task (Spark's {BATCH_ID_PROPERTY} property)")
    return int(batch_id)


def task_partition() -> int:
    from pyspark import TaskContext
    return TaskContext.get().partitionId()


def produce_exactly_once(opts: WriteOptions, rows, batch_id: int, partition_id: int) -> int:
    """Write this task's rows and its progress in one transaction, unless an earlier attempt did."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    rows = iter(rows)
    first = next(rows, None)
    if first is None:
        return 0  # nothing to write twice
    name = f"{opts.transactional_id_prefix}-{partition_id}"
    producer = Producer(producer_config(opts, **{"transactional.id": name,
                                                 "transaction.timeout.ms": TRANSACTION_TIMEOUT_S * 1000}))
    progress = Consumer({"bootstrap.servers": opts.bootstrap, "group.id": name, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "log_level": 2, **_shared(opts)})
    try:
        producer.init_transactions(TRANSACTION_TIMEOUT_S)
        done = progress.committed([TopicPartition(opts.topic, 0)], timeout=TRANSACTION_TIMEOUT_S)[0]
        if done.error is None and done.offset > batch_id:
            return 0
        producer.begin_transaction()
        errors: list[str] = []
        count = send_rows(producer, opts, chain([first], rows), errors)
        try:
            flush_or_fail(producer, errors, count)
        except ProduceError:
            producer.abort_transaction(TRANSACTION_TIMEOUT_S)
            raise
        producer.send_offsets_to_transaction([TopicPartition(opts.topic, 0, batch_id + 1)],
                                             progress.consumer_group_metadata(), TRANSACTION_TIMEOUT_S)
        producer.commit_transaction(TRANSACTION_TIMEOUT_S)
        return count
    except KafkaException as e:
        raise ProduceError(f"transaction {name} (batch {batch_id}) failed: {e.args[0].str()}") from e
    finally:
        progress.close()


def _shared(opts: WriteOptions) -> dict:
    """The connection settings of the sink's kafka.* options (security), for the progress reader."""
    return {k: v for k, v in opts.producer_config.items() if f"kafka.{k}".startswith(SECURITY_PREFIXES)}
