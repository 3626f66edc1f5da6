"""Client quotas in ZooKeeper between brokers (no broker processes): a change through one
broker's store reaches another's QuotaBook by Kafka's /config/changes notices, whatever wrote
them (Kafka's version 1 and 2 notices; notices about topics are passed over, damaged ones
skipped); a store started later reads what is stored."""

import asyncio

from weir.coordination.client_quota_store import ClientQuotaStore
from weir.coordination.zk_client import ZkSession
from weir.quotas.client_quotas import QuotaBook
from weir.quotas.entities import entity


async def until(condition, what: str, timeout_s: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.02)


def test_changes_reach_another_broker_whoever_wrote_them(zookeeper_connect):
    async def scenario() -> None:
        sessions, stores = [], []

        async def broker() -> ClientQuotaStore:
            session = await ZkSession(zookeeper_connect).start()
            store = ClientQuotaStore(session, QuotaBook())
            await store.start()
            sessions.append(session)
            stores.append(store)
            return store

        try:
            first, second = await broker(), await broker()
            await first.alter(entity(user="alice", client_id=None), [("producer_byte_rate", 1000.0, False)])
            await until(lambda: second.book.get(entity(user="alice", client_id=None)) == {"producer_byte_rate": 1000.0},
                        "the change to reach the second broker")
            client = sessions[0].client
            for path, data in (("/config/changes/config_change_", b"{not json"),
                               ("/config/changes/config_change_", b'{"version":2,"entity_path":"topics/t"}')):
                await sessions[0].wait(client.create_async(path, data, sequence=True))
            # Kafka's spelling of a change another tool made, version 1, after the ones to pass over
            await sessions[0].wait(client.create_async("/config/clients/c1", b'{"version":1,"config":'
                                                       b'{"consumer_byte_rate":"2000"}}', makepath=True))
            await sessions[0].wait(client.create_async(
                "/config/changes/config_change_", b'{"version":1,"entity_type":"clients","entity_name":"c1"}',
                sequence=True))
            await until(lambda: second.book.get(entity(client_id="c1")) == {"consumer_byte_rate": 2000.0},
                        "the version 1 notice after the bad ones to apply")
            await second.alter(entity(user="alice", client_id=None), [("producer_byte_rate", 0, True)])
            await until(lambda: first.book.get(entity(user="alice", client_id=None)) == {}, "the removal to reach back")
            assert await sessions[0].wait(client.exists_async("/config/users/alice")) is None  # no znodes left over
            third = await broker()
            assert third.book.get(entity(client_id="c1")) == {"consumer_byte_rate": 2000.0}
        finally:
            for store in stores:
                await store.stop()
            for session in sessions:
                await session.close()

    asyncio.run(scenario())
