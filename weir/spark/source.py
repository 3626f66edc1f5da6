"""The `weir` data source for PySpark: batch and streaming reads and writes of Weir topics.

    spark.read.format("weir").option("kafka.bootstrap.servers", "127.0.0.1:9092")
         .option("subscribe", "page-views").load()

Theory of operation. Spark drives a Python data source from three kinds of process: the driver's
planner (options, schema, offsets, partitions), and the executors' Python workers (`read`,
`write`). The reader object is pickled before `partitions()` runs, so each `WeirPartition` carries
everything its `read` needs - the parsed options, one offset range, the Arrow schema - and opens
its own connections inside `read`.

- Batch: `partitions()` resolves the subscription to topic-partitions, the starting and ending
  options to offsets (ListOffsets; latest = the high watermark), and splits the ranges.
- Streaming: an offset is Kafka's JSON, {"topic": {"0": 23}}. `initialOffset` resolves
  startingOffsets; `latestOffset(start, limit)` reads every partition's high watermark and applies
  the read limit (maxOffsetsPerTrigger becomes Spark's `ReadMaxRows`); `partitions(start, end)`
  plans [start, end) per partition. Spark checkpoints the ends, so a restarted query goes on from
  the last committed end: no gap, no record twice.
- `read` fetches its range and yields one `pyarrow.RecordBatch` per Fetch answer, decoded in bulk.
"""

from __future__ import annotations

import json
import logging
import time

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from weir.spark.log_reader import (RangeReader, TopicPartition, discover_partitions, from_json_offsets, list_offsets,
                                   report_data_loss, resolve_ending, resolve_starting, to_json_offsets)
from weir.spark.options import EARLIEST, LATEST, OptionError, ReadOptions, parse_read_options, parse_write_options
from weir.spark.planning import OffsetRange, rate_limit, split_ranges
from weir.spark.records import ArrowBatches

try:  # Spark 4.2+: admission control (read limits) and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
    HAS_READ_LIMITS = True
except ImportError:  # pragma: no cover - older PySpark: see README, "maxOffsetsPerTrigger"
    HAS_READ_LIMITS = False
    ReadAllAvailable = ReadMaxRows = None

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

log = logging.getLogger("weir.spark")

SOURCE_NAME = "weir"
HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema (every column nullable, as Spark declares it)."""
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def check_projection(schema: StructType, include_headers: bool) -> StructType:
    """A schema given with `.schema(...)` picks columns of the Kafka source's (any of them, in any
    order, types unchanged): Spark's Python data source API cannot push a query's columns down, so
    this is how a query reads fewer. Anything else is an OptionError naming the column."""
    columns = {f.name: f.dataType for f in kafka_schema(include_headers).fields}
    for f in schema.fields:
        if f.name not in columns:
            hint = " (with includeHeaders=true)" if f.name == "headers" else ""
            raise OptionError(f"column {f.name!r} is not one of the Kafka source's: {', '.join(columns)}{hint}")
        if f.dataType != columns[f.name]:
            raise OptionError(f"column {f.name!r} is {columns[f.name].simpleString()}, not "
                              f"{f.dataType.simpleString()}")
    return schema


def arrow_schema(schema: StructType):
    """The Arrow schema Spark checks a reader's batches against (timestamps in UTC, microseconds)."""
    try:
        from pyspark.sql.pandas.types import to_arrow_schema
        return to_arrow_schema(schema, timezone="UTC")
    except ImportError:  # pragma: no cover
        import pyarrow as pa
        types = {"key": pa.binary(), "value": pa.binary(), "topic": pa.string(), "partition": pa.int32(),
                 "offset": pa.int64(), "timestamp": pa.timestamp("us", tz="UTC"), "timestampType": pa.int32(),
                 "headers": pa.list_(pa.field("element", pa.struct([("key", pa.string()),
                                                                    ("value", pa.binary())])))}
        return pa.schema([pa.field(f.name, types[f.name]) for f in schema.fields])


class WeirDataSource(DataSource):
    """`format("weir")`: options as in Spark's Kafka source (see weir/spark/README.md)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        """Called when a read's DataFrame is defined: check the options here, before any query."""
        return kafka_schema(parse_read_options(self.options, streaming=None).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_read_options(self.options, streaming=False)
        return WeirBatchReader(opts, check_projection(schema, opts.include_headers))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_read_options(self.options, streaming=True)
        return WeirStreamReader(opts, check_projection(schema, opts.include_headers))

    def writer(self, schema: StructType, overwrite: bool):
        from weir.spark.sink import WeirWriter
        if overwrite:
            raise OptionError("a Weir topic is append-only: use mode('append')")
        return WeirWriter(parse_write_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool):
        from weir.spark.sink import WeirStreamWriter
        if overwrite:
            raise OptionError("a Weir topic is append-only: use outputMode('append') or 'update'")
        return WeirStreamWriter(parse_write_options(self.options), schema)


class WeirPartition(InputPartition):
    """One offset range of one topic-partition, with all that `read` needs to fetch it."""

    def __init__(self, opts: ReadOptions, offset_range: OffsetRange, schema_json: str) -> None:
        super().__init__(offset_range)
        self.opts = opts
        self.range = offset_range
        self.schema_json = schema_json

    def __repr__(self) -> str:
        r = self.range
        return f"WeirPartition({r.topic}-{r.partition} [{r.start}, {r.end}))"


def read_partition(partition: WeirPartition):
    """Yield the records of the partition's range as Arrow record batches."""
    if not isinstance(partition, WeirPartition):
        return  # PySpark reads a plan of no partitions as one InputPartition(None): a read with no records
    schema = arrow_schema(StructType.fromJson(json.loads(partition.schema_json)))
    r = partition.range
    batches = ArrowBatches(r.topic, r.partition, schema)
    for columns in RangeReader(partition.opts, r.topic, r.partition, r.start, r.end):
        yield batches.batch(columns)


def plan_partitions(opts: ReadOptions, schema: StructType, start: dict[TopicPartition, int],
                    end: dict[TopicPartition, int]) -> list[WeirPartition]:
    ranges = [OffsetRange(t, p, start[(t, p)], end[(t, p)]) for t, p in sorted(end) if (t, p) in start]
    split = split_ranges(ranges, opts.max_records_per_partition, opts.min_partitions)
    schema_json = schema.json()
    return [WeirPartition(opts, r, schema_json) for r in split]


class WeirBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self):
        opts = self.opts
        tps = discover_partitions(opts)
        if not tps:
            log.warning("the subscription matches no partition: the result is empty")
            return []
        start = resolve_starting(opts, tps)
        end = resolve_ending(opts, tps)
        for tp in tps:
            if start[tp] > end[tp]:
                if opts.ending.is_explicit(tp):
                    raise OptionError(f"{tp[0]}-{tp[1]}: the starting offset {start[tp]} is after the "
                                      f"ending offset {end[tp]}")
                report_data_loss(opts, f"{tp[0]}-{tp[1]}: starting offset {start[tp]} is past the end "
                                       f"of the log ({end[tp]})")
                start[tp] = end[tp]
        return plan_partitions(opts, self.schema, start, end)

    def read(self, partition: WeirPartition):
        return read_partition(partition)


class WeirStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._available_now: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow's target
        self._latest: dict[TopicPartition, int] | None = None
        self._previous_end: dict[TopicPartition, int] | None = None  # for PySpark without read limits
        self._last_trigger_ms = 0.0  # minOffsetsPerTrigger: when a micro-batch last went ahead
        self.clock_ms = lambda: time.monotonic() * 1000

    # -- offsets -----------------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        tps = discover_partitions(self.opts)
        start = resolve_starting(self.opts, tps)
        self._previous_end = start
        return to_json_offsets(start)

    def _latest_now(self) -> dict[TopicPartition, int]:
        tps = discover_partitions(self.opts)
        latest = list_offsets(self.opts, {tp: LATEST for tp in tps})
        self._latest = latest
        return latest

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: read up to what is committed now, in as many batches as the limit needs."""
        self._available_now = self._latest_now()

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        latest = dict(self._available_now) if self._available_now is not None else self._latest_now()
        if start is None:  # PySpark < 4.2 calls latestOffset() with no start and no limit
            begin = self._previous_end
            max_rows = self.opts.max_offsets_per_trigger
        else:
            begin = from_json_offsets(start)
            max_rows = limit.max_rows if HAS_READ_LIMITS and isinstance(limit, ReadMaxRows) else None
        if begin is not None and self._delay_batch(begin, latest):
            return to_json_offsets(begin)
        if begin is not None:
            # new partitions start at their earliest offset; a partition whose log now ends below
            # where we are goes back (partitions() reports the loss, as Spark's Kafka source does)
            new = [tp for tp in latest if tp not in begin]
            begin = {**begin, **list_offsets(self.opts, {tp: EARLIEST for tp in new})}
            if max_rows:
                latest = rate_limit(begin, latest, max_rows)
            # partitions we were reading that are gone leave the offset: partitions() reports the loss
        self._previous_end = latest
        return to_json_offsets(latest)

    def _delay_batch(self, begin: dict[TopicPartition, int], latest: dict[TopicPartition, int]) -> bool:
        """minOffsetsPerTrigger: whether to wait (no micro-batch now) for more new offsets, until
        maxTriggerDelay has passed since the last micro-batch (KafkaMicroBatchStream.delayBatch)."""
        if not self.opts.min_offsets_per_trigger or self._available_now is not None:
            return False  # Trigger.AvailableNow reads what there is, without waiting
        now = self.clock_ms()
        if now - self._last_trigger_ms < self.opts.max_trigger_delay_ms:
            new = sum(max(0, off - begin.get(tp, 0)) for tp, off in latest.items())
            if new < self.opts.min_offsets_per_trigger:
                return True
        self._last_trigger_ms = now
        return False

    def reportLatestOffset(self):
        return None if self._latest is None else to_json_offsets(self._latest)

    # -- planning ----------------------------------------------------------------------------------

    def partitions(self, start: dict, end: dict):
        begin, finish = from_json_offsets(start), from_json_offsets(end)
        # as KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets: partitions gone (a topic deleted)
        # and partitions added whose log no longer starts at 0 are data loss
        gone = sorted(set(begin) - set(finish))
        if gone:
            report_data_loss(self.opts, f"{', '.join(f'{t}-{p}' for t, p in gone)} are gone")
        new = [tp for tp in finish if tp not in begin]
        if new:
            begin.update(list_offsets(self.opts, {tp: EARLIEST for tp in new}))
            for tp in new:
                if begin[tp] != 0:
                    report_data_loss(self.opts, f"Added partition {tp[0]}-{tp[1]} starts from {begin[tp]} "
                                                "instead of 0")
        for tp in finish:
            if finish[tp] < begin[tp]:
                report_data_loss(self.opts, f"{tp[0]}-{tp[1]}: offset went back from {begin[tp]} to "
                                            f"{finish[tp]}")
                begin[tp] = finish[tp]
        return plan_partitions(self.opts, self.schema, begin, finish)

    def read(self, partition: WeirPartition):
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        pass  # Spark's checkpoint is the only record of progress: nothing to tell the brokers

    def stop(self) -> None:
        pass  # no connection outlives a call
