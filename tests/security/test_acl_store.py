"""ACLs in ZooKeeper between brokers (no broker processes): a change written through one broker's
AclStore reaches another's authorizer by Kafka's change notices, cached decisions included; a
broker that starts later reads what is stored; old notices are deleted."""

import asyncio

import pytest

from weir.coordination import change_notices
from weir.coordination.zk_client import ZkSession
from weir.security.acl_store import AclStore
from weir.security.acls import (AclEntry, Authorizer, Operation, PatternType, Permission, ResourcePattern, ResourceType,
                                encode_entries)
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
            monkeypatch.setattr(change_notices, "CHANGE_EXPIRY_S", -60)  # every notice is old now
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


def test_a_bad_notice_is_skipped_and_later_changes_still_apply(zookeeper_connect):
    """Kafka's ZkNodeChangeNotificationListener: a notice that cannot be read is logged and skipped."""
    async def scenario() -> None:
        session = await ZkSession(zookeeper_connect).start()
        client = session.client
        try:
            for path, data in (("/kafka-acl-changes/acl_changes_", b"NOPE:x"),
                               ("/kafka-acl-changes/acl_changes_", b"no separator"),
                               ("/kafka-acl-extended-changes/acl_changes_", b"{not json")):
                await session.wait(client.create_async(path, data, sequence=True, makepath=True))
            await session.wait(client.create_async("/kafka-acl-changes/acl_changes_x", b"", makepath=True))
            store = AclStore(session, RequestAuthorizer(Authorizer()))
            await store.start()  # bad notices already there do not stop a broker
            try:
                for path, data in (("/kafka-acl-changes/acl_changes_", b"BAD:y"),
                                   ("/kafka-acl-extended-changes/acl_changes_", b'{"version":1}')):
                    await session.wait(client.create_async(path, data, sequence=True))
                # Kafka's spelling of a change another broker made, after the bad ones
                grant = AclEntry(ALICE, "*", WRITE, Permission.ALLOW)
                await session.wait(client.create_async("/kafka-acl/Topic/orders", encode_entries([grant])))
                await session.wait(client.create_async("/kafka-acl-changes/acl_changes_", b"TOPIC:orders",
                                                       sequence=True))
                await until(lambda: store.authz.allows(ALICE, "h", WRITE, TOPIC, "orders"),
                            "the change after the bad notices to apply")
            finally:
                await store.stop()
        finally:
            await session.close()

    asyncio.run(scenario())


def test_a_name_with_a_slash_is_refused_not_stored_in_a_subfolder(zookeeper_connect):
    async def scenario() -> None:
        session = await ZkSession(zookeeper_connect).start()
        store = AclStore(session, RequestAuthorizer(Authorizer()))
        await store.start()
        try:
            grant = AclEntry(ALICE, "*", Operation.READ, Permission.DENY)
            for name in ("team/x", ".", ".."):
                with pytest.raises(Exception):
                    await store.update(ResourcePattern(ResourceType.GROUP, name), lambda old: old | {grant})
            assert await session.wait(session.client.exists_async("/kafka-acl/Group/team")) is None
        finally:
            await store.stop()
            await session.close()

    asyncio.run(scenario())
