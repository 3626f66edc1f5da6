"""The controller's decided states: each a compare-and-set for the shell to write (StateChange),
kept in the controller's view as if written until the store confirms it (DecidedStates).

Rules owned here: a decided state keeps the leader in the ISR and the ISR within the assigned
replicas, never empty; leader epochs never go down and every leader change bumps one; a created
state starts at partition and leader epoch 0, every later one at the stored partition epoch + 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from weir.controller.partition_change import with_partition_epoch
from weir.zk.model import NO_LEADER, ClusterView, PartitionState

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class StateChange:
    """One compare-and-set for the shell: write `new` if the znode's version is still
    `old.partition_epoch` (create it if `old` is None); `new.partition_epoch` is the version it
    will have. Then send the state to `notify` (the live assigned replicas)."""
    topic: str
    partition: int
    old: PartitionState | None
    new: PartitionState
    notify: tuple[int, ...]
    reason: str  # the rule that decided it, for logs

    @property
    def key(self) -> TopicPartition:
        return self.topic, self.partition

    @property
    def expected_version(self) -> int | None:
        """None: create the znode."""
        return None if self.old is None else self.old.partition_epoch


class DecidedStates:
    """The view one controller tenure decides from, the brokers in controlled shutdown, and the
    writes handed to the shell that it has not yet reported on."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.shutting_down: set[int] = set()
        self.unconfirmed: dict[TopicPartition, int] = {}  # writes handed out, not yet reported

    @property
    def live(self) -> frozenset[int]:
        return frozenset(self.view.brokers)

    def replicas(self, topic: str, partition: int) -> tuple[int, ...] | None:
        assignment = self.view.topics.get(topic)
        return None if assignment is None else assignment.replicas.get(partition)

    def notified(self, topic: str, partition: int) -> tuple[int, ...]:
        replicas = self.replicas(topic, partition) or ()
        return tuple(r for r in replicas if r in self.view.brokers)

    def apply(self, key: TopicPartition, old: PartitionState | None, new: PartitionState,
              reason: str) -> StateChange:
        """Record a decided state in the view (as if written) and hand it to the shell."""
        replicas = self.replicas(*key)
        assert replicas is not None
        assert new.leader == NO_LEADER or new.leader in new.isr, ("the leader is in the ISR", new)
        assert set(new.isr) <= set(replicas) and new.isr, ("ISR ⊆ replicas, not empty", new, replicas)
        if old is None:
            assert new.partition_epoch == 0 and new.leader_epoch == 0
        else:
            new = with_partition_epoch(new, old.partition_epoch + 1)
            assert new.leader_epoch >= old.leader_epoch, "leader epochs never go down"
            assert new.leader == old.leader or new.leader_epoch > old.leader_epoch, \
                "every leader change bumps the leader epoch"
        self.view.states[key] = new
        self.unconfirmed[key] = self.unconfirmed.get(key, 0) + 1
        return StateChange(key[0], key[1], old, new, self.notified(*key), reason)

    def confirm(self, change: StateChange, version: int) -> None:
        """The compare-and-set of `change` succeeded; the znode's version is now `version`."""
        assert version == change.new.partition_epoch, ("the write bumped the version by one", version, change)
        pending = self.unconfirmed.get(change.key, 0)
        if pending <= 1:
            self.unconfirmed.pop(change.key, None)
        else:
            self.unconfirmed[change.key] = pending - 1
