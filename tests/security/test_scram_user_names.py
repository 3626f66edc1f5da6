"""SCRAM user names in ZooKeeper as Kafka keeps them: /config/users/<name URL-encoded by Kafka's
Sanitizer>, so that any name is one znode; the empty name is Kafka's error."""

import asyncio
import os

from kazoo.client import KazooClient

from weir.client import BrokerConnection
from weir.protocol.errors import ErrorCode
from weir.protocol.scram import MECHANISM_TYPE_OF, salted_password
from weir.protocol.versions import ApiKey

SHA_512 = "SCRAM-SHA-512"
# name -> its znode, as Kafka's Sanitizer.sanitize writes it (ZooKeeper refuses '.' and '..' as
# they are: Weir encodes their dots, which Sanitizer.desanitize reads back)
NAMES = {"a/b": "a%2Fb", "al ice*~+é": "al%20ice%2A%7E%2B%C3%A9", ".": "%2E", "..": "%2E%2E", "bob.x-y_z": "bob.x-y_z"}


def upsertion(name: str) -> dict:
    salt = os.urandom(24)
    return {"name": name, "mechanism": MECHANISM_TYPE_OF[SHA_512], "iterations": 4096, "salt": salt,
            "salted_password": salted_password(SHA_512, "secret", salt, 4096)}


def test_user_names_are_sanitized_as_kafka_does_and_the_empty_name_is_refused(broker, zookeeper_connect):
    async def scenario():
        async with await BrokerConnection.open("127.0.0.1", broker.port) as conn:
            altered = await conn.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {
                "deletions": [], "upsertions": [upsertion(name) for name in [*NAMES, ""]]})
            assert {r.user: r.error_code for r in altered.results} == {
                **{name: ErrorCode.none for name in NAMES}, "": ErrorCode.unacceptable_credential}
            described = await conn.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {
                "users": [{"name": name} for name in [*NAMES, "", ""]]})
            assert [(r.user, r.error_code, r.error_message) for r in described.results] == [
                *((name, ErrorCode.none, None) for name in NAMES),
                ("", ErrorCode.resource_not_found, "Username must not be empty")]
            every = await conn.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
            assert sorted(r.user for r in every.results) == sorted(NAMES)

    asyncio.run(scenario())
    zk = KazooClient(hosts=zookeeper_connect)
    zk.start(timeout=10)
    try:
        assert sorted(zk.get_children("/config/users")) == sorted(NAMES.values())
    finally:
        zk.stop()
        zk.close()
    assert "Traceback" not in broker.output()
