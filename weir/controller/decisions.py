"""The controller's decisions for the whole cluster: which partition states to write, and whom to tell.

Rules owned here (the per-partition election and ISR rules are in partition_change.py, replica
placement in assignment.py):

- BROKER CHANGES. When brokers register or their sessions end, every partition is brought in line
  in one batch: dead brokers leave ISRs (never emptying one), partitions whose leader died get a
  clean election (or an unclean one where `unclean.leader.election.enable` allows it and no ISR
  member is live), and offline partitions whose kept ISR member returned are revived. A broker
  whose session ended and came back between two looks (a "bounce") is treated as gone, then back:
  it may have lost what it had not flushed, so it loses its leaderships and ISR places. A returning
  broker is never put back into an ISR by the controller: its leader does that (AlterPartition)
  once it has caught up.
- TOPIC CREATION. New partitions start with ISR = live replicas and the first acceptable one as
  leader, leader epoch 0.
- ALTERPARTITION (KIP-497, checks in ZooKeeper-mode KafkaController order, KIP-841 eligibility):
  unknown partition → UNKNOWN_TOPIC_OR_PARTITION; a leader epoch or partition epoch *above* ours →
  NOT_CONTROLLER (only a newer controller could have written it: we are stale, the leader should
  find the new one); a lower leader epoch → FENCED_LEADER_EPOCH; the sender not the leader →
  INVALID_REQUEST; the same ISR as now → success with the current state, whatever the partition
  epoch (an idempotent retry of a request whose answer was lost); a lower partition epoch →
  INVALID_UPDATE_VERSION; an ISR that is empty, has duplicates, is not ⊆ replicas or lacks the
  leader → INVALID_REQUEST; a replica *added* to the ISR that is not live, is in controlled
  shutdown, or was seen fetching as another incarnation than its current registration (its broker
  epoch, KIP-903) → INELIGIBLE_REPLICA (members already in the ISR may stay: removing them is the
  controller's job when they die). Accepted: same leader and leader epoch, the new ISR in
  assignment order, partition epoch + 1 (for a leader in controlled shutdown, see there).
- ELECTLEADERS. PREFERRED: the first assigned replica takes over where it is acceptable and in the
  ISR. UNCLEAN: offline partitions get any acceptable replica, whatever the topic config.
- LEADER BALANCE (auto.leader.rebalance.enable, leader.imbalance.per.broker.percentage; the shell
  runs the check FIRST_LEADER_BALANCE_CHECK_S after the election, then every
  leader.imbalance.check.interval.seconds): for each broker, the share of the partitions it is
  preferred leader of that someone else leads; above the percentage, a preferred election for
  those partitions where it is acceptable and in the ISR.
- CONTROLLED SHUTDOWN. The broker becomes unacceptable as a leader and as a new ISR member until
  its session ends or it registers again. Partitions it leads move to the first acceptable ISR
  member in assignment order (ISR without it); it leaves the ISRs it follows in, unless it is
  the last member. Partitions with no other acceptable ISR member stay led by it and are reported
  as remaining (Kafka ZooKeeper mode). Its leader's AlterPartition that adds a member to such a
  partition's ISR hands the partition over in the same write, as the shutdown would have (KRaft's
  PartitionChangeBuilder elects whenever the leader is not acceptable; ZooKeeper mode refuses the
  change and leaves the partition offline once the broker stops): the broker does not ask again.
- TOPIC DELETION. The topic's partitions leave the view; their replicas are told to delete them.
- REASSIGNMENT (KIP-455): in reassignment.py, the rules and their application to the view
  (Reassignments, which decides on the same DecidedStates as this class).

Theory of operation: one `ControllerCore` per controller tenure, built from everything read from
the metadata store (a ClusterView), with the controller epoch that tenure won. Every event method
returns `StateChange`s and immediately applies them to the core's view as if written — so the next
event builds on them, the way Kafka's single-threaded controller builds on its context. Each
change is a compare-and-set: the shell writes `new` at znode version `old.partition_epoch` (creates
the znode when `old` is None), fenced by the controller epoch, and then reports back:
`on_state_written` on success (the znode's version is then `new.partition_epoch`), or
`on_write_conflict` with what the store holds, which the core adopts as the truth and re-decides
from. A write whose outcome is unknown (the connection was lost) leaves a state in the view that
the store may not hold: the shell must re-read it and hand it to `adopt_stored` before the core
decides or answers anything else (`unconfirmed_keys` lists such states). Leaders and followers
learn new states from the shell (LeaderAndIsr to `notify`, the live assigned replicas; metadata to every live broker). Nothing here reads a clock, a socket or a file;
randomness only enters through assignment.py's `random.Random`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from weir.controller.partition_change import (ElectionType, changed_state, elect_preferred_leader, elect_unclean_leader,
                                              initial_state, is_acceptable_leader, next_state)
from weir.controller.reassignment import Reassignments
from weir.controller.state_change import DecidedStates, StateChange, TopicPartition
from weir.zk.model import NO_LEADER, BrokerInfo, ClusterView, PartitionState, TopicAssignment

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
# A new controller checks leader balance this long after its election, then every
# leader.imbalance.check.interval.seconds (KafkaController.onControllerFailover).
FIRST_LEADER_BALANCE_CHECK_S = 5


@dataclass(frozen=True)
class ControllerConfig:
    """Kafka's names and defaults."""
    unclean_leader_election_enable: bool = False  # unclean.leader.election.enable (broker default)
    auto_leader_rebalance_enable: bool = True  # auto.leader.rebalance.enable
    leader_imbalance_per_broker_percentage: int = 10  # leader.imbalance.per.broker.percentage
    leader_imbalance_check_interval_seconds: int = 300  # leader.imbalance.check.interval.seconds (the shell's timer)

    def __post_init__(self) -> None:
        assert 0 <= self.leader_imbalance_per_broker_percentage <= 100
        assert self.leader_imbalance_check_interval_seconds > 0


@dataclass(frozen=True, slots=True)
class AlterPartitionOutcome:
    """error != none: answer it. Otherwise: if `change` is set, write it and answer `state` once
    written (INVALID_UPDATE_VERSION if the write conflicts); if not, answer `state` now."""
    error: ErrorCode
    state: PartitionState | None = None
    change: StateChange | None = None


@dataclass(frozen=True, slots=True)
class ElectLeadersOutcome:
    results: dict[TopicPartition, ErrorCode]
    changes: list[StateChange]


@dataclass(frozen=True, slots=True)
class ControlledShutdownOutcome:
    """remaining: partitions the broker still leads (answer them; the broker may retry)."""
    error: ErrorCode
    changes: list[StateChange] = field(default_factory=list)
    remaining: list[TopicPartition] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TopicDeletion:
    """Partitions to drop, with the replicas to tell (StopReplica with delete)."""
    topic: str
    partitions: dict[int, tuple[int, ...]]


class ControllerCore:
    def __init__(self, view: ClusterView, config: ControllerConfig = ControllerConfig()) -> None:
        for name, topic in view.topics.items():
            assert name == topic.name
            for p, replicas in topic.replicas.items():
                assert replicas and len(set(replicas)) == len(replicas), (name, p, replicas)
        self.config = config
        self.decided = DecidedStates(view)
        self.reassignment = Reassignments(self.decided)  # KIP-455's moves, on the same decided states

    # ----- views

    @property
    def view(self) -> ClusterView:
        return self.decided.view

    @property
    def shutting_down(self) -> set[int]:
        return self.decided.shutting_down

    @property
    def live(self) -> frozenset[int]:
        return self.decided.live

    @property
    def has_unconfirmed_writes(self) -> bool:
        return bool(self.decided.unconfirmed)

    @property
    def unconfirmed_keys(self) -> list[TopicPartition]:
        """Partitions whose state in the view was decided but not yet confirmed by the store."""
        return sorted(self.decided.unconfirmed)

    def is_stale_broker_epoch(self, broker: int, epoch: int) -> bool:
        """`epoch` (-1: not said) names another incarnation of `broker` than its current
        registration (KIP-380/903): a restarted broker's late request, about a log it may no longer
        have."""
        registered = self.view.broker_epochs.get(broker)
        return epoch != -1 and registered is not None and epoch != registered

    def replicas(self, topic: str, partition: int) -> tuple[int, ...] | None:
        return self.decided.replicas(topic, partition)

    def unclean_allowed(self, topic: str) -> bool:
        """The topic's `unclean.leader.election.enable`, else the broker default."""
        value = self.view.topic_configs.get(topic, {}).get(UNCLEAN_LEADER_ELECTION_ENABLE)
        if value is None:
            return self.config.unclean_leader_election_enable
        return value.strip().lower() == "true"

    def imbalance_ratios(self) -> dict[int, tuple[int, int]]:
        """broker → (partitions it is preferred leader of but does not lead, partitions it is
        preferred leader of)."""
        counts: dict[int, tuple[int, int]] = {}
        for (topic, p), state in sorted(self.view.states.items()):
            replicas = self.replicas(topic, p)
            if replicas is None:
                continue
            preferred = replicas[0]
            off, total = counts.get(preferred, (0, 0))
            counts[preferred] = (off + (state.leader != preferred), total + 1)
        return counts

    # ----- events

    def reconcile(self) -> list[StateChange]:
        """Bring every partition in line with who is live now (what a new controller runs after
        reading the store, and what every broker change runs)."""
        return self._reconcile(self.view.states.keys(), "reconcile")

    def on_brokers_changed(self, brokers: Mapping[int, BrokerInfo], bounced: Collection[int] = (),
                           broker_epochs: Mapping[int, int] | None = None) -> list[StateChange]:
        """The registered brokers are now `brokers` (with `broker_epochs`, their registrations'
        czxids, when known); `bounced` ones re-registered with a new session since the last call."""
        assert set(bounced) <= set(brokers), "a bounced broker is registered again"
        bounced = frozenset(bounced)
        self.view.brokers = dict(brokers)
        if broker_epochs is not None:
            self.view.broker_epochs = dict(broker_epochs)
        self.shutting_down.intersection_update(set(brokers) - bounced)
        if not bounced:
            return self._reconcile(self.view.states.keys(), "broker_change")
        # One write per partition: first as if the bounced brokers were gone, then back.
        changes = []
        for key in sorted(self.view.states):
            replicas = self.replicas(*key)
            if replicas is None:
                continue
            old = self.view.states[key]
            unclean = self.unclean_allowed(key[0])
            gone = next_state(replicas, old, live=self.live - bounced, shutting_down=self.shutting_down,
                              unclean_allowed=unclean, controller_epoch=self.view.controller_epoch)
            back = next_state(replicas, gone, live=self.live, shutting_down=self.shutting_down,
                              unclean_allowed=unclean, controller_epoch=self.view.controller_epoch)
            if back is not old:
                changes.append(self.decided.apply(key, old, back, "broker_bounce"))
        return changes

    def on_topic_created(self, assignment: TopicAssignment,
                         config: Mapping[str, str] | None = None) -> list[StateChange]:
        """A topic's assignment znode appeared: write the initial state of every partition."""
        assert assignment.name not in self.view.topics, assignment.name
        assert set(assignment.replicas) == set(range(assignment.partition_count)), "partitions 0 .. n-1"
        self.view.topics[assignment.name] = assignment
        self.view.topic_configs[assignment.name] = dict(config or {})
        return self._create_states(assignment.name, assignment.replicas)

    def on_partitions_added(self, topic: str, added: Mapping[int, tuple[int, ...]]) -> list[StateChange]:
        """CreatePartitions wrote new partitions into the assignment znode."""
        current = self.view.topics[topic]
        assert added and not set(added) & set(current.replicas), "only new partitions"
        replicas = {**current.replicas, **{p: tuple(r) for p, r in added.items()}}
        assert set(replicas) == set(range(len(replicas))), "partitions 0 .. n-1"
        self.view.topics[topic] = dataclasses.replace(current, replicas=replicas)
        return self._create_states(topic, added)

    def on_topic_config_changed(self, topic: str, config: Mapping[str, str]) -> list[StateChange]:
        """A topic's config changed; enabling unclean election revives its offline partitions
        (Kafka's TopicUncleanLeaderElectionEnable)."""
        if topic not in self.view.topics:
            return []
        self.view.topic_configs[topic] = dict(config)
        return self._reconcile([k for k in self.view.states if k[0] == topic], "topic_config_change")

    def on_topic_deleted(self, topic: str) -> TopicDeletion:
        assignment = self.view.topics.pop(topic, None)
        self.view.topic_configs.pop(topic, None)
        if assignment is None:
            return TopicDeletion(topic, {})
        for p in assignment.replicas:
            self.view.states.pop((topic, p), None)
            self.decided.unconfirmed.pop((topic, p), None)
            self.reassignment.forget((topic, p))
        return TopicDeletion(topic, dict(assignment.replicas))

    def on_alter_partition(self, topic: str, partition: int, leader_id: int, leader_epoch: int,
                           partition_epoch: int, new_isr: Iterable[int],
                           broker_epochs: Mapping[int, int] | None = None) -> AlterPartitionOutcome:
        """A leader proposes a new ISR (see the header for the checks, in order); `broker_epochs`
        gives the incarnation of members it saw fetching (-1 or absent: not said)."""
        key = (topic, partition)
        replicas = self.replicas(topic, partition)
        state = self.view.states.get(key)
        if replicas is None or state is None:
            return AlterPartitionOutcome(ErrorCode.unknown_topic_or_partition)
        if leader_epoch > state.leader_epoch or partition_epoch > state.partition_epoch:
            return AlterPartitionOutcome(ErrorCode.not_controller)
        if leader_epoch < state.leader_epoch:
            return AlterPartitionOutcome(ErrorCode.fenced_leader_epoch)
        if leader_id != state.leader:
            return AlterPartitionOutcome(ErrorCode.invalid_request)
        proposed = list(new_isr)
        if len(set(proposed)) == len(proposed) and set(proposed) == set(state.isr):
            return AlterPartitionOutcome(ErrorCode.none, state)
        if partition_epoch < state.partition_epoch:
            return AlterPartitionOutcome(ErrorCode.invalid_update_version)
        if (not proposed or len(set(proposed)) != len(proposed) or not set(proposed) <= set(replicas)
                or state.leader not in proposed):
            return AlterPartitionOutcome(ErrorCode.invalid_request)
        added = set(proposed) - set(state.isr)
        seen = broker_epochs or {}
        if any(not is_acceptable_leader(r, self.live, self.shutting_down)
               or self.is_stale_broker_epoch(r, seen.get(r, -1)) for r in added):
            return AlterPartitionOutcome(ErrorCode.ineligible_replica)
        isr = tuple(r for r in replicas if r in proposed)
        new = changed_state(replicas, state, state.leader, isr, self.view.controller_epoch)
        assert new.leader_epoch == state.leader_epoch, "an ISR change never changes the leader"
        reason = "alter_partition"
        if added and state.leader in self.shutting_down:
            new = next_state(replicas, new, live=self.live, shutting_down=self.shutting_down, unclean_allowed=False,
                             controller_epoch=self.view.controller_epoch, remove_from_isr={state.leader})
            assert new.leader not in (NO_LEADER, state.leader), "an added member is acceptable"
            reason = "controlled_shutdown"
        change = self.decided.apply(key, state, new, reason)
        return AlterPartitionOutcome(ErrorCode.none, change.new, change)

    def elect_leaders(self, election: ElectionType,
                      partitions: Iterable[TopicPartition] | None = None) -> ElectLeadersOutcome:
        """ElectLeaders; `partitions` None means every partition."""
        keys = sorted(self.view.states) if partitions is None else list(partitions)
        results: dict[TopicPartition, ErrorCode] = {}
        changes = []
        for key in keys:
            replicas = self.replicas(*key)
            state = self.view.states.get(key)
            if replicas is None or state is None:
                results[key] = ErrorCode.unknown_topic_or_partition
                continue
            elect = elect_preferred_leader if election is ElectionType.PREFERRED else elect_unclean_leader
            error, new = elect(replicas, state, live=self.live, shutting_down=self.shutting_down,
                               controller_epoch=self.view.controller_epoch)
            results[key] = error
            if new is not state:
                changes.append(self.decided.apply(key, state, new, f"{election.name.lower()}_election"))
        return ElectLeadersOutcome(results, changes)

    def check_leader_balance(self) -> list[StateChange]:
        """The auto.leader.rebalance.enable timer fired."""
        if not self.config.auto_leader_rebalance_enable:
            return []
        percentage = self.config.leader_imbalance_per_broker_percentage
        imbalanced = {broker for broker, (off, total) in self.imbalance_ratios().items()
                      if off * 100 > percentage * total}  # off / total above the percentage
        changes = []
        for key in sorted(self.view.states):
            replicas = self.replicas(*key)
            state = self.view.states[key]
            if replicas is None or replicas[0] not in imbalanced or state.leader == replicas[0]:
                continue
            error, new = elect_preferred_leader(replicas, state, live=self.live, shutting_down=self.shutting_down,
                                                controller_epoch=self.view.controller_epoch)
            if error is ErrorCode.none:
                changes.append(self.decided.apply(key, state, new, "leader_balance"))
        return changes

    def on_controlled_shutdown(self, broker_id: int) -> ControlledShutdownOutcome:
        """ControlledShutdown from `broker_id` (the shell checks its broker epoch first)."""
        if broker_id not in self.view.brokers:
            return ControlledShutdownOutcome(ErrorCode.broker_not_available)
        self.shutting_down.add(broker_id)
        changes = []
        for key in sorted(self.view.states):
            replicas = self.replicas(*key)
            state = self.view.states[key]
            if replicas is None or broker_id not in state.isr:
                continue
            new = next_state(replicas, state, live=self.live, shutting_down=self.shutting_down,
                             unclean_allowed=False, controller_epoch=self.view.controller_epoch,
                             remove_from_isr={broker_id})
            if state.leader == broker_id and new.leader == NO_LEADER:
                new = state  # no one else to lead: it keeps the partition (reported as remaining)
            if new is not state:
                changes.append(self.decided.apply(key, state, new, "controlled_shutdown"))
        remaining = sorted(k for k, s in self.view.states.items() if s.leader == broker_id)
        return ControlledShutdownOutcome(ErrorCode.none, changes, remaining)

    # ----- the shell reports on writes

    def on_state_written(self, change: StateChange, version: int) -> None:
        """The compare-and-set of `change` succeeded; the znode's version is now `version`."""
        self.decided.confirm(change, version)
        self.reassignment.on_state_written(change)

    def on_write_conflict(self, change: StateChange, stored: PartitionState | None) -> list[StateChange]:
        """The compare-and-set of `change` failed; `stored` is what the store holds now (None: no
        znode). The store is the truth: adopt it and decide again from it."""
        return self.adopt_stored(change.key, stored)

    def adopt_stored(self, key: TopicPartition, stored: PartitionState | None) -> list[StateChange]:
        """What the store holds for `key` is the truth (after a conflict, or a write whose outcome
        is unknown): put it in the view in place of any decided-but-unconfirmed state, and decide
        again from it."""
        self.decided.unconfirmed.pop(key, None)
        if stored is None:  # the znode is gone (the topic is being deleted): nothing to decide
            self.view.states.pop(key, None)
            return []
        self.view.states[key] = stored
        return self._reconcile([key], "write_conflict")

    # ----- internals

    def _create_states(self, topic: str, replicas_by_partition: Mapping[int, tuple[int, ...]]) -> list[StateChange]:
        changes = []
        for p in sorted(replicas_by_partition):
            key = (topic, p)
            assert key not in self.view.states, key
            new = initial_state(replicas_by_partition[p], live=self.live, shutting_down=self.shutting_down,
                                controller_epoch=self.view.controller_epoch)
            changes.append(self.decided.apply(key, None, new, "new_partition"))
        return changes

    def _reconcile(self, keys: Iterable[TopicPartition], reason: str) -> list[StateChange]:
        changes = []
        for key in sorted(keys):
            replicas = self.replicas(*key)
            if replicas is None:
                continue
            old = self.view.states[key]
            new = next_state(replicas, old, live=self.live, shutting_down=self.shutting_down,
                             unclean_allowed=self.unclean_allowed(key[0]),
                             controller_epoch=self.view.controller_epoch)
            if new is not old:
                changes.append(self.decided.apply(key, old, new, reason))
        return changes

