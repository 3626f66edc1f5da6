"""Broker epochs (KIP-380) in the metadata view, the controller's bounce detection, and the broker's
rule that it takes no leadership from a state older than its own registration.

The watcher tests run against a real ZooKeeper (one per module, a chroot per test); the rest are
plain unit tests on ClusterViews.
"""

import uuid

import pytest

from weir.broker.replica_manager import ReplicaManager
from weir.config.broker_config import BrokerConfig
from weir.controller.events import registered_after_their_states
from weir.coordination.zk_client import ZkSession
from weir.coordination.zk_watcher import MetadataWatcher
from weir.replication.partition import FOLLOWER, LEADER, OFFLINE
from weir.zk.formats import partition_state_path
from weir.zk.model import NO_LEADER, BrokerInfo, ClusterView, PartitionState, TopicAssignment

from .test_zk_metadata import Changes, assignment, controller_store, initial_states, run


@pytest.fixture
def chroot(zookeeper):
    return f"{zookeeper.connect_string}/weir-{uuid.uuid4().hex[:8]}"


async def znode_stat(session: ZkSession, path: str):
    _, stat = await session.wait(session.client.get_async(path))
    return stat


# -- the watcher -------------------------------------------------------------------------------


def test_watcher_records_broker_epochs_and_owning_sessions(chroot):
    async def scenario():
        watcher_session = await ZkSession(chroot).start()
        changes = Changes()
        watcher = await MetadataWatcher(watcher_session, changes).start()
        other = await ZkSession(chroot).start()
        try:
            assert watcher.view.session_id == watcher_session.session_id
            await other.register_broker(5, "127.0.0.1", 9095)
            await changes.until("brokers")
            stat = await znode_stat(other, "/brokers/ids/5")
            assert watcher.view.broker_epochs == {5: stat.czxid}
            assert watcher.view.broker_sessions == {5: other.session_id}
            # Registered by another session: not the watcher's own registration.
            assert watcher.view.own_broker_epoch(5) is None

            # Registered by the watcher's own session: its own current registration.
            await watcher_session.register_broker(6, "127.0.0.1", 9096)
            await changes.until("brokers")
            stat6 = await znode_stat(watcher_session, "/brokers/ids/6")
            assert watcher.view.own_broker_epoch(6) == stat6.czxid > stat.czxid

            snapshot = watcher.snapshot()
            assert snapshot.broker_epochs == watcher.view.broker_epochs
            assert snapshot.broker_sessions == watcher.view.broker_sessions
            assert snapshot.session_id == watcher.view.session_id
            assert snapshot.broker_epochs is not watcher.view.broker_epochs

            await other.close()
            await changes.until("brokers")
            assert 5 not in watcher.view.broker_epochs and 5 not in watcher.view.broker_sessions
        finally:
            await watcher.stop()
            await watcher_session.close()
            await other.close()

    run(scenario())


def test_a_bounce_between_two_looks_is_a_brokers_change(chroot):
    """The old registration deleted and an identical one created in one transaction: the watcher
    never sees the broker gone, but the broker epoch tells it registered again."""
    async def scenario():
        watcher_session = await ZkSession(chroot).start()
        changes = Changes()
        watcher = await MetadataWatcher(watcher_session, changes).start()
        old = await ZkSession(chroot).start()
        new = await ZkSession(chroot).start()
        try:
            await old.register_broker(7, "127.0.0.1", 9097)
            await changes.until("brokers")
            before = watcher.view.broker_epochs[7]
            info = watcher.view.brokers[7]
            data, _ = await old.wait(old.client.get_async("/brokers/ids/7"))

            tx = new.client.transaction()
            tx.delete("/brokers/ids/7")
            tx.create("/brokers/ids/7", data, ephemeral=True)
            results = await new.wait(tx.commit_async())
            assert not any(isinstance(r, Exception) for r in results), results

            await changes.until("brokers")
            assert watcher.view.brokers[7] == info  # same contents ...
            assert watcher.view.broker_epochs[7] > before  # ... new broker epoch
            assert watcher.view.broker_sessions[7] == new.session_id
        finally:
            await watcher.stop()
            for s in (watcher_session, old, new):
                await s.close()

    run(scenario())


def test_watcher_records_the_mzxid_of_every_partition_state(chroot):
    async def scenario():
        session, store = await controller_store(chroot, broker_id=1)
        watcher_session = await ZkSession(chroot).start()
        changes = Changes()
        watcher = await MetadataWatcher(watcher_session, changes).start()
        try:
            a = assignment("z", 2)
            await store.create_topic(a, {}, initial_states(a, 1))
            await changes.until("topic", "z")
            for p in range(2):
                stat = await znode_stat(session, partition_state_path("z", p))
                assert watcher.view.state_zxids[("z", p)] == stat.mzxid
            first = watcher.view.state_zxids[("z", 0)]
            snapshot = watcher.snapshot()

            await store.write_partition_states([("z", 0, 0, PartitionState(2, 1, (2, 3), 1, 0))])
            await changes.until("partition", ("z", 0))
            stat = await znode_stat(session, partition_state_path("z", 0))
            assert watcher.view.state_zxids[("z", 0)] == stat.mzxid > first
            assert snapshot.state_zxids[("z", 0)] == first  # a snapshot does not follow changes

            await store.delete_topic("z")
            await changes.until("topic_deleted", "z")
            assert not any(t == "z" for t, _ in watcher.view.state_zxids)
        finally:
            await watcher.stop()
            await watcher_session.close()
            await store.close()
            await session.close()

    run(scenario())


# -- the controller: bounces a new controller cannot have seen -------------------------------------


def view_with(states: dict, zxids: dict, epochs: dict) -> ClusterView:
    topic = TopicAssignment("t", uuid.uuid4(), {p: (1, 2, 3) for p in states})
    return ClusterView(brokers={b: BrokerInfo(b, "h", 9000 + b) for b in epochs}, topics={"t": topic},
                       states={("t", p): s for p, s in states.items()},
                       state_zxids={("t", p): z for p, z in zxids.items()},
                       broker_epochs=dict(epochs), broker_sessions={b: 1000 + b for b in epochs},
                       controller_id=1, controller_epoch=2, session_id=1001)


def test_brokers_registered_after_states_naming_them_count_as_bounced():
    view = view_with({0: PartitionState(1, 0, (1, 2, 3), 1, 4), 1: PartitionState(2, 3, (2,), 1, 7),
                      2: PartitionState(NO_LEADER, 5, (3,), 1, 9)},
                     {0: 50, 1: 80, 2: 60},
                     {1: 70, 2: 10, 3: 65})
    # 1 registered (70) after state 0 (50) naming it leader; 2 registered before both its states;
    # 3 registered after state 2 naming it the kept last ISR member.
    assert registered_after_their_states(view) == {1, 3}
    assert registered_after_their_states(view_with({0: PartitionState(1, 0, (1,), 1, 0)}, {0: 50}, {2: 70})) == set()


# -- the broker: no leadership from a state older than its own registration -------------------------


ME = 1


@pytest.fixture
def replicas(tmp_path):
    manager = ReplicaManager(BrokerConfig({"broker.id": str(ME), "log.dirs": str(tmp_path / "logs")}), 0)
    manager.can_lead = True
    roles = []
    manager.on_role_change = lambda partition: roles.append(partition.role)
    yield manager
    manager.close()


def broker_view(state: PartitionState, state_zxid: int, own_epoch: int | None, own_session: bool = True):
    view = view_with({0: state}, {0: state_zxid}, {1: own_epoch or 1, 2: 5, 3: 6})
    if own_epoch is None:
        del view.brokers[ME], view.broker_epochs[ME], view.broker_sessions[ME]
    elif not own_session:
        view.broker_sessions[ME] = 4242  # the registration of a previous incarnation's session
    return view


def role(manager: ReplicaManager) -> str:
    return manager.partitions[("t", 0)].role


def test_no_leadership_from_a_state_older_than_our_registration(replicas):
    old = PartitionState(ME, 0, (1, 2, 3), 1, 3)
    replicas.apply_view(broker_view(old, state_zxid=50, own_epoch=70), 0)
    assert role(replicas) == OFFLINE
    # The controller processed the bounce: a new state, written after our registration.
    rewritten = PartitionState(ME, 2, (1,), 2, 5)
    replicas.apply_view(broker_view(rewritten, state_zxid=90, own_epoch=70), 0)
    assert role(replicas) == LEADER and replicas.partitions[("t", 0)].leader.leader_epoch == 2


def test_no_leadership_while_our_own_registration_is_not_in_the_view(replicas):
    state = PartitionState(ME, 0, (1, 2, 3), 1, 3)
    replicas.apply_view(broker_view(state, state_zxid=50, own_epoch=None), 0)
    assert role(replicas) == OFFLINE
    # The registration in the view is a previous incarnation's (another session): not ours either.
    replicas.apply_view(broker_view(state, state_zxid=50, own_epoch=40, own_session=False), 0)
    assert role(replicas) == OFFLINE
    replicas.apply_view(broker_view(state, state_zxid=50, own_epoch=40), 0)
    assert role(replicas) == LEADER


def test_following_from_an_old_state_is_fine(replicas):
    replicas.apply_view(broker_view(PartitionState(2, 4, (2, 1), 1, 6), state_zxid=50, own_epoch=70), 0)
    assert role(replicas) == FOLLOWER


def test_a_leader_that_registered_again_steps_down_until_the_state_is_rewritten(replicas):
    state = PartitionState(ME, 1, (1, 2), 1, 3)
    replicas.apply_view(broker_view(state, state_zxid=50, own_epoch=40), 0)
    assert role(replicas) == LEADER
    replicas.apply_view(broker_view(state, state_zxid=50, own_epoch=60), 0)  # our session was replaced
    assert role(replicas) == OFFLINE
    replicas.apply_view(broker_view(PartitionState(ME, 3, (1,), 2, 5), state_zxid=80, own_epoch=60), 0)
    assert role(replicas) == LEADER
