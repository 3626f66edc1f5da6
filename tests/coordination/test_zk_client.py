"""The asyncio side of kazoo: connection states, broker registration, chroot — on a real ZooKeeper."""

import asyncio
import json

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import EventType

from weir.coordination.zk_client import BROKER_IDS_PATH, BrokerIdInUse, KazooState, ZkSession, split_chroot

EVENT_TIMEOUT_S = 15  # generous upper bounds: every wait below ends on an event, not a timer


class StateRecorder:
    """The asyncio-side handler: records every state the bridge delivers, in order."""

    def __init__(self) -> None:
        self.states: list[str] = []
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self.loop = asyncio.get_running_loop()

    def __call__(self, state: str) -> None:
        assert asyncio.get_running_loop() is self.loop  # delivered on the loop, not a kazoo thread
        self.states.append(state)
        self._queue.put_nowait(state)

    async def until(self, wanted: str) -> list[str]:
        """Consume states up to and including `wanted`; return them."""
        seen = []
        while not seen or seen[-1] != wanted:
            seen.append(await asyncio.wait_for(self._queue.get(), EVENT_TIMEOUT_S))
        return seen


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_ephemeral_registration_goes_when_the_session_closes(zookeeper):
    async def scenario():
        states = StateRecorder()
        broker = await ZkSession(zookeeper.connect_string, on_state=states).start()
        observer = await ZkSession(zookeeper.connect_string).start()
        try:
            assert states.states == [KazooState.CONNECTED]
            path = await broker.register_broker(1, "127.0.0.1", 9092, rack="rack-a")
            assert path == f"{BROKER_IDS_PATH}/1"
            registered = (await observer.registered_brokers())[1]
            assert registered["host"] == "127.0.0.1" and registered["port"] == 9092
            assert registered["rack"] == "rack-a"
            assert registered["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
            _, stat = await observer.wait(observer.client.get_async(path))
            assert stat.ephemeralOwner == broker.session_id

            changed = asyncio.get_running_loop().create_future()
            children = await observer.wait(observer.client.get_children_async(
                BROKER_IDS_PATH, watch=observer.on_loop(changed.set_result)))
            assert children == ["1"]

            await broker.close()
            assert states.states[-1] == KazooState.LOST and broker.closing

            event = await asyncio.wait_for(changed, EVENT_TIMEOUT_S)
            assert event.type == EventType.CHILD and event.path == BROKER_IDS_PATH
            assert await observer.registered_brokers() == {}
        finally:
            await broker.close()
            await observer.close()

    run(scenario())


def test_broker_id_registration_is_idempotent_and_exclusive(zookeeper):
    async def scenario():
        async with ZkSession(zookeeper.connect_string) as first, \
                ZkSession(zookeeper.connect_string) as second:
            await first.register_broker(7, "127.0.0.1", 9092)
            await first.register_broker(7, "127.0.0.1", 9093)  # same session: updated in place
            assert (await second.registered_brokers())[7]["port"] == 9093
            with pytest.raises(BrokerIdInUse):
                await second.register_broker(7, "127.0.0.1", 9094)

    run(scenario())


def test_registration_survives_the_old_holder_expiring_between_create_and_read(zookeeper):
    """A broker restarted after kill -9 finds its id held by its old session; when that session
    expires between the failed create and the read of the holder, it registers after all."""
    async def scenario():
        async with ZkSession(zookeeper.connect_string) as old, \
                ZkSession(zookeeper.connect_string) as restarted:
            path = await old.register_broker(8, "127.0.0.1", 9092)
            read_holder = restarted.client.get_async

            def holder_expires_first(*args, **kwargs):
                old.client.stop()  # closes its session: the ephemeral znode goes
                restarted.client.get_async = read_holder
                return read_holder(*args, **kwargs)

            restarted.client.get_async = holder_expires_first
            assert await restarted.register_broker(8, "127.0.0.1", 9093) == path
            _, stat = await restarted.wait(restarted.client.get_async(path))
            assert stat.ephemeralOwner == restarted.session_id

    run(scenario())


def test_paused_server_suspends_then_reconnects_the_same_session(zookeeper):
    async def scenario():
        states = StateRecorder()
        # Kazoo notices a silent server after 2/3 of the session timeout; we resume at once, well
        # before the server (whose clock ran on while stopped) could expire the session.
        async with ZkSession(zookeeper.connect_string, session_timeout_s=5, on_state=states) as session:
            await session.register_broker(2, "127.0.0.1", 9092)
            session_id = session.session_id
            zookeeper.pause()
            try:
                assert await states.until(KazooState.SUSPENDED) == [KazooState.CONNECTED,
                                                                    KazooState.SUSPENDED]
            finally:
                zookeeper.resume()
            assert await states.until(KazooState.CONNECTED) == [KazooState.CONNECTED]
            assert session.session_id == session_id
            assert 2 in await session.registered_brokers()

    run(scenario())


def test_expired_session_is_reported_lost_then_a_new_session_connects(zookeeper):
    async def scenario():
        states = StateRecorder()
        async with ZkSession(zookeeper.connect_string, session_timeout_s=2, on_state=states) as session, \
                ZkSession(zookeeper.connect_string) as observer:
            await session.register_broker(3, "127.0.0.1", 9092)
            old_session_id = session.session_id
            # Expire it the known way: attach a second client to the same session, then close it.
            thief = KazooClient(hosts=zookeeper.connect_string, client_id=session.client.client_id)
            await asyncio.to_thread(thief.start, EVENT_TIMEOUT_S)
            assert thief.client_id[0] == old_session_id
            await asyncio.to_thread(thief.stop)
            thief.close()

            seen = await states.until(KazooState.LOST)
            assert seen[0] == KazooState.CONNECTED and set(seen[1:-1]) <= {KazooState.SUSPENDED}
            assert 3 not in await observer.registered_brokers()
            assert await states.until(KazooState.CONNECTED) == [KazooState.CONNECTED]
            assert session.session_id not in (None, old_session_id)
            await session.register_broker(3, "127.0.0.1", 9092)  # the caller's job after LOST
            assert (await observer.registered_brokers())[3]["port"] == 9092

    run(scenario())


def test_chroot_in_the_connect_string(zookeeper):
    async def scenario():
        chrooted = f"{zookeeper.connect_string}/weir-test"
        async with ZkSession(chrooted) as session, ZkSession(zookeeper.connect_string) as root:
            await session.register_broker(4, "127.0.0.1", 9092)
            assert list(await session.registered_brokers()) == [4]
            data, _ = await root.wait(root.client.get_async(f"/weir-test{BROKER_IDS_PATH}/4"))
            assert json.loads(data)["port"] == 9092
            assert 4 not in await root.registered_brokers()

    run(scenario())


def test_split_chroot():
    assert split_chroot("127.0.0.1:2181") == ("127.0.0.1:2181", None)
    assert split_chroot("a:1,b:2/weir/x/") == ("a:1,b:2", "/weir/x")
    assert split_chroot("a:1/") == ("a:1", None)
