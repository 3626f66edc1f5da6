"""Admin requests racing other writers of ZooKeeper (another admin client through another broker):
each is checked again against what the other write left, and answered with Kafka's error code, as
Kafka's controller, applying them one after another, would; never by closing the connection.
Found by the API fuzzer: a CreatePartitions whose topic was deleted between its read and its write
closed its connection ("internal error")."""

import asyncio
import datetime
import uuid
from types import SimpleNamespace

from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.incremental_alter_configs.v1.request import (AlterableConfig, AlterConfigsResource,
                                                             IncrementalAlterConfigsRequest)

from weir.broker.admin_apis import AdminApis
from weir.config.broker_config import BrokerConfig
from weir.coordination.zk_client import ZkSession
from weir.coordination.zk_metadata import ZkMetadataStore
from weir.protocol.errors import ErrorCode
from weir.protocol.header import RequestHeader
from weir.protocol.versions import ApiKey
from weir.zk.model import BrokerInfo, ClusterView, TopicAssignment

BROKERS = (1, 2, 3)


class RacedStore(ZkMetadataStore):
    """The real store, but each of its next `races` writes to ZooKeeper lands only after `race`:
    another writer's change, through a store of its own, made after this store read what it is
    about to replace."""

    race, races = None, 1

    async def _commit_atomic(self, ops, fenced=True):
        if self.race is not None and self.races > 0:
            self.races -= 1
            await self.race()
        return await super()._commit_atomic(ops, fenced)


def race(zookeeper, scenario):
    """`scenario(apis, store, other)`: `apis` answers with a RacedStore `store`; `other` is the
    other writer's store. Each runs on a session of its own in a chroot of its own."""
    chroot = f"{zookeeper.connect_string}/weir-{uuid.uuid4().hex[:8]}"

    async def run():
        sessions = [await ZkSession(chroot).start() for _ in range(2)]
        store, other = RacedStore(sessions[0]), ZkMetadataStore(sessions[1])
        await store.ensure_paths()
        view = ClusterView(brokers={b: BrokerInfo(b, "127.0.0.1", 9090 + b) for b in BROKERS})
        apis = AdminApis(SimpleNamespace(config=BrokerConfig(), view=view), store, None)
        try:
            await scenario(apis, store, other)
        finally:
            for s in (store, other):
                await s.close()
            for session in sessions:
                await session.close()
    asyncio.run(asyncio.wait_for(run(), 60))


def header(api_key: ApiKey, version: int) -> RequestHeader:
    return RequestHeader(int(api_key), version, 1, "test", 0, "/127.0.0.1", "", "User:ANONYMOUS")


async def two_partitions(apis, other, name: str) -> TopicAssignment:
    """A topic of two partitions, created by the other writer, in the view `apis` answers from."""
    topic = TopicAssignment(name, uuid.uuid4(), {0: (1, 2), 1: (2, 3)})
    await other.create_topic(topic)
    apis.replicas.view = ClusterView(brokers=apis.view.brokers, topics={name: topic})
    return topic


async def create_partitions(apis, name: str, count: int):
    [result] = (await apis.create_partitions(header(ApiKey.CREATE_PARTITIONS, 3), CreatePartitionsRequest(
        topics=(CreatePartitionsTopic(name=name, count=count, assignments=None),),
        timeout=datetime.timedelta(seconds=30), validate_only=False)))["results"]
    return result["error_code"], result["error_message"]


def test_partitions_added_to_a_topic_deleted_meanwhile_are_unknown_topic_or_partition(zookeeper):
    async def scenario(apis, store, other):
        await two_partitions(apis, other, "t")
        store.race = lambda: other.delete_topic("t")
        code, message = await create_partitions(apis, "t", 3)
        assert code == ErrorCode.unknown_topic_or_partition, message
        assert await store.read_topic("t") is None
    race(zookeeper, scenario)


def test_partitions_added_to_a_topic_grown_meanwhile_are_checked_against_its_new_count(zookeeper):
    """Two clients asking for 3 partitions: the second finds 3 there, INVALID_PARTITIONS, as Kafka
    answers the second of two such requests; the first one's partition is kept as it was."""
    async def scenario(apis, store, other):
        topic = await two_partitions(apis, other, "t")
        grown = TopicAssignment("t", topic.topic_id, {**topic.replicas, 2: (3, 1)})
        store.race = lambda: other.add_partitions("t", grown)
        code, message = await create_partitions(apis, "t", 3)
        assert code == ErrorCode.invalid_partitions, message
        assert "topic has 3 partitions" in message
        assert await store.read_topic("t") == grown
    race(zookeeper, scenario)


async def set_cleanup_policy(apis, name: str):
    """IncrementalAlterConfigs: SET cleanup.policy=compact on topic `name`; (error code, message)."""
    answer = await apis.incremental_alter_configs(header(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1),
                                                  IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
                                                      resource_type=2, resource_name=name, configs=(AlterableConfig(
                                                          name="cleanup.policy", config_operation=0,
                                                          value="compact"),)),), validate_only=False))
    [response] = answer["responses"]
    return response["error_code"], response["error_message"]


def test_a_config_changed_meanwhile_is_altered_from_what_the_other_writer_left(zookeeper):
    """SET of one config while another client sets another: both remain, where writing what was
    read first would have dropped the other's (each client told it succeeded)."""
    async def scenario(apis, store, other):
        await two_partitions(apis, other, "t")
        store.race = lambda: other.set_topic_config("t", {"retention.ms": "1000"})
        assert await set_cleanup_policy(apis, "t") == (ErrorCode.none, None)
        assert await store.read_topic_config("t") == {"retention.ms": "1000", "cleanup.policy": "compact"}
    race(zookeeper, scenario)


def test_a_config_another_writer_changes_before_every_write_is_unknown_server_error_after_five_tries(zookeeper):
    async def scenario(apis, store, other):
        await two_partitions(apis, other, "t")
        written = iter(range(100))
        store.race, store.races = lambda: other.set_topic_config("t", {"retention.ms": str(next(written))}), 5
        code, message = await set_cleanup_policy(apis, "t")
        assert code == ErrorCode.unknown_server_error and "try again" in message
        assert await store.read_topic_config("t") == {"retention.ms": "4"}  # the other's last, nothing of ours
    race(zookeeper, scenario)
