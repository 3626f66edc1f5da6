"""A broker that cannot prove its ZooKeeper session is alive stops acknowledging writes."""

from cluster_tools import create_topic, wait_until
from confluent_kafka import Producer

from weir.lab.local_cluster import BrokerProcess
from weir.lab.zookeeper_server import ZooKeeperServer


def try_produce(bootstrap: str) -> str:
    """One acks=all write, no retries: 'ok' or the error's name."""
    outcome = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0, "message.timeout.ms": 3000})
    producer.produce("guarded", b"x", partition=0, on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(10)
    return "ok" if outcome and outcome[0] is None else (outcome[0].name() if outcome else "no answer")


def test_leader_stops_acking_while_its_zookeeper_session_is_suspended(tmp_path):
    zookeeper = ZooKeeperServer(tmp_path / "zookeeper").start()  # our own: this test pauses it
    broker = BrokerProcess(0, tmp_path / "broker", zookeeper.connect_string,
                           overrides={"zookeeper.session.timeout.ms": "6000"}).start()
    try:
        create_topic(broker.bootstrap, "guarded", 1, 1)
        assert try_produce(broker.bootstrap) == "ok"
        zookeeper.pause()
        wait_until(lambda: "suspended" in broker.output(), "the broker to notice the silent ZooKeeper")
        assert try_produce(broker.bootstrap) != "ok"
        assert "refused: not the leader of guarded-0" in broker.output()  # NOT_LEADER_OR_FOLLOWER
        zookeeper.resume()
        wait_until(lambda: try_produce(broker.bootstrap) == "ok", "acknowledgements once the session is back")
    finally:
        broker.kill()
        zookeeper.stop()
        print(broker.output())
