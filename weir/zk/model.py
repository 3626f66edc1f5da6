"""The cluster metadata that ZooKeeper holds, as plain values shared by controller and brokers.

Paths and JSON formats follow Kafka's ZooKeeper mode:

    /brokers/ids/<id>                              ephemeral broker registration
    /controller                                    ephemeral {"brokerid": id, ...}
    /controller_epoch                              persistent, incremented on every election
    /brokers/topics/<topic>                        {"version":3, "topic_id": ..., "partitions": {"0": [1,2,3]}}
    /brokers/topics/<topic>/partitions/<p>/state   {"controller_epoch", "leader", "leader_epoch", "isr"}
    /config/topics/<topic>                         {"version":1, "config": {...}}
    /config/brokers/<id> (and <default>)           dynamic broker configs

The partition epoch is the state znode's version: every change is a compare-and-set on it.
"""

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int  # NO_LEADER when offline
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int  # the znode version; -1 before the znode exists

    def __post_init__(self) -> None:
        assert self.leader == NO_LEADER or self.leader in self.isr, "a leader is always in its ISR"


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    name: str
    topic_id: uuid.UUID
    replicas: dict[int, tuple[int, ...]]  # partition → assigned replicas, preferred leader first
    # A partition being reassigned (KIP-455) has `replicas` = target + original (Kafka's order),
    # the target's new replicas in `adding` and the original's leaving ones in `removing`.
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)

    @property
    def partition_count(self) -> int:
        return len(self.replicas)

    def is_reassigning(self, partition: int) -> bool:
        return bool(self.adding.get(partition) or self.removing.get(partition))

    def target_replicas(self, partition: int) -> tuple[int, ...]:
        """Where the partition is going: its replicas without the ones being removed."""
        removing = self.removing.get(partition, ())
        return tuple(r for r in self.replicas[partition] if r not in removing)

    def original_replicas(self, partition: int) -> tuple[int, ...]:
        """Where the partition was before its reassignment: its replicas without the ones being added."""
        adding = self.adding.get(partition, ())
        return tuple(r for r in self.replicas[partition] if r not in adding)


def assigned_elsewhere(broker_id: int, topics: Mapping[str, TopicAssignment],
                       held: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    """Of the partitions a broker holds (hosted, or only on its disk), those whose topic's
    assignment no longer names it: reassigned away, perhaps while it was down. It deletes them
    (the broker's ReplicaManager and `weir sim`'s broker alike)."""
    return [key for key in sorted(set(held)) if key[0] in topics
            and broker_id not in topics[key[0]].replicas.get(key[1], (broker_id,))]


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    # (listener, host, port) of each advertised listener; not part of equality (the watcher compares them itself)
    endpoints: tuple[tuple[str, str, int], ...] = field(default=(), compare=False)

    def address(self, listener: str = "") -> tuple[str, int] | None:
        """(host, port) of `listener`, as Kafka's Metadata answers a client that came on it; None if
        this broker has no such listener. No listener named (or none registered): host and port."""
        if not listener or not self.endpoints:
            return self.host, self.port
        for name, host, port in self.endpoints:
            if name.upper() == listener.upper():
                return host, port
        return None


class TopicsByName(dict):
    """name -> TopicAssignment, with an index by topic id kept in step with every change (Kafka's
    metadata cache keeps both). Every Produce and Fetch by id looks a topic up: an id that names
    no topic (a deleted topic's, a client's mistake) must not cost a pass over all topics."""

    __slots__ = ("names_by_id",)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.names_by_id = {a.topic_id: name for name, a in self.items()}

    def __setitem__(self, name: str, assignment: TopicAssignment) -> None:
        self._unindex(name)
        super().__setitem__(name, assignment)
        self.names_by_id[assignment.topic_id] = name

    def __delitem__(self, name: str) -> None:
        self._unindex(name)
        super().__delitem__(name)

    def pop(self, name: str, *default):
        self._unindex(name)
        return super().pop(name, *default)

    def popitem(self):
        name, assignment = super().popitem()
        self.names_by_id.pop(assignment.topic_id, None)
        return name, assignment

    def setdefault(self, name: str, assignment: TopicAssignment) -> TopicAssignment:
        if name not in self:
            self[name] = assignment
        return self[name]

    def update(self, *args, **kwargs) -> None:
        for name, assignment in dict(*args, **kwargs).items():
            self[name] = assignment

    def __ior__(self, other):
        self.update(other)
        return self

    def clear(self) -> None:
        super().clear()
        self.names_by_id.clear()

    def _unindex(self, name: str) -> None:
        current = self.get(name)
        if current is not None and self.names_by_id.get(current.topic_id) == name:
            del self.names_by_id[current.topic_id]


@dataclass(slots=True)
class ClusterView:
    """Everything a broker or the controller knows of the cluster at one moment."""
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)  # live ones
    topics: TopicsByName = field(default_factory=TopicsByName)  # a dict given is made one
    states: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)  # dynamic: broker id or <default>
    controller_id: int = NO_LEADER
    controller_epoch: int = 0
    # Broker epochs (KIP-380): the czxid of each live broker's registration znode. A broker that
    # registered again (a new session: it restarted, or its session expired) has a higher one.
    broker_epochs: dict[int, int] = field(default_factory=dict)
    # The ZooKeeper session that owns each live broker's (ephemeral) registration.
    broker_sessions: dict[int, int] = field(default_factory=dict)
    # The mzxid of each partition state znode: the zxid of the write that made it what it is.
    state_zxids: dict[tuple[str, int], int] = field(default_factory=dict)
    # The session this view was read in (None for a view not read from ZooKeeper): a broker's
    # registration in `brokers` is its own current one iff broker_sessions[id] == session_id.
    session_id: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.topics, TopicsByName):  # the watcher and the controller change it in place
            self.topics = TopicsByName(self.topics)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicAssignment | None:
        """The topic with id `topic_id` (requests of newer versions name topics by id), if any."""
        name = self.topics.names_by_id.get(topic_id)
        return None if name is None else self.topics[name]

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        assignment = self.topic_by_id(topic_id)
        return assignment.name if assignment is not None else None

    def own_broker_epoch(self, broker_id: int) -> int | None:
        """The broker epoch of `broker_id`'s registration if that registration is by the session this
        view was read in (the broker's own current one); None if the view does not show it (yet)."""
        if self.session_id is None or self.broker_sessions.get(broker_id) != self.session_id:
            return None
        return self.broker_epochs.get(broker_id)
