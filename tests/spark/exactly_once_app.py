"""A Structured Streaming query that copies one topic to another with the sink's exactly-once mode.

    python exactly_once_app.py BOOTSTRAP CHECKPOINT run      (runs until killed)
    python exactly_once_app.py BOOTSTRAP CHECKPOINT drain    (Trigger.AvailableNow: to the end, then exits)

Input `eo-in` is read with read_committed, in small micro-batches while it runs (so that a kill finds
transactions open) and larger ones when it drains; every value goes to `eo-out`
(deliveryGuarantee=exactly-once, transactionalIdPrefix `eo-copy`)."""

import sys

from weir.spark import local_session

INPUT, OUTPUT, PREFIX = "eo-in", "eo-out", "eo-copy"


def main(bootstrap: str, checkpoint: str, mode: str) -> None:
    spark = local_session("weir-exactly-once", cores=2, **{"spark.ui.showConsoleProgress": "false"})
    rows = (spark.readStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", INPUT).option("startingOffsets", "earliest")
            .option("kafka.isolation.level", "read_committed").option("maxOffsetsPerTrigger", "1000" if mode == "drain" else "150").load())
    writer = (rows.select("key", "value").writeStream.format("weir")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", OUTPUT)
              .option("deliveryGuarantee", "exactly-once").option("transactionalIdPrefix", PREFIX)
              .option("checkpointLocation", checkpoint))
    writer = writer.trigger(availableNow=True) if mode == "drain" else writer.trigger(processingTime="0 seconds")
    query = writer.start()
    print("started", flush=True)
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
