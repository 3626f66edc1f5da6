"""A broker restarted on a log directory damaged while it was down starts and serves, as Kafka's
does: what it cannot use it rebuilds from the log (indexes, producer state), puts within bounds
(the checkpointed high watermark) or sets aside, and real clients read every record they wrote."""

import json

import pytest
from clients import confluent_consume, confluent_produce
from confluent_kafka import Producer
from test_durability import create_topic
from waiting import watermarks


def values(messages):
    return [m.value for m in messages]


def produce_idempotently(bootstrap, topic, payloads):
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for payload in payloads:
        producer.produce(topic, payload, partition=0)
        producer.flush(30)  # one batch each: several segments of a few batches
    assert producer.flush(30) == 0


def test_restart_on_damaged_index_checkpoint_and_producer_snapshot(broker):
    create_topic(broker.bootstrap, "damaged", config={"segment.bytes": "2000", "index.interval.bytes": "100"})
    written = [b"record-%03d-" % i + b"x" * 200 for i in range(40)]
    produce_idempotently(broker.bootstrap, "damaged", written)
    broker.stop()
    assert "shut down cleanly" in broker.output()

    partition = broker.data_dir / "damaged-0"
    first_index = sorted(partition.glob("*.index"))[0]
    assert first_index.stat().st_size > 0, "the first segment has index entries"
    first_index.write_bytes(b"\xff" * first_index.stat().st_size)  # negative positions
    hw = broker.data_dir / "replication-offset-checkpoint"
    assert "damaged 0 40" in hw.read_text()
    hw.write_text(hw.read_text().replace("damaged 0 40", "damaged 0 -7"))
    snapshot = partition / "producer-state.json"
    saved = json.loads(snapshot.read_text())
    saved["state"] = saved["state"][:len(saved["state"]) // 2]  # the producer table cut in half
    snapshot.write_text(json.dumps(saved))

    broker.start()  # each of the three failed the start before
    assert watermarks(broker.bootstrap, "damaged") == (0, 40)
    assert values(confluent_consume(broker.bootstrap, "damaged", 1, 40)) == written
    more = [b"after-%d" % i for i in range(5)]
    confluent_produce(broker.bootstrap, "damaged", [(0, None, v, (), 0) for v in more])
    assert values(confluent_consume(broker.bootstrap, "damaged", 1, 45)) == written + more


def test_restart_after_a_flushed_segment_was_emptied_sets_the_rest_aside(broker):
    create_topic(broker.bootstrap, "holed", config={"segment.bytes": "2000"})
    written = [b"record-%03d-" % i + b"x" * 200 for i in range(40)]
    produce_idempotently(broker.bootstrap, "holed", written)
    broker.stop()
    partition = broker.data_dir / "holed-0"
    segments = sorted(partition.glob("*.log"))
    assert len(segments) >= 4
    hole = int(segments[1].stem)
    after = {p.name: p.read_bytes() for p in segments[2:]}
    segments[1].write_bytes(b"")  # emptied by hand or by the file system

    broker.start()
    assert watermarks(broker.bootstrap, "holed") == (0, hole)
    assert values(confluent_consume(broker.bootstrap, "holed", 1, hole)) == written[:hole]
    [aside] = partition.glob("set-aside-*")
    assert {name: (aside / name).read_bytes() for name in after} == after, "the flushed data is kept"
    assert "no longer served" in broker.output()
    confluent_produce(broker.bootstrap, "holed", [(0, None, b"after", (), 0)])
    assert values(confluent_consume(broker.bootstrap, "holed", 1, hole + 1)) == written[:hole] + [b"after"]


@pytest.mark.parametrize("stale", ["7 0", "7 5"])
def test_restart_on_a_leader_epoch_checkpoint_that_does_not_match_the_log(broker, stale):
    """A checkpoint naming leader epoch 7 from offset 0, or from offset 5 inside the one batch
    that holds offsets 0-9 (the batch's own epoch agrees with the entry before it), where every
    batch says epoch 0 or 1: the broker rebuilds it from the batches, takes the controller's
    (lower) epoch, and serves."""
    create_topic(broker.bootstrap, "epochs")
    written = [b"record-%d" % i for i in range(10)]
    confluent_produce(broker.bootstrap, "epochs", [(0, None, v, (), 0) for v in written], **{"linger.ms": 1000})
    broker.stop()
    checkpoint = broker.data_dir / "epochs-0" / "leader-epoch-checkpoint"
    entries = checkpoint.read_text().splitlines()[2:] if stale == "7 5" else []
    checkpoint.write_text("\n".join(["0", str(len(entries) + 1), *entries, stale]) + "\n")

    broker.start()  # failed "leader epochs only grow" at every start before
    assert values(confluent_consume(broker.bootstrap, "epochs", 1, 10)) == written
    confluent_produce(broker.bootstrap, "epochs", [(0, None, b"after", (), 0)])
    assert values(confluent_consume(broker.bootstrap, "epochs", 1, 11)) == written + [b"after"]
    assert stale not in checkpoint.read_text()
    assert "rebuilding it from the batches" in broker.output()
