"""Named listeners: a broker serves each, registers each in ZooKeeper in Kafka's format, and
answers Metadata with the endpoints of the listener the client came on."""

import asyncio
import json

from kazoo.client import KazooClient

from weir.client import BrokerConnection
from weir.lab.local_cluster import BrokerProcess
from weir.lab.zookeeper_server import free_port
from weir.protocol.versions import ApiKey

FAST = {"zookeeper.session.timeout.ms": "6000", "replica.fetch.backoff.ms": "200"}  # as tests/conftest.py's


def stop_all(started: list) -> None:
    for process in started:
        process.kill()
        print(process.output())  # shown by pytest when the test fails


async def brokers_seen_on(port: int) -> list[tuple[int, str, int]]:
    async with await BrokerConnection.open("127.0.0.1", port, timeout_s=10) as conn:
        response = await conn.request(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False,
                                                            "include_topic_authorized_operations": False})
        described = await conn.request(ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
    assert [(b.broker_id, b.host, b.port) for b in described.brokers] == \
        [(b.node_id, b.host, b.port) for b in response.brokers]
    return sorted((b.node_id, b.host, b.port) for b in response.brokers)


def test_metadata_answers_the_listener_the_client_came_on(tmp_path, zookeeper_connect):
    started = []
    try:
        ports = {}
        for broker_id in (0, 1):
            internal, external = free_port(), free_port()
            ports[broker_id] = (internal, external)
            overrides = {**FAST, **{"listeners": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
                                  "advertised.listeners": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://localhost:{external}",
                                  "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
                                  "inter.broker.listener.name": "INTERNAL"}}
            process = BrokerProcess(broker_id, tmp_path / f"broker-{broker_id}", zookeeper_connect, internal,
                                    overrides=overrides)
            started.append(process)
        for process in started:
            process.start(wait=False)
        for process in started:
            process.wait_ready()

        async def check() -> None:
            for _ in range(100):
                if len(await brokers_seen_on(ports[0][0])) == 2:
                    break
                await asyncio.sleep(0.1)
            assert await brokers_seen_on(ports[0][0]) == [(0, "127.0.0.1", ports[0][0]), (1, "127.0.0.1", ports[1][0])]
            assert await brokers_seen_on(ports[1][1]) == [(0, "localhost", ports[0][1]), (1, "localhost", ports[1][1])]

        asyncio.run(check())
        zk = KazooClient(hosts=zookeeper_connect)
        zk.start()
        try:
            registration = json.loads(zk.get("/brokers/ids/1")[0])
        finally:
            zk.stop()
        assert registration["endpoints"] == [f"INTERNAL://127.0.0.1:{ports[1][0]}", f"EXTERNAL://localhost:{ports[1][1]}"]
        assert registration["listener_security_protocol_map"] == {"INTERNAL": "PLAINTEXT", "EXTERNAL": "PLAINTEXT"}
        assert registration["host"] == "127.0.0.1" and registration["port"] == ports[1][0]  # the first PLAINTEXT one
    finally:
        stop_all(started)
