"""Test helpers: a controller core over a made-up cluster, with every decided write confirmed."""

import uuid

from weir.controller import ControllerConfig, ControllerCore, StateChange
from weir.zk.model import BrokerInfo, ClusterView, TopicAssignment


def brokers(*ids: int, racks: dict[int, str] | None = None) -> dict[int, BrokerInfo]:
    racks = racks or {}
    return {i: BrokerInfo(i, f"broker-{i}", 9092, racks.get(i)) for i in ids}


def written(core: ControllerCore, changes: list[StateChange]) -> list[StateChange]:
    """The shell wrote every change: report each as written, in order."""
    for change in changes:
        core.on_state_written(change, change.new.partition_epoch)
    return changes


def make_core(live, topics: dict[str, dict[int, tuple[int, ...]]], *, configs: dict[str, dict[str, str]] | None = None,
              config: ControllerConfig = ControllerConfig(), controller_epoch: int = 1) -> ControllerCore:
    core = ControllerCore(ClusterView(brokers=brokers(*live), controller_epoch=controller_epoch), config)
    for name, replicas in topics.items():
        assignment = TopicAssignment(name, uuid.uuid4(), dict(replicas))
        written(core, core.on_topic_created(assignment, (configs or {}).get(name)))
    assert not core.has_unconfirmed_writes
    return core


def keep_only(core: ControllerCore, *live: int, bounced=()) -> list[StateChange]:
    """Broker sessions: exactly `live` are registered now."""
    return written(core, core.on_brokers_changed(brokers(*live), bounced))


def state(core: ControllerCore, topic: str = "t", partition: int = 0):
    return core.view.states[(topic, partition)]
