"""Controlled shutdown across a lost ZooKeeper session, on real brokers, a real ZooKeeper and the
userspace network of `weir verify` (every byte on 127.0.0.1).

The request to move leadership away is an ephemeral znode: a session that expires during the wait
takes it along, before any controller read it. The broker must then ask again once it has
registered in its new session (as Kafka's broker retries its ControlledShutdown), and not wait out
the whole timeout while still leading."""

import json
import time

import pytest
from cluster_tools import admin, partition_metadata, wait_until
from confluent_kafka.admin import NewTopic
from kazoo.client import KazooClient

from weir.broker.server import CONTROLLED_SHUTDOWN_TIMEOUT_S
from weir.verify.cluster import Cluster
from weir.verify.network import ZOOKEEPER, broker_node
from weir.zk.formats import CONTROLLED_SHUTDOWN_PATH


@pytest.fixture
def start_cluster(tmp_path):
    """`start_cluster(**settings)`: three brokers behind weir verify's network, and `direct`, a
    ZooKeeper client of the test's own, straight to ZooKeeper (no proxy, never cut)."""
    started = []

    def start(**settings):
        cluster = Cluster(tmp_path, 3, settings)
        started.append(cluster)
        cluster.start()
        cluster.direct = KazooClient(hosts=f"127.0.0.1:{cluster.zookeeper.port}")
        cluster.direct.start(timeout=30)
        return cluster
    yield start
    for cluster in started:
        if getattr(cluster, "direct", None) is not None:
            cluster.direct.stop()
            cluster.direct.close()
        cluster.save_logs()
        cluster.teardown()


def controller_of(cluster) -> int:
    return json.loads(cluster.direct.get("/controller")[0])["brokerid"]


def led_by(cluster, leader: int) -> list[int]:
    """Topic "handed", one partition on all three brokers, led by `leader` with a full ISR; the
    other brokers."""
    others = [b for b in range(3) if b != leader]
    client = admin(cluster.bootstrap)  # must outlive the future
    client.create_topics([NewTopic("handed", 1, replica_assignment=[[leader, *others]])])["handed"].result(30)
    wait_until(lambda: partition_metadata(cluster.bootstrap, "handed")[0][0] == leader
               and len(partition_metadata(cluster.bootstrap, "handed")[0][2]) == 3, "the leader in place, ISR full")
    return others


def test_a_shutdown_request_lost_with_its_session_is_made_again(start_cluster):
    cluster = start_cluster()
    zookeeper = cluster.direct
    # The broker that stops leads the partition and is not the controller, which must not see its request.
    controller = controller_of(cluster)
    leader = next(b for b in range(3) if b != controller)
    others = led_by(cluster, leader)
    cluster.network.cut([broker_node(b) for b in others], [ZOOKEEPER])
    stopping = cluster.brokers[leader]
    began = time.monotonic()
    cluster.terminate(leader)
    request = f"{CONTROLLED_SHUTDOWN_PATH}/{leader}"
    wait_until(lambda: zookeeper.exists(request) is not None, "the leader's controlled shutdown request")
    cluster.network.cut([broker_node(leader)], [ZOOKEEPER])
    # Every session expires, the request with it, before any controller has read it.
    wait_until(lambda: not zookeeper.get_children("/brokers/ids") and zookeeper.exists(request) is None,
               "every broker's session to expire")
    # The others come back first (the controller treats them as bounced: out of the ISR), then the leader.
    cluster.network.set_cuts({(broker_node(leader), ZOOKEEPER), (ZOOKEEPER, broker_node(leader))})
    wait_until(lambda: sorted(map(int, zookeeper.get_children("/brokers/ids"))) == others,
               "the other brokers registered again")
    cluster.network.heal()
    wait_until(lambda: not stopping.running, "the leader to stop", timeout_s=CONTROLLED_SHUTDOWN_TIMEOUT_S + 30)
    output = stopping.output()
    assert "controlled shutdown: asked again" in output
    assert "controlled shutdown: leadership moved" in output, output[-3000:]
    assert time.monotonic() - began < CONTROLLED_SHUTDOWN_TIMEOUT_S
    wait_until(lambda: partition_metadata(cluster.bootstrap, "handed")[0][0] in others,
               "a broker still running to lead")


def test_a_broker_that_cannot_reach_zookeeper_still_stops(start_cluster):
    """Its controlled shutdown request goes unanswered (kazoo holds it, reconnecting for ever): the
    broker gives up on it after a session timeout, asks again after the retry backoff, and stops
    once controlled.shutdown.max.retries (3) requests have failed, before the deadline; as the
    controller, it gives up deleting /controller after a session timeout too. It once waited on
    the first request, and a SIGTERM never stopped it."""
    cluster = start_cluster(**{"controlled.shutdown.retry.backoff.ms": "500"})
    # the controller leads: its stop also gives up /controller, another request kazoo would hold
    leader = controller_of(cluster)
    led_by(cluster, leader)
    stopping = cluster.brokers[leader]
    cluster.network.cut([broker_node(leader)], [ZOOKEEPER])
    wait_until(lambda: "ZooKeeper connection suspended" in stopping.output(), "the leader to miss ZooKeeper")
    began = time.monotonic()
    cluster.terminate(leader)
    wait_until(lambda: not stopping.running, "the leader to stop", timeout_s=CONTROLLED_SHUTDOWN_TIMEOUT_S + 15)
    output = stopping.output()
    assert output.count("cannot request controlled shutdown") == 3, output[-3000:]
    assert "controlled shutdown: 3 requests failed (controlled.shutdown.max.retries); stopping anyway" in output
    assert time.monotonic() - began < CONTROLLED_SHUTDOWN_TIMEOUT_S
