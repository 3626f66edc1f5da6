"""A consumer group of Kafka 4's consumer protocol (KIP-848), pure: one `ConsumerGroup` per group.

Rules this module owns (Kafka's GroupMetadataManager.consumerGroupHeartbeat, ConsumerGroup and
CurrentAssignmentBuilder):

- MEMBERS AND EPOCHS. A member chooses its own member id (KIP-1082; the shell makes one for a v0
  client that sent none) and heartbeats with its member epoch: 0 to join, -1 to leave, -2 for a
  static member leaving to come back (KIP-345: it keeps its place and assignment until its
  session times out, and a new process with the same group.instance.id takes both over). A
  heartbeat from an epoch newer than the member's, or older than its previous epoch, or its
  previous epoch with partitions it no longer has, is FENCED_MEMBER_EPOCH: the client gives its
  partitions up and joins again.
- THE GROUP EPOCH is bumped when a member joins or leaves, a subscription changes (topic names,
  regular expression, assignor), or the partitions of the subscribed topics change (a topic
  created, deleted, grown). A bump makes a new TARGET ASSIGNMENT, computed by the server-side
  assignor (the one most members ask for, else the first of group.consumer.assignors), whose
  epoch is the group epoch it was computed at.
- RECONCILIATION is incremental, revocation first: a member keeps the partitions of its current
  assignment that are in its target; those that are not are pending revocation and it stays at
  its epoch until it heartbeats without them (UNREVOKED_PARTITIONS, within its rebalance timeout,
  else it is fenced); only then does it move to the target epoch and receive new partitions, and
  a partition still held (assigned or pending revocation) by another member is given only once
  that member released it (UNRELEASED_PARTITIONS). So no partition is ever owned by two members:
  `owners` holds each owned partition's one member, and is asserted on every change.
- LIVENESS: a member is alive while its last heartbeat is younger than
  group.consumer.session.timeout.ms; one that is not is removed (fenced), as is one that does not
  revoke within its rebalance timeout. The heartbeat interval is group.consumer.heartbeat.interval.ms.
- REGULAR EXPRESSIONS (subscribed_topic_regex) are RE2's, as Kafka's RE2/J: matched whole against
  topic names, in time linear in the name (a client's pattern cannot stall the broker, as
  backtracking would), never against internal topics; one RE2 does not take (lookarounds,
  backreferences, bad syntax) is INVALID_REGULAR_EXPRESSION.
- OFFSETS (`OffsetBook`): a commit or fetch naming a member must name a current member
  (UNKNOWN_MEMBER_ID) at its current epoch (STALE_MEMBER_EPOCH), through OffsetCommit v9+; an
  empty group takes commits with epoch -1 (an admin, a simple consumer). Offsets of topics the
  group does not subscribe to expire offsets.retention.minutes after their commit.
- States: Empty (no members), Assigning (target behind the group epoch: never seen from outside,
  the target is computed at once), Reconciling (a member not yet at the target), Stable.

Theory of operation: the shell calls `heartbeat` (or `on_timer`) with the topics as the cluster
has them now and the time; the group changes in memory and returns the answer. What must reach
`__consumer_offsets` is the whole group as Kafka's coordinator records (consumer_records); the
shell writes those that differ from what it last wrote and answers once they are in the ISR.
`version` counts the changes of what those records hold, so a heartbeat that changed nothing
(most of them) costs the shell no encoding. No clocks, sockets or randomness here.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, IntEnum

import re2

from weir.groups.assignors import ASSIGNORS, Assignment, AssignmentSpec
from weir.groups.offsets import FAR_FUTURE, OffsetBook
from weir.protocol.errors import ErrorCode

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class ConsumerGroupState(str, Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(IntEnum):
    """Kafka's MemberState, with its record values."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    assignors: tuple[str, ...] = ("uniform", "range")
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 10080 * 60_000
    max_metadata_bytes: int = 4096
    enabled: bool = True  # "consumer" in group.coordinator.rebalance.protocols

    @classmethod
    def from_broker(cls, config) -> ConsumerGroupConfig:
        protocols = {p.strip() for p in config["group.coordinator.rebalance.protocols"].split(",")}
        return cls(config["group.consumer.session.timeout.ms"], config["group.consumer.heartbeat.interval.ms"],
                   parse_assignors(config["group.consumer.assignors"]), config["group.consumer.max.size"],
                   config["offsets.retention.minutes"] * 60_000, config["offset.metadata.max.bytes"],
                   "consumer" in protocols)


def parse_assignors(value: str) -> tuple[str, ...]:
    """group.consumer.assignors: names, or Kafka's class names of its two assignors."""
    classes = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
               "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}
    names = tuple(classes.get(n.strip(), n.strip()) for n in value.split(",") if n.strip())
    unknown = [n for n in names if n not in ASSIGNORS]
    if unknown or not names:
        raise ValueError(f"group.consumer.assignors: unknown assignor(s) {unknown}; known: {sorted(ASSIGNORS)}")
    return names


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a client's bad pattern is its error, answered, not the broker's to log


@functools.lru_cache(maxsize=1024)
def pattern(regex: str):
    """The compiled RE2 pattern (re2.error if RE2 does not take it); cached, as members repeat theirs."""
    return re2.compile(regex, _RE2_OPTIONS)


@dataclass(frozen=True)
class TopicInfo:
    topic_id: uuid.UUID
    name: str
    partitions: int


Topics = Mapping[str, TopicInfo]  # by name: the cluster's topics now


def normalized(assignment: dict) -> Assignment:
    """An assignment without empty topics, with frozensets."""
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


def pairs_of(assignment: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


# -- requests and answers ------------------------------------------------------------------

@dataclass(frozen=True)
class HeartbeatRequest:
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None  # None: not sent (unchanged since the last heartbeat)
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: the member's assignment did not change


def check_heartbeat(group_id: str, request: HeartbeatRequest, assignors: tuple[str, ...],
                    member_id_required: bool) -> tuple[ErrorCode, str] | None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid: INVALID_REQUEST, UNSUPPORTED_ASSIGNOR
    or INVALID_REGULAR_EXPRESSION, with the message; None for a valid request.
    `member_id_required`: version 1 on (KIP-1082), where the client always chooses it."""
    invalid = ErrorCode.invalid_request
    epoch = request.member_epoch
    if not group_id:
        return invalid, "GroupId can't be empty."
    if request.instance_id == "":
        return invalid, "InstanceId can't be empty."
    if request.rack_id == "":
        return invalid, "RackId can't be empty."
    if not request.member_id and (member_id_required or epoch != JOIN_EPOCH):
        return invalid, "MemberId can't be empty."
    if epoch == JOIN_EPOCH:
        if request.rebalance_timeout_ms == -1:
            return invalid, "RebalanceTimeoutMs must be provided in first request."
        if request.owned is None or request.owned:
            return invalid, "TopicPartitions must be empty when (re-)joining."
        if not request.subscribed_topic_names and not request.subscribed_topic_regex:
            return invalid, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    elif epoch == STATIC_LEAVE_EPOCH:
        if request.instance_id is None:
            return invalid, "InstanceId can't be null."
    elif epoch < LEAVE_EPOCH:
        return invalid, "MemberEpoch is invalid."
    if request.server_assignor is not None and request.server_assignor not in assignors:
        return (ErrorCode.unsupported_assignor, f"ServerAssignor {request.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(assignors)}.")
    if request.subscribed_topic_regex is not None:
        try:
            pattern(request.subscribed_topic_regex)
        except re2.error as e:
            return ErrorCode.invalid_regular_expression, f"SubscribedTopicRegex is invalid: {e}"
    return None


# -- members ----------------------------------------------------------------------------------

@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    session_deadline: int = FAR_FUTURE
    rebalance_deadline: int = FAR_FUTURE  # while UNREVOKED_PARTITIONS

    def subscription(self) -> tuple:
        return self.subscribed_topic_names, self.subscribed_topic_regex, self.server_assignor, self.rack_id

    def subscribes_to(self, topic: str) -> bool:
        if topic in self.subscribed_topic_names:
            return True
        return (self.subscribed_topic_regex is not None and topic not in INTERNAL_TOPICS
                and pattern(self.subscribed_topic_regex).fullmatch(topic) is not None)


# -- the group ---------------------------------------------------------------------------------

class ConsumerGroup(OffsetBook):
    def __init__(self, group_id: str, config: ConsumerGroupConfig, partition: int = 0) -> None:
        self.group_id = group_id
        self.config = config
        self.partition = partition  # of __consumer_offsets
        self.group_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id → member id
        # the subscribed topics that exist: name → (topic id, partition count); Kafka's
        # subscription metadata, whose change bumps the group epoch
        self.metadata: dict[str, tuple[uuid.UUID, int]] = {}
        self.target: dict[str, Assignment] = {}
        self.target_epoch = 0
        self.owners: dict[tuple[uuid.UUID, int], str] = {}  # every owned partition → its one member
        self.dead = False
        self.version = 0  # bumped by every change of what the group's records hold
        self._init_offsets()

    # -- queries ----------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch != self.target_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.member_epoch != self.target_epoch or m.state != MemberState.STABLE for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topics(self) -> frozenset[str]:
        return frozenset(self.metadata)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.metadata

    def preferred_assignor(self) -> str:
        """The server assignor most members ask for (Kafka's computePreferredServerAssignor), else the default."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return self.config.assignors[0]
        return max(sorted(counts), key=lambda name: counts[name])

    def next_deadline(self) -> int:
        return min((min(m.session_deadline, m.rebalance_deadline) for m in self.members.values()), default=FAR_FUTURE)

    # -- ownership: the one rule that must never break ----------------------------------------

    def _set_member_assignment(self, member: ConsumerMember, assigned: Assignment, pending: Assignment) -> None:
        """Replace what `member` owns; asserts no partition gets a second owner."""
        for pair in pairs_of(member.assigned) | pairs_of(member.pending_revocation):
            assert self.owners.get(pair) == member.member_id, (pair, self.owners.get(pair), member.member_id)
            del self.owners[pair]
        member.assigned, member.pending_revocation = normalized(assigned), normalized(pending)
        for pair in pairs_of(member.assigned) | pairs_of(member.pending_revocation):
            assert pair not in self.owners, f"partition {pair} owned by {self.owners[pair]} and {member.member_id}"
            self.owners[pair] = member.member_id

    def _release_all(self, member: ConsumerMember) -> None:
        self._set_member_assignment(member, {}, {})

    # -- the heartbeat ------------------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest, topics: Topics, now_ms: int) -> HeartbeatResult:
        """A checked request (`check_heartbeat`) of epoch 0 or above; leaving is `leave`."""
        assert request.member_epoch >= 0, request.member_epoch
        member, error = self._member_for(request)
        if error is not None:
            return HeartbeatResult(error[0], error[1], request.member_id, request.member_epoch)
        is_new = member.member_id not in self.members
        if is_new and len(self.members) >= self.config.max_size:
            return HeartbeatResult(ErrorCode.group_max_size_reached,
                                   f"The consumer group has reached its maximum capacity of {self.config.max_size} "
                                   "members.", request.member_id, request.member_epoch)
        before = (member.member_epoch, member.assigned)
        fingerprint = None if is_new else self._fingerprint(member)
        bump = self._update_member(member, request) or is_new
        if is_new:
            self._add_member(member)
        metadata = self._subscription_metadata(topics)
        if metadata != self.metadata:
            self.metadata = metadata
            bump = True
        if bump:
            self.group_epoch += 1
        self._maybe_update_target()
        self._reconcile(member, request.owned, now_ms)
        if self._fingerprint(member) != fingerprint:
            self.version += 1
        member.session_deadline = now_ms + self.config.session_timeout_ms
        full = (request.rebalance_timeout_ms != -1 and request.owned is not None
                and (request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None))
        send = request.member_epoch == JOIN_EPOCH or full or (member.member_epoch, member.assigned) != before
        return HeartbeatResult(ErrorCode.none, None, member.member_id, member.member_epoch,
                               self.config.heartbeat_interval_ms, dict(member.assigned) if send else None)

    def _fingerprint(self, member: ConsumerMember) -> tuple:
        """What the group's records hold that a heartbeat of `member` may change."""
        return (self.group_epoch, self.target_epoch, len(self.members), member.subscription(), member.client_id,
                member.client_host, member.rebalance_timeout_ms, member.member_epoch, member.previous_member_epoch,
                member.state, member.assigned, member.pending_revocation)

    def _member_for(self, request: HeartbeatRequest) -> tuple[ConsumerMember, tuple[ErrorCode, str] | None]:
        """The member the heartbeat is from (a new one for a join), or the error that fences it."""
        member_id, instance_id, epoch = request.member_id, request.instance_id, request.member_epoch
        if epoch == JOIN_EPOCH:
            if instance_id is not None:
                return self._static_join(request)
            existing = self.members.get(member_id)
            return (existing or ConsumerMember(member_id, rebalance_timeout_ms=request.rebalance_timeout_ms)), None
        member = self.members.get(member_id)
        if member is None:
            return ConsumerMember(member_id), (ErrorCode.unknown_member_id,
                                               f"Member {member_id} is not a member of group {self.group_id}.")
        if instance_id is not None and self.static_members.get(instance_id) != member_id:
            return member, (ErrorCode.fenced_instance_id,
                            f"Static member {member_id} with instance id {instance_id} was fenced by another member.")
        if epoch > member.member_epoch:
            return member, (ErrorCode.fenced_member_epoch,
                            "The consumer group member has a greater epoch than expected.")
        if epoch < member.member_epoch and (epoch != member.previous_member_epoch or request.owned is None
                                            or not pairs_of(request.owned) <= pairs_of(member.assigned)):
            # the previous epoch with a subset of the assignment: the answer that bumped it was lost
            return member, (ErrorCode.fenced_member_epoch, "The consumer group member has a smaller epoch than expected.")
        return member, None

    def _static_join(self, request: HeartbeatRequest) -> tuple[ConsumerMember, tuple[ErrorCode, str] | None]:
        """KIP-345 with KIP-848: a new instance takes over a static member that left with epoch
        -2 (its epoch and assignment); one still active keeps its instance id."""
        existing_id = self.static_members.get(request.instance_id)
        existing = self.members.get(existing_id) if existing_id is not None else None
        if existing is None or existing.member_id == request.member_id:
            return existing or ConsumerMember(request.member_id, instance_id=request.instance_id,
                                              rebalance_timeout_ms=request.rebalance_timeout_ms), None
        if existing.member_epoch != STATIC_LEAVE_EPOCH:
            return existing, (ErrorCode.unreleased_instance_id,
                              f"Static member {existing.member_id} with instance id {request.instance_id} "
                              "is not released yet.")
        successor = ConsumerMember(request.member_id, instance_id=request.instance_id,
                                   subscribed_topic_names=existing.subscribed_topic_names,
                                   subscribed_topic_regex=existing.subscribed_topic_regex,
                                   rebalance_timeout_ms=existing.rebalance_timeout_ms,
                                   server_assignor=existing.server_assignor, rack_id=existing.rack_id,
                                   member_epoch=existing.previous_member_epoch,
                                   previous_member_epoch=existing.previous_member_epoch, state=existing.state)
        assigned, pending = existing.assigned, existing.pending_revocation
        target = self.target.pop(existing.member_id, {})
        self._release_all(existing)
        del self.members[existing.member_id]
        self.members[successor.member_id] = successor
        self.static_members[request.instance_id] = successor.member_id
        self.target[successor.member_id] = target
        self._set_member_assignment(successor, assigned, pending)
        self.version += 1
        return successor, None

    def _update_member(self, member: ConsumerMember, request: HeartbeatRequest) -> bool:
        """Take what the request changes; True if the subscription changed (a group epoch bump)."""
        before = member.subscription()
        if request.subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(request.subscribed_topic_names)))
        if request.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = request.subscribed_topic_regex or None
        if request.server_assignor is not None:
            member.server_assignor = request.server_assignor
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.client_id or request.client_host:
            member.client_id, member.client_host = request.client_id, request.client_host
        return member.subscription() != before

    def _add_member(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def _subscription_metadata(self, topics: Topics) -> dict[str, tuple[uuid.UUID, int]]:
        """The subscribed topics that exist: those named, then (only if a member has one) those
        a regular expression matches, which takes a look at every topic."""
        out = {}
        for name in set().union(*(m.subscribed_topic_names for m in self.members.values())):
            info = topics.get(name)
            if info is not None:
                out[name] = (info.topic_id, info.partitions)
        regexes = {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}
        if regexes:
            for name, info in topics.items():
                if name not in out and name not in INTERNAL_TOPICS and any(pattern(r).fullmatch(name) for r in regexes):
                    out[name] = (info.topic_id, info.partitions)
        return out

    def _maybe_update_target(self) -> None:
        """A group epoch newer than the target: the assignor computes the next target."""
        if self.group_epoch <= self.target_epoch:
            return
        ids = {name: topic_id for name, (topic_id, _) in self.metadata.items()}
        spec = AssignmentSpec(
            subscriptions={m.member_id: frozenset(ids[t] for t in ids if m.subscribes_to(t))
                           for m in self.members.values()},
            partitions={topic_id: count for topic_id, count in self.metadata.values()},
            previous=self.target)
        computed = ASSIGNORS[self.preferred_assignor()](spec)
        self.target = {member_id: normalized(computed.get(member_id, {})) for member_id in self.members}
        self.target_epoch = self.group_epoch

    # -- reconciliation (Kafka's CurrentAssignmentBuilder) ------------------------------------

    def _reconcile(self, member: ConsumerMember, owned: Assignment | None, now_ms: int) -> None:
        was_unrevoked = member.state == MemberState.UNREVOKED_PARTITIONS
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            if not _still_owns(owned, member.pending_revocation):
                self._next_assignment(member, member.member_epoch + 1, owned)
        elif member.state == MemberState.UNRELEASED_PARTITIONS or member.member_epoch != self.target_epoch:
            self._next_assignment(member, member.member_epoch, owned)
        if member.state != MemberState.UNREVOKED_PARTITIONS:
            member.rebalance_deadline = FAR_FUTURE
        elif not was_unrevoked or member.rebalance_deadline == FAR_FUTURE:  # also a static successor's first
            member.rebalance_deadline = now_ms + max(member.rebalance_timeout_ms, 0)

    def _next_assignment(self, member: ConsumerMember, epoch: int, owned: Assignment | None) -> None:
        target = self.target.get(member.member_id, {})
        current = member.assigned
        kept, revoking, adding = {}, {}, {}
        unreleased = False
        for topic in set(target) | set(current):
            want, have = target.get(topic, frozenset()), current.get(topic, frozenset())
            kept[topic] = have & want
            revoking[topic] = have - want
            free = {p for p in want - have if (topic, p) not in self.owners}
            unreleased = unreleased or len(free) < len(want - have)
            adding[topic] = free
        revoking = normalized(revoking)
        if revoking and _still_owns(owned, revoking):
            self._set_member_assignment(member, kept, revoking)
            self._set_epoch(member, epoch)
            member.state = MemberState.UNREVOKED_PARTITIONS
            return
        assigned = {topic: kept.get(topic, frozenset()) | adding.get(topic, frozenset())
                    for topic in set(kept) | set(adding)}
        self._set_member_assignment(member, assigned, {})
        self._set_epoch(member, self.target_epoch)
        member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE

    @staticmethod
    def _set_epoch(member: ConsumerMember, epoch: int) -> None:
        if epoch != member.member_epoch:
            member.previous_member_epoch, member.member_epoch = member.member_epoch, epoch

    # -- leaving and timeouts ----------------------------------------------------------------------

    def leave(self, member_id: str, instance_id: str | None, epoch: int) -> HeartbeatResult:
        """A heartbeat with epoch -1 (leave) or -2 (a static member leaving to come back)."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return HeartbeatResult(ErrorCode.unknown_member_id,
                                       f"Instance id {instance_id} is unknown.", member_id, epoch)
            if current != member_id:
                return HeartbeatResult(ErrorCode.fenced_instance_id,
                                       f"Static member {member_id} with instance id {instance_id} was fenced by "
                                       "another member.", member_id, epoch)
        member = self.members.get(member_id)
        if member is None:
            return HeartbeatResult(ErrorCode.unknown_member_id,
                                   f"Member {member_id} is not a member of group {self.group_id}.", member_id, epoch)
        if epoch == STATIC_LEAVE_EPOCH:
            # stays with its assignment, its place kept until its session ends
            if member.member_epoch != STATIC_LEAVE_EPOCH:
                member.previous_member_epoch, member.member_epoch = member.member_epoch, STATIC_LEAVE_EPOCH
                self.version += 1
            return HeartbeatResult(ErrorCode.none, None, member_id, STATIC_LEAVE_EPOCH)
        self.remove_member(member_id)
        return HeartbeatResult(ErrorCode.none, None, member_id, LEAVE_EPOCH)

    def remove_member(self, member_id: str) -> None:
        """Fence a member out: its partitions are free, the group epoch bumped, a new target made."""
        member = self.members.pop(member_id)
        self._release_all(member)
        self.target.pop(member_id, None)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        still_subscribed = {name for name in self.metadata if any(m.subscribes_to(name) for m in self.members.values())}
        self.metadata = {name: v for name, v in self.metadata.items() if name in still_subscribed}
        self.group_epoch += 1
        self._maybe_update_target()
        self.version += 1

    def on_timer(self, now_ms: int) -> list[tuple[str, str]]:
        """Members whose session expired or who did not revoke in time are fenced: (member id, why)."""
        fenced = []
        for member in list(self.members.values()):
            if member.session_deadline <= now_ms:
                fenced.append((member.member_id, "session timeout"))
            elif member.rebalance_deadline <= now_ms:
                fenced.append((member.member_id, "rebalance timeout"))
        for member_id, _ in fenced:
            self.remove_member(member_id)
        return fenced

    # -- offsets -----------------------------------------------------------------------------------

    def validate_offset_commit(self, member_id: str, member_epoch: int, api_version: int,
                               transactional: bool = False) -> tuple[ErrorCode, str] | None:
        """Kafka's ConsumerGroup.validateOffsetCommit."""
        if self.dead:
            return ErrorCode.coordinator_not_available, "The group is being removed."
        if member_epoch < 0 and not self.members:
            return None  # an admin's or a simple consumer's commit into an empty group
        if transactional and member_epoch < 0 and not member_id:
            return None  # TxnOffsetCommit before v3, or a producer that names no member: as the classic group
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {self.group_id}."
        if not transactional and api_version < 9:
            return ErrorCode.unsupported_version, ("OffsetCommit version 9 or above must be used by members "
                                                   "using the modern group protocol")
        return self._check_epoch(member, member_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> tuple[ErrorCode, str] | None:
        """Kafka's ConsumerGroup.validateOffsetFetch: no member and epoch -1 is an admin's fetch."""
        if member_id is None and member_epoch < 0:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {self.group_id}."
        return self._check_epoch(member, member_epoch)

    @staticmethod
    def _check_epoch(member: ConsumerMember, epoch: int) -> tuple[ErrorCode, str] | None:
        if epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch, (f"The received member epoch {epoch} does not match the expected "
                                                  f"member epoch {member.member_epoch}.")
        return None

    def expired_offsets(self, now_ms: int) -> list[tuple[str, int]]:
        """Kafka's ConsumerGroup expiry: offsets of topics the group does not subscribe to,
        retention after their commit."""
        if self.dead:
            return []
        return self._expired_among(now_ms, self.config.offsets_retention_ms, self.subscribed_topics(), None)

    def deletable_offsets(self, keys) -> tuple[ErrorCode | None, dict]:
        """OffsetDelete: GROUP_SUBSCRIBED_TO_TOPIC for a topic the group subscribes to."""
        if self.dead:
            return ErrorCode.group_id_not_found, {}
        return None, {key: ErrorCode.group_subscribed_to_topic if self.is_subscribed_to_topic(key[0])
                      else ErrorCode.none for key in keys}

    def check_deletable(self) -> ErrorCode | None:
        if self.dead:
            return ErrorCode.group_id_not_found
        return None if not self.members else ErrorCode.non_empty_group

    def mark_dead(self) -> None:
        self.dead = True


def _still_owns(owned: Assignment | None, partitions: Assignment) -> bool:
    """Does the member, by the partitions it says it owns, still hold any of `partitions`? Not
    saying (None) counts as still holding them (Kafka's ownsRevokedPartitions)."""
    if owned is None:
        return True
    return bool(pairs_of(owned) & pairs_of(partitions))
