"""Followers fetch in sessions (KIP-227): partitions are written in turns, so each turn's partition
is one its followers had stopped naming (nothing moved in it); the leader still reads it for them
and acks=all completes. Every follower has one session per leader, holding the partitions it
follows there, and no replica leaves an ISR."""

from cluster_tools import create_topic, partition_metadata, read_all, wait_until
from confluent_kafka import Producer
from scraping import metric

PARTITIONS = 12
TURNS = (0, 5, 9, 0)
PER_TURN = 200


def test_partitions_written_in_turns_replicate_through_follower_sessions(start_cluster):
    cluster = start_cluster(**{"metrics.port": "0"})
    create_topic(cluster.bootstrap, "turns", PARTITIONS, 3, **{"min.insync.replicas": "3"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5,
                        "message.timeout.ms": 15000})
    failed = []
    for turn, partition in enumerate(TURNS):
        for i in range(PER_TURN):
            producer.produce("turns", b"%d-%d" % (turn, i), partition=partition,
                             on_delivery=lambda err, msg: failed.append(err) if err else None)
        assert producer.flush(30) == 0
        assert failed == [], f"turn {turn} (partition {partition}) was not replicated to all three: {failed[:3]}"

    layout = partition_metadata(cluster.bootstrap, "turns")
    assert all(len(isr) == 3 for _, _, isr in layout.values()), layout
    for broker in cluster.brokers:
        led = sum(leader == broker.broker_id for leader, _, _ in layout.values())
        assert metric(broker, "kafka_server_replicamanager_isrshrinks_total") == 0
        # a session opens with the answer to a follower's first request: for idle partitions, after its wait
        wait_until(lambda: metric(broker, "kafka_server_fetchsessioncache_numincrementalfetchsessions") == 2 * (led > 0),
                   f"broker {broker.broker_id}'s two followers to have a session")
        assert metric(broker, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached") == 2 * led
    written = read_all(cluster.bootstrap, "turns", PARTITIONS)
    for partition in set(TURNS):
        assert written[partition] == [b"%d-%d" % (turn, i) for turn, p in enumerate(TURNS) if p == partition
                                      for i in range(PER_TURN)]
