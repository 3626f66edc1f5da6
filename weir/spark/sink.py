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

from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, DoubleType, IntegerType, StringType, StructType, TimestampType

from weir.spark.exactly_once import produce_exactly_once, task_batch_id, task_partition
from weir.spark.options import OptionError, WriteOptions
from weir.spark.produce import produce_rows

HEADERS_HINT = "array<struct<key:string,value:binary>>"


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


class WeirWriter(DataSourceWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        check_schema(opts, schema)
        if opts.exactly_once and opts.batch_id is None:
            raise OptionError("deliveryGuarantee=exactly-once writes each micro-batch once: a batch write needs the "
                              "batchId option (foreachBatch's batch id), or use writeStream")
        self.opts = opts

    def write(self, iterator) -> WriteCount:
        if self.opts.exactly_once:
            return WriteCount(produce_exactly_once(self.opts, iterator, self.opts.batch_id, task_partition()))
        return WriteCount(produce_rows(self.opts, iterator))


class WeirStreamWriter(DataSourceStreamWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        check_schema(opts, schema)
        self.opts = opts

    def write(self, iterator) -> WriteCount:
        if self.opts.exactly_once:
            return WriteCount(produce_exactly_once(self.opts, iterator, task_batch_id(), task_partition()))
        return WriteCount(produce_rows(self.opts, iterator))

    def commit(self, messages, batchId: int) -> None:
        pass  # every row was acknowledged (exactly once: committed) before its task reported success

    def abort(self, messages, batchId: int) -> None:
        pass  # what was acknowledged stays: at least once (exactly once: a replay skips what committed)
