"""The partition replicas a broker hosts, and what the controller's decisions do to them, loop-free:
ReplicaManager (logs on disk, asyncio) and weir sim's broker (memory logs, simulated time) drive
this same object, and each supplies only its storage and its way of carrying out effects.

- A partition is hosted when a state arrives for it while it is assigned here; it learns who is
  alive before its first state.
- The registered brokers are every hosted partition's to know (who may join an ISR, who may hold
  the HW back as about to).
- A replica assigned to other brokers (a reassignment, perhaps while this broker was down) goes,
  with its log.
- A partition's decision (its Effects) is carried out in one order: answered produces first, then
  a role change (the shell's fetchers follow roles; an ISR proposal of the old role is withdrawn),
  then a new ISR proposal, then the parked fetches it wakes, then the fetch sessions that held
  the partition quiet (`news`: every decision, a new state, a moved log start).
"""

from __future__ import annotations

from typing import Iterable, Protocol

from weir.broker.fetch_waiters import FetchWaiters
from weir.replication.fetch_sessions import FetchSessionCache
from weir.replication.leader import AlterPartitionProposal, ReplicationConfig
from weir.replication.partition import Effects, Partition
from weir.replication.produce_purgatory import ProduceCompletion
from weir.zk.model import TopicAssignment, assigned_elsewhere


class PartitionShell(Protocol):
    def open_partition(self, topic: str, index: int, now_ms: int) -> Partition:
        """A Partition on this broker's log of topic-index (created if there is none)."""

    def delete_log(self, key: tuple[str, int]) -> None:
        """Delete the log of a replica no longer hosted here."""

    def replication_config(self, topic: str) -> ReplicationConfig:
        """The topic's min.insync.replicas and replica.lag.time.max.ms."""

    def complete(self, completions: list[ProduceCompletion]) -> None:
        """Answer these parked produces."""

    def role_changed(self, partition: Partition) -> None:
        """`partition` changed role (or went offline): withdraw its pending ISR proposal, and have
        the fetchers follow."""

    def send_isr_change(self, partition: Partition, proposal: AlterPartitionProposal) -> None:
        """Send this AlterPartition to the controller."""


class HostedPartitions:
    def __init__(self, broker_id: int, shell: PartitionShell) -> None:
        self.broker_id = broker_id
        self.shell = shell
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.live_brokers: frozenset[int] = frozenset()
        self.waiters = FetchWaiters()
        self.fetch_sessions: FetchSessionCache | None = None  # the leader's, whose quiet partitions hear news here

    def on_live_brokers(self, live: frozenset[int], now_ms: int) -> None:
        if live != self.live_brokers:
            self.live_brokers = live
            for partition in self.partitions.values():
                self.act(partition, partition.on_live_brokers(live, now_ms))

    def apply_state(self, assignment: TopicAssignment, index: int, state, now_ms: int,
                    state_zxid: int | None, own_broker_epoch: int | None) -> tuple[Partition, Effects] | None:
        """A controller's state for a partition of `assignment`: hosted (if assigned here) and
        applied; the partition and what it decided (already carried out), or None if it is not
        assigned here."""
        replicas = assignment.replicas.get(index, ())
        if self.broker_id not in replicas:
            return None
        key = (assignment.name, index)
        partition = self.partitions.get(key)
        before = None
        if partition is None:
            partition = self.shell.open_partition(assignment.name, index, now_ms)
            partition.on_live_brokers(self.live_brokers, now_ms)
            self.partitions[key] = partition
        else:
            before = (partition.state, partition.replicas)
        effects = partition.apply_state(state, replicas, self.shell.replication_config(assignment.name), now_ms,
                                        state_zxid, own_broker_epoch)
        if effects.decide_nothing and before == (partition.state, partition.replicas):
            return partition, effects  # the state it had: nothing for a fetch to hear (a broker's death re-applies all)
        self.act(partition, effects)
        self.waiters.notify(key)
        self.news(key, wake=True)
        return partition, effects

    def drop_assigned_elsewhere(self, topics: dict[str, TopicAssignment],
                                on_storage: Iterable[tuple[str, int]] = ()) -> list[tuple[str, int]]:
        """Replicas of `topics`, hosted or only in storage, that are assigned to other brokers:
        dropped and their logs deleted. Returns their keys."""
        gone = assigned_elsewhere(self.broker_id, topics, [*self.partitions, *on_storage])
        for key in gone:
            if key in self.partitions:
                self.drop(key)
            else:
                self.shell.delete_log(key)
        return gone

    def drop(self, key: tuple[str, int]) -> None:
        """The replica is no longer hosted here (its topic deleted, or assigned elsewhere): it goes
        offline and its log is deleted."""
        partition = self.partitions.pop(key)
        self.act(partition, Effects(partition.become_offline(), role_changed=True))
        self.shell.delete_log(key)

    def act(self, partition: Partition, effects: Effects) -> None:
        """Carry out what the partition decided (a decision of nothing is no news to a fetch session)."""
        if effects.decide_nothing:
            return
        self.shell.complete(effects.completions)
        if effects.role_changed:
            self.shell.role_changed(partition)
        if effects.isr_proposal is not None:
            self.shell.send_isr_change(partition, effects.isr_proposal)
        self.waiters.on_effects(partition.key, effects)
        self.news(partition.key, wake=effects.new_records or effects.role_changed)

    def news(self, key: tuple[str, int], *, wake: bool) -> None:
        """`key` decided something, or its log changed: a fetch session that holds it quiet reads
        it again (fetch_sessions.py), and a long poll of such a session wakes if `wake`."""
        if self.fetch_sessions is not None:
            for waiter in self.fetch_sessions.on_news(key, wake):
                waiter.set()
