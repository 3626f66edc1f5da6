"""The idempotent producer: retries through a leader failover write each record exactly once, in order."""

from cluster_tools import SteadyProducer, create_topic, partition_metadata, read_all, wait_until
from kafka import KafkaProducer


def test_idempotent_producer_survives_leader_kill_without_duplicates_or_reordering(cluster):
    create_topic(cluster.bootstrap, "exactly", 3, 3, **{"min.insync.replicas": "2"})
    producer = SteadyProducer(cluster.bootstrap, "exactly", 3, **{"enable.idempotence": True}).start()
    producer.wait_acked(3000)
    victim = partition_metadata(cluster.bootstrap, "exactly")[0][0]
    cluster.brokers[victim].kill()
    wait_until(lambda: partition_metadata(cluster.bootstrap, "exactly")[0][0] not in (victim, -1), "a new leader")
    producer.wait_acked(len(producer.acked) + 3000)
    producer.stop()
    assert not producer.errors, producer.errors[:5]
    records = read_all(cluster.bootstrap, "exactly", 3)
    for partition, values in records.items():
        assert len(values) == len(set(values)), f"partition {partition} has duplicates"
        sequence = [int(v[1:]) for v in values]
        assert sequence == sorted(sequence), f"partition {partition} is out of order"
    present = {v for values in records.values() for v in values}
    assert producer.acked <= present, "an acknowledged record is missing"


def test_kafka_python_with_its_default_idempotence(broker):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")  # idempotence on by default
    futures = [producer.send("defaults", value=f"m{i}".encode(), partition=0) for i in range(1000)]
    producer.flush(30)
    offsets = [f.get(timeout=0).offset for f in futures]
    producer.close()
    assert offsets == list(range(1000))
