"""An executor's read of one partition's range (RangeReader), against a real broker: the Fetch at
the next position is on its way when the caller takes records, a read stopped early leaves
nothing running, and read_committed drops aborted transactions as a consumer does."""

import gc
import logging

import pytest
from confluent_kafka import Producer
from helpers import create_topic, produce

from weir.spark.log_reader import RangeReader
from weir.spark.options import parse_read_options

RECORDS = 200
BATCH = 20


@pytest.fixture
def topic(broker):
    create_topic(broker.bootstrap, "ranged")
    for start in range(0, RECORDS, BATCH):  # a producer each: batches of BATCH records
        produce(broker.bootstrap, "ranged", [b"v%03d" % i for i in range(start, start + BATCH)], start=start)
    return "ranged"


def reader(broker, topic: str, start: int = 0, end: int = RECORDS) -> RangeReader:
    # a small fetchMaxBytes: a batch or so per Fetch
    opts = parse_read_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
                               "fetchMaxBytes": "600"}, streaming=False)
    return RangeReader(opts, topic, 0, start, end)


def fetches_of(monkeypatch) -> list[int]:
    """The positions RangeReader fetches at, in the order their requests start."""
    positions = []
    fetch = RangeReader._fetch

    async def recording(self, client, pos):
        positions.append(pos)
        return await fetch(self, client, pos)
    monkeypatch.setattr(RangeReader, "_fetch", recording)
    return positions


def test_the_next_fetch_is_sent_before_the_records_are_handed_over(broker, topic, monkeypatch):
    positions = fetches_of(monkeypatch)
    batches = iter(reader(broker, topic, 0, RECORDS))
    first = next(batches)
    assert positions == [0, first.next_offset]
    offsets = first.offsets.to_pylist()
    for columns in batches:
        offsets += columns.offsets.to_pylist()
    assert offsets == list(range(RECORDS))
    assert len(positions) > 3 and positions == sorted(set(positions))


def test_a_read_stopped_early_cancels_the_fetch_sent_ahead(broker, topic, monkeypatch, caplog):
    positions = fetches_of(monkeypatch)
    batches = iter(reader(broker, topic, 0, RECORDS))
    first = next(batches)
    assert first.next_offset < RECORDS and len(positions) == 2
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        batches.close()
        gc.collect()
    # no task left pending, or failed with nobody to hear it ("Task exception was never retrieved")
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
    # and a new reader of the rest reads it whole
    rest = [o for columns in reader(broker, topic, first.next_offset, RECORDS) for o in columns.offsets.to_pylist()]
    assert rest == list(range(first.next_offset, RECORDS))


def test_read_committed_drops_the_aborted_transactions_each_fetch_answer_lists(broker):
    """KIP-98: a read_committed Fetch answer lists the aborted transactions among its records; the
    reader drops their records, as a read_committed consumer does, over answers of a batch or so
    each. read_uncommitted keeps them. Transaction markers are never rows."""
    create_topic(broker.bootstrap, "txns")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "spark-range-reader"})
    producer.init_transactions(30)
    for commit, values in ((True, [b"c0", b"c1"]), (False, [b"a0", b"a1", b"a2"]), (True, [b"c2"])):
        producer.begin_transaction()
        for value in values:
            producer.produce("txns", value, partition=0)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    end = 9  # 6 records and 3 markers

    def values(isolation: str) -> list[bytes]:
        opts = parse_read_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "txns",
                                   "kafka.isolation.level": isolation, "fetchMaxBytes": "200"}, streaming=False)
        return [v for columns in RangeReader(opts, "txns", 0, 0, end) for v in columns.values.to_pylist()]
    assert values("read_committed") == [b"c0", b"c1", b"c2"]
    assert values("read_uncommitted") == [b"c0", b"c1", b"a0", b"a1", b"a2", b"c2"]
