"""counting_app.py's application written with faust (faust-streaming, on aiokafka): a Table counts
per key; faust creates the table's compacted changelog itself (cleanup.policy=compact, plus the
table's extra_topic_configs), restores the table from it at start and writes it on every change.

    BOOTSTRAP=host:port DATADIR=dir python faust_counting_app.py worker

Prints {"restored": {...}} once the table is recovered; SIGTERM stops the worker gracefully.

faust 0.15.3 loses and repeats records when it restarts with a backlog in its input, whatever the
broker; two patches below fix it:
- Recovery.on_recovery_completed makes the input partitions active before it seeks them to their
  committed offsets, while the consumer still flows from reading the changelog: records fetched in
  that window are processed, fetched again after the seek, and faust's read-offset check then drops
  one and processes another twice per partition (the ordering problem of faust issue 216). Patched:
  the partitions become active once the seek is done.
- the fetcher hands its live set of active partitions to the consumer thread; emptied by faust while
  aiokafka waits for records, it reads as "every partition" to aiokafka, which returns (and moves
  past) input records that faust then drops as not active. Patched: aiokafka gets a copy."""

import json
import os
import sys

import faust
from counting_app import APP_ID, BATCH_BYTES, INPUT, OUTPUT, OVERRIDES, RESET
from faust.tables.recovery import Recovery
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

app = faust.App(APP_ID, broker=f"kafka://{os.environ['BOOTSTRAP']}", store="memory://", web_enabled=False,
                datadir=os.environ["DATADIR"], topic_partitions=2, key_serializer="raw", value_serializer="json",
                producer_max_batch_size=BATCH_BYTES)
words = app.topic(INPUT, key_type=bytes, value_type=bytes, value_serializer="raw")
word_counts = app.topic(OUTPUT, key_type=bytes, value_type=bytes, value_serializer="raw")
# faust sets cleanup.policy=compact on the changelog; the application adds its overrides
counts = app.Table("counts", default=int, key_type=bytes, value_type=int, extra_topic_configs=OVERRIDES)


_on_recovery_completed = Recovery.on_recovery_completed
_fetch_records = AIOKafkaConsumerThread._fetch_records


async def on_recovery_completed(self, generation_id: int = 0) -> None:
    consumer, deferred = self.app.consumer, []
    consumer.resume_partitions = deferred.extend  # shadows the method while faust seeks
    try:
        await _on_recovery_completed(self, generation_id)
    finally:
        del consumer.resume_partitions
    consumer.resume_partitions(deferred)


async def fetch_records(self, consumer, active_partitions, timeout=None, max_records=None):
    active = set(active_partitions)  # a worker's: never None
    return await _fetch_records(self, consumer, active, timeout=timeout, max_records=max_records) if active else {}


Recovery.on_recovery_completed = on_recovery_completed
AIOKafkaConsumerThread._fetch_records = fetch_records


@counts.on_recover
async def restored() -> None:
    # sys.__stdout__: the worker sends what is printed to sys.stdout to its log
    print(json.dumps({"restored": {k.decode(): v for k, v in counts.items()}}), file=sys.__stdout__, flush=True)


@app.agent(words)
async def count(stream):
    async for key, value in stream.items():
        if value == RESET:
            del counts[key]
            await word_counts.send(key=key, value=None)
        else:
            counts[key] += 1
            await word_counts.send(key=key, value=b"%d" % counts[key])


if __name__ == "__main__":
    app.main()
