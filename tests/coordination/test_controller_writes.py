"""The controller's shell (weir/broker/controller_service.py) against a real ZooKeeper: a state
whose write ended without an answer is re-read before the controller decides or answers again.

The hole this closes: the core puts a decided state into its view before the write; when the
write failed with a lost connection (not a fence), the view kept the unwritten state, and the
leader's retry of the same AlterPartition was answered "done" from memory. The leader then
committed against an ISR ZooKeeper never recorded, and a later election from the recorded ISR
could lose acknowledged records. A lost connection is injected at the store's write, as kazoo
reports it (ConnectionLoss: the outcome is unknown), before and after the write took effect.
"""

import asyncio
import uuid

import pytest
from kazoo.exceptions import ConnectionLoss

from weir.broker.controller_service import ControllerService
from weir.config.broker_config import BrokerConfig
from weir.coordination.zk_client import ZkSession
from weir.coordination.zk_metadata import ZkMetadataStore
from weir.coordination.zk_watcher import MetadataWatcher
from weir.protocol.errors import ErrorCode

from .test_zk_metadata import assignment, run

KEY = ("t", 0)
SHRINK = ("t", 0, 0, 0, (1, 2), None)  # leader 1, at leader epoch 0 and partition epoch 0, drops 3
EVENT_TIMEOUT_S = 15


@pytest.fixture
def chroot(zookeeper):
    return f"{zookeeper.connect_string}/weir-{uuid.uuid4().hex[:8]}"


async def until(condition) -> None:
    async def poll():
        while not condition():
            await asyncio.sleep(0.01)
    await asyncio.wait_for(poll(), EVENT_TIMEOUT_S)


@pytest.mark.parametrize("write_took_effect", [False, True])
def test_a_write_with_no_answer_is_reread_before_the_controller_answers_again(chroot, write_took_effect):
    async def scenario():
        sessions = [await ZkSession(chroot).start() for _ in range(3)]
        for broker_id, session in zip((1, 2, 3), sessions):
            await session.register_broker(broker_id, "127.0.0.1", 9090 + broker_id)
        store = ZkMetadataStore(sessions[0])
        await store.ensure_paths()
        service = None
        watcher = await MetadataWatcher(sessions[0], lambda kind, key: service and service.on_metadata_change(
            kind, key)).start()
        service = ControllerService(BrokerConfig({"broker.id": "1", "auto.leader.rebalance.enable": "false"}),
                                    store, watcher)
        try:
            await service.start()
            assert service.active
            await store.create_topic(assignment("t", 1), {})
            await until(lambda: KEY in watcher.view.states)
            assert watcher.view.states[KEY].isr == (1, 2, 3) and watcher.view.states[KEY].leader == 1

            real_write = store.write_partition_states

            async def connection_lost(changes):
                if write_took_effect:
                    await real_write(changes)
                raise ConnectionLoss()
            store.write_partition_states = connection_lost
            with pytest.raises(ConnectionLoss):  # the leader's request fails; it will retry
                await service.call("alter_partition", 1, -1, [SHRINK])
            store.write_partition_states = real_write

            error, answers = await service.call("alter_partition", 1, -1, [SHRINK])
            error, answered = answers[KEY] if not error else (error, None)
            stored = (await store.read_partition_states([KEY]))[KEY]
            assert error == ErrorCode.none
            assert (answered.isr, answered.partition_epoch) == (stored.isr, stored.partition_epoch) == ((1, 2), 1)
            assert service.core.view.states[KEY] == stored
        finally:
            await service.stop()
            await watcher.stop()
            await store.close()
            for session in sessions:
                await session.close()

    run(scenario())
