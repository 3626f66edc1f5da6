"""ACLs in ZooKeeper between brokers (no broker processes): a change written through one broker's
AclStore reaches another's authorizer by Kafka's change notices, cached decisions included; a
broker that starts later reads what is stored; old notices are deleted."""

import asyncio

from weir.coordination.zk_client import ZkSession
from weir.security import acl_store
from weir.security.acl_store import AclStore
from weir.security.acls import AclEntry, Authorizer, Operation, PatternType, Permission, ResourcePattern, ResourceType
from weir.security.authorization import RequestAuthorizer

ALICE = "User:alice"
WRITE, TOPIC = Operation.WRITE, ResourceType.TOPIC


async def until(condition, what: str, timeout_s: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.02)


def test_changes_reach_every_broker_and_a_new_one_loads_them(zookeeper_connect, monkeypatch):
    async def scenario() -> None:
        sessions, stores = [], []

        async def broker() -> AclStore:
            session = await ZkSession(zookeeper_connect).start()
            store = AclStore(session, RequestAuthorizer(Authorizer()))
            await store.start()
            sessions.append(session)
            stores.append(store)
            return store

        def may_write(store: AclStore, topic: str) -> bool:
            return store.authz.allows(ALICE, "10.0.0.1", WRITE, TOPIC, topic)

        try:
            first, second = await broker(), await broker()
            prefixed = ResourcePattern(TOPIC, "pre", PatternType.PREFIXED)
            grant = AclEntry(ALICE, "*", WRITE, Permission.ALLOW)
            assert not may_write(second, "pre-x")  # cached: the notice must clear it
            assert await first.update(prefixed, lambda old: old | {grant}) == frozenset()
            assert may_write(first, "pre-x")
            await until(lambda: may_write(second, "pre-x"), "the grant to reach the second broker")
            literal = ResourcePattern(TOPIC, "orders")
            await second.update(literal, lambda old: old | {grant})
            await second.update(prefixed, lambda old: frozenset())  # deleted through the other broker
            await until(lambda: not may_write(first, "pre-x") and may_write(first, "orders"),
                        "the deletion and the literal grant to reach the first broker")
            third = await broker()
            assert may_write(third, "orders") and not may_write(third, "pre-x")
            stat = await sessions[0].wait(sessions[0].client.exists_async("/kafka-acl-extended/prefixed/Topic/pre"))
            assert stat is None  # no ACLs left: no znode
            monkeypatch.setattr(acl_store, "CHANGE_EXPIRY_S", -60)  # every notice is old now
            await first.update(literal, lambda old: frozenset())
            await until(lambda: not may_write(second, "orders") and not may_write(third, "orders"),
                        "the last change to reach every broker")
            client = sessions[0].client
            for _ in range(200):
                notices = [n for root in ("/kafka-acl-changes", "/kafka-acl-extended-changes")
                           for n in await sessions[0].wait(client.get_children_async(root))]
                if not notices:
                    break
                await asyncio.sleep(0.05)
            assert notices == []
        finally:
            for store in stores:
                await store.stop()
            for session in sessions:
                await session.close()

    asyncio.run(scenario())
