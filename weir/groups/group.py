"""The consumer group state machine of Kafka's classic protocol: pure, one `Group` per group.

Rules this module owns (Kafka's `GroupCoordinator` and `GroupMetadata`, ZooKeeper-era semantics):

- States and their legal predecessors are the table `PREVIOUS`; every change goes through
  `_transition`, which asserts it.
- A rebalance has two phases. In PreparingRebalance every member must send JoinGroup again; the
  phase ends when all known members have (and no MEMBER_ID_REQUIRED member is still expected), or
  when the rebalance timeout (the largest of the members') passes: dynamic members that did not
  rejoin are removed (static ones stay until their session times out; with none rejoined, the
  phase goes on). A new generation begins: the coordinator picks the protocol all members support
  that most members prefer (Kafka's vote), and answers every parked JoinGroup, the leader with
  every member's subscription. In CompletingRebalance the leader's SyncGroup brings the
  assignment; once it is stored in `__consumer_offsets` every member's parked SyncGroup gets its
  share and the group is Stable.
- A group that had no members (Empty) waits group.initial.rebalance.delay.ms after its first
  JoinGroup, and again as long as new members keep arriving (up to the rebalance timeout), so a
  group of many consumers starting together forms in one rebalance, not one per consumer.
- Generation fencing: a member's SyncGroup, Heartbeat and OffsetCommit must name the current
  generation (ILLEGAL_GENERATION), a member the group has (UNKNOWN_MEMBER_ID), and for a static
  member the member id now bound to its group.instance.id (FENCED_INSTANCE_ID, KIP-345). During
  PreparingRebalance heartbeats answer REBALANCE_IN_PROGRESS: the client's cue to rejoin.
- KIP-394: from JoinGroup v4 a member without an id is given one and told MEMBER_ID_REQUIRED; it
  counts as a member only when it joins again with that id (within its session timeout).
- group.max.size (Kafka's acceptJoiningMember): during a rebalance members are taken while fewer
  than the maximum have rejoined, and one refused (GROUP_MAX_SIZE_REACHED) leaves the group; a
  group loaded over the maximum (it was lowered) rebalances at once, so the last to rejoin go.
- Liveness: a member is alive while its last heartbeat (or join, sync, commit) is younger than
  its session timeout, and always while its JoinGroup or SyncGroup is parked here. After a new
  generation begins, members that do not send SyncGroup within the rebalance timeout are removed.
- Static members (KIP-345) keep their place across restarts: a JoinGroup with a known
  group.instance.id and no member id replaces the old member id; in a Stable group whose
  protocol would not change this needs no rebalance (KIP-814: the leader is told to skip the
  assignment; before JoinGroup v9 it is told the old leader id, and acts as a follower).
- Committed offsets belong to the group. A commit with generation -1 into an Empty (or unknown)
  group is a simple consumer's or an admin's; otherwise it is fenced as above, and refused with
  REBALANCE_IN_PROGRESS in CompletingRebalance (the member's assignment is about to change).
  Offsets of an Empty group expire offsets.retention.minutes after it became Empty; offsets of
  a group never managed by the coordinator, and those of topics a Stable consumer group no longer
  subscribes to, expire that long after their commit (KIP-211, KIP-496).
- Transactional offsets (TxnOffsetCommit, KIP-98) are pending per producer id until the
  transaction's marker lands in the group's `__consumer_offsets` partition: a commit makes those
  that were written visible (unless a later record of the log already holds a newer offset), an
  abort drops them. The checks are Kafka's doTxnCommitOffsets (KIP-447: a member id and a
  generation are checked only when given). While a partition has pending offsets, OffsetFetch
  with require_stable answers UNSTABLE_OFFSET_COMMIT for it (KIP-447).

Theory of operation: the shell calls one method per request or timer with the time `now` (ms),
and a `token` for answers that may have to wait (a parked JoinGroup or SyncGroup). Methods
return `Effects`: answers for tokens (possibly other members' parked requests) and at most one
`StoreGroup` - group metadata to append to `__consumer_offsets`, whose outcome the shell reports
with `on_group_stored`. Timers are deadlines: `next_deadline()` says when `on_timer` is due. No
clocks, sockets or randomness here; new member ids come in from the shell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from weir.groups.consumer_protocol import subscribed_topics
from weir.groups.offsets import FAR_FUTURE, OffsetBook
from weir.groups.records import GroupValue, MemberRecord
from weir.protocol.errors import ErrorCode

NO_GENERATION = -1
UNKNOWN_MEMBER = ""


class GroupState(str, Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState
PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.DEAD: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
}


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 10080 * 60_000
    max_metadata_bytes: int = 4096

    @classmethod
    def from_broker(cls, config) -> GroupConfig:
        return cls(config["group.min.session.timeout.ms"], config["group.max.session.timeout.ms"],
                   config["group.initial.rebalance.delay.ms"], config["group.max.size"],
                   config["offsets.retention.minutes"] * 60_000, config["offset.metadata.max.bytes"])


# -- requests and answers --------------------------------------------------------------

@dataclass(frozen=True)
class JoinRequest:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool = True  # JoinGroup v4+ (KIP-394)
    supports_skip_assignment: bool = True  # JoinGroup v9+ (KIP-814)


@dataclass(frozen=True)
class JoinResult:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER
    generation: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # (member id, instance id, subscription)
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class StoreGroup:
    """Append this group's metadata (or a tombstone when `value` is None); report the outcome
    with `Group.on_group_stored(store, error, now)`."""
    group_id: str
    generation: int
    value: GroupValue | None
    purpose: str  # "assignment", "empty", "static-rejoin", "delete"
    token: object = None  # the static rejoiner's JoinGroup
    member_id: str = ""
    old_leader: str | None = None  # a static leader's JoinGroup before v9 is told this leader (Kafka)


@dataclass
class Effects:
    answers: list[tuple[object, object]] = field(default_factory=list)  # (token, JoinResult | SyncResult)
    store: StoreGroup | None = None

    def answer(self, token, result) -> None:
        if token is not None:
            self.answers.append((token, result))

    def merge(self, other: Effects) -> Effects:
        self.answers += other.answers
        if other.store is not None:
            assert self.store is None, "one store per event"
            self.store = other.store
        return self


# -- members ---------------------------------------------------------------------------

@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    last_heartbeat: int
    assignment: bytes = b""
    awaiting_join: object = None  # token of a parked JoinGroup
    awaiting_sync: object = None  # token of a parked SyncGroup

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise AssertionError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols) -> bool:
        return tuple(protocols) == self.protocols

    def session_deadline(self) -> int:
        """Members with a parked request are kept alive: the rebalance's own timeouts bound them."""
        if self.awaiting_join is not None or self.awaiting_sync is not None:
            return FAR_FUTURE
        return self.last_heartbeat + self.session_timeout_ms


# -- the group ---------------------------------------------------------------------------

class Group(OffsetBook):
    def __init__(self, group_id: str, config: GroupConfig, now_ms: int, partition: int = 0) -> None:
        self.group_id = group_id
        self.config = config
        self.partition = partition  # of __consumer_offsets
        self.state = GroupState.EMPTY
        self.state_timestamp = now_ms
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id → member id
        self.pending_members: dict[str, int] = {}  # MEMBER_ID_REQUIRED ids → deadline
        self.pending_sync: set[str] = set()
        self._init_offsets()
        self.join_deadline = FAR_FUTURE
        self.sync_deadline = FAR_FUTURE
        self.initial_delay_remaining_ms: int | None = None  # set while in the initial delayed join
        self.new_member_added = False
        self.storing_assignment: int | None = None  # generation whose assignment is being stored
        # Kafka's subscribedTopics: what the members of a consumer group's generation subscribe
        # to, fixed when the generation begins; None when not known (not a consumer group, or a
        # subscription it cannot read) - then every topic counts as subscribed
        self.subscribed_topics: frozenset[str] | None = None

    # -- small queries -------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state == state

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def _candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the leader's (or any member's) preference order."""
        if not self.members:
            return []
        common = set.intersection(*(set(m.protocol_names) for m in self.members.values()))
        first = self.members[self.leader] if self.leader in self.members else next(iter(self.members.values()))
        return [p for p in first.protocol_names if p in common]

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        common = set(self._candidate_protocols())
        return protocol_type == self.protocol_type and any(n in common for n in names)

    def select_protocol(self) -> str:
        """Kafka's vote: each member votes for the first protocol of its own list that all
        members support; the most votes win (ties go to the leader's preference)."""
        candidates = self._candidate_protocols()
        assert candidates, "a group with members always has a common protocol"
        votes = {p: 0 for p in candidates}
        for member in self.members.values():
            votes[next(p for p in member.protocol_names if p in votes)] += 1
        return max(candidates, key=lambda p: (votes[p], -candidates.index(p)))

    def _compute_subscribed_topics(self) -> frozenset[str] | None:
        """Kafka's computeSubscribedTopics (GroupMetadata.scala, ClassicGroup.java)."""
        if self.protocol_type != "consumer":
            return None
        if not self.members:
            return frozenset()
        if self.protocol is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            subscribed = subscribed_topics(member.metadata(self.protocol))
            if subscribed is None:
                return None
            topics |= subscribed
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def _current_member_error(self, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """Kafka's validateCurrentMember: a group.instance.id must be bound to this member id
        (FENCED_INSTANCE_ID if to another, UNKNOWN_MEMBER_ID if to none); the member must be here."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return None

    def has_all_members_joined(self) -> bool:
        return all(m.awaiting_join is not None for m in self.members.values()) and not self.pending_members

    def next_deadline(self) -> int:
        if self.is_(S.DEAD):
            return FAR_FUTURE
        deadlines = [self.join_deadline, self.sync_deadline, *self.pending_members.values()]
        deadlines += [m.session_deadline() for m in self.members.values()]
        return min(deadlines)

    # -- transitions ------------------------------------------------------------------

    def _transition(self, state: GroupState, now_ms: int) -> None:
        assert self.state in PREVIOUS[state], f"group {self.group_id}: {self.state.value} → {state.value} is illegal"
        self.state = state
        self.state_timestamp = now_ms

    def _add_member(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader is None:
            self.leader = member.member_id

    def _remove_member(self, member_id: str) -> Member:
        member = self.members.pop(member_id)
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        return member

    def _prepare_rebalance(self, now_ms: int, effects: Effects) -> None:
        """Begin a rebalance (Kafka's prepareRebalance): parked SyncGroups learn of it."""
        if self.is_(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_sync_error(ErrorCode.rebalance_in_progress, effects)
        self.pending_sync.clear()
        self.sync_deadline = FAR_FUTURE
        if self.is_(S.EMPTY) and self.config.initial_rebalance_delay_ms > 0:
            delay = self.config.initial_rebalance_delay_ms
            self.initial_delay_remaining_ms = max(self.rebalance_timeout_ms - delay, 0)
            self.join_deadline = now_ms + delay
        else:
            self.initial_delay_remaining_ms = None
            self.join_deadline = now_ms + self.rebalance_timeout_ms
        self._transition(S.PREPARING_REBALANCE, now_ms)

    def _maybe_prepare_rebalance(self, now_ms: int, effects: Effects) -> None:
        if self.state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            self._prepare_rebalance(now_ms, effects)

    def _reset_and_propagate_sync_error(self, error: ErrorCode, effects: Effects) -> None:
        for member in self.members.values():
            member.assignment = b""
            effects.answer(member.awaiting_sync, SyncResult(error))
            member.awaiting_sync = None
        self.storing_assignment = None

    def _maybe_complete_join(self, now_ms: int, effects: Effects) -> None:
        if self.is_(S.PREPARING_REBALANCE) and self.initial_delay_remaining_ms is None \
                and self.has_all_members_joined():
            self._complete_join(now_ms, effects)

    def _complete_join(self, now_ms: int, effects: Effects) -> None:
        """End the join phase (Kafka's onCompleteJoin): drop the dynamic members that did not
        rejoin, start a generation. Static members that did not rejoin stay (their session timeout
        decides), and the leader is one that rejoined; if no member rejoined, the join phase
        waits another rebalance timeout instead."""
        assert self.is_(S.PREPARING_REBALANCE)
        self.join_deadline = FAR_FUTURE
        self.initial_delay_remaining_ms = None
        for member_id in [m.member_id for m in self.members.values()
                          if m.awaiting_join is None and m.group_instance_id is None]:
            self._remove_member(member_id)
        joined = [m.member_id for m in self.members.values() if m.awaiting_join is not None]
        if self.members and not joined:
            self.join_deadline = now_ms + self.rebalance_timeout_ms
            return
        if self.leader not in joined and joined:
            self.leader = joined[0]  # Kafka's maybeElectNewJoinedLeader
        self.generation += 1
        self.protocol = self.select_protocol() if self.members else None
        self.subscribed_topics = self._compute_subscribed_topics()
        if not self.members:
            self._transition(S.EMPTY, now_ms)
            effects.store = StoreGroup(self.group_id, self.generation, self.to_record(), "empty")
            return
        self._transition(S.COMPLETING_REBALANCE, now_ms)
        everyone = tuple((m.member_id, m.group_instance_id, m.metadata(self.protocol)) for m in self.members.values())
        for member in self.members.values():
            effects.answer(member.awaiting_join, JoinResult(
                ErrorCode.none, member.member_id, self.generation, self.protocol_type, self.protocol, self.leader,
                everyone if member.member_id == self.leader else ()))
            member.awaiting_join = None
            member.last_heartbeat = now_ms
        self.pending_sync = set(self.members)
        self.sync_deadline = now_ms + self.rebalance_timeout_ms

    def _current_join_result(self, member: Member, skip_assignment: bool = False) -> JoinResult:
        everyone = ()
        if member.member_id == self.leader:
            everyone = tuple((m.member_id, m.group_instance_id, m.metadata(self.protocol))
                             for m in self.members.values())
        return JoinResult(ErrorCode.none, member.member_id, self.generation, self.protocol_type, self.protocol,
                          self.leader or "", everyone, skip_assignment)

    # -- JoinGroup ------------------------------------------------------------------------

    def join(self, request: JoinRequest, new_member_id: str, token, now_ms: int) -> Effects:
        effects = Effects()
        if not (self.config.min_session_timeout_ms <= request.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            effects.answer(token, JoinResult(ErrorCode.invalid_session_timeout, request.member_id))
            return effects
        if not self._accepts_joining_member(request):
            # Kafka: the member (or pending member) goes; in a rebalance the last to rejoin are shed
            if request.member_id in self.members:
                self._remove_member(request.member_id)
            self.pending_members.pop(request.member_id, None)
            effects.answer(token, JoinResult(ErrorCode.group_max_size_reached, UNKNOWN_MEMBER))
            self._maybe_complete_join(now_ms, effects)
            return effects
        failed = self._check_join(request)
        if failed is not None:
            effects.answer(token, JoinResult(failed, request.member_id))
            return effects
        if request.member_id == UNKNOWN_MEMBER:
            self._join_unknown_member(request, new_member_id, token, now_ms, effects)
        else:
            self._join_known_member(request, token, now_ms, effects)
        return effects

    def _accepts_joining_member(self, request: JoinRequest) -> bool:
        """Kafka's acceptJoiningMember (group.max.size, KAFKA-9885): an Empty group takes anyone;
        during a rebalance a member that has rejoined stays and others are taken while fewer than
        the maximum have rejoined (so a group over the limit sheds the last to rejoin); otherwise
        members stay and others are taken while the group is below the maximum. Unlike Kafka, a
        restarted static member (unknown member id, known group.instance.id) is always taken: it
        takes its own place back (KAFKA-20601 fixed this for the new consumer protocol)."""
        member_id = request.member_id
        if self.state in (S.EMPTY, S.DEAD):
            return True
        if member_id == UNKNOWN_MEMBER and request.group_instance_id in self.static_members:
            return True
        member = self.members.get(member_id)
        if self.is_(S.PREPARING_REBALANCE):
            awaiting = sum(m.awaiting_join is not None for m in self.members.values())
            return (member is not None and member.awaiting_join is not None) or awaiting < self.config.max_size
        return member is not None or len(self.members) < self.config.max_size

    def _check_join(self, request: JoinRequest) -> ErrorCode | None:
        if self.is_(S.DEAD):
            # the group was just deleted or unloaded: the member should find the coordinator again
            return ErrorCode.coordinator_not_available
        if not self.supports_protocols(request.protocol_type, [n for n, _ in request.protocols]):
            return ErrorCode.inconsistent_group_protocol
        return None

    def _new_member(self, request: JoinRequest, member_id: str, token, now_ms: int) -> Member:
        return Member(member_id, request.group_instance_id, request.client_id, request.client_host,
                      request.rebalance_timeout_ms, request.session_timeout_ms, request.protocol_type,
                      tuple(request.protocols), now_ms, awaiting_join=token)

    def _join_unknown_member(self, request: JoinRequest, new_member_id: str, token, now_ms: int,
                             effects: Effects) -> None:
        instance_id = request.group_instance_id
        if instance_id is not None and instance_id in self.static_members:
            self._rejoin_static_member(request, new_member_id, token, now_ms, effects)
        elif instance_id is None and request.require_known_member_id:
            # KIP-394: remember the id, and make the member prove it is alive by joining with it
            self.pending_members[new_member_id] = now_ms + request.session_timeout_ms
            effects.answer(token, JoinResult(ErrorCode.member_id_required, new_member_id))
        else:
            self._add_member_and_rebalance(request, new_member_id, token, now_ms, effects)

    def _add_member_and_rebalance(self, request: JoinRequest, member_id: str, token, now_ms: int,
                                  effects: Effects) -> None:
        self._add_member(self._new_member(request, member_id, token, now_ms))
        self.new_member_added = True
        self._maybe_prepare_rebalance(now_ms, effects)
        self._maybe_complete_join(now_ms, effects)

    def _update_member_and_rebalance(self, member: Member, request: JoinRequest, token, now_ms: int,
                                     effects: Effects) -> None:
        member.protocols = tuple(request.protocols)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.last_heartbeat = now_ms
        if member.awaiting_join is not None and member.awaiting_join is not token:
            effects.answer(member.awaiting_join, JoinResult(ErrorCode.unknown_member_id, member.member_id))
        member.awaiting_join = token
        self._maybe_prepare_rebalance(now_ms, effects)
        self._maybe_complete_join(now_ms, effects)

    def _join_known_member(self, request: JoinRequest, token, now_ms: int, effects: Effects) -> None:
        member_id = request.member_id
        if member_id in self.pending_members:
            del self.pending_members[member_id]
            self._add_member_and_rebalance(request, member_id, token, now_ms, effects)
            return
        error = self._current_member_error(member_id, request.group_instance_id)
        if error is None and self.is_(S.EMPTY):
            error = ErrorCode.unknown_member_id
        if error is not None:
            effects.answer(token, JoinResult(error, member_id))
            return
        member = self.members[member_id]
        if self.is_(S.COMPLETING_REBALANCE) and member.matches(request.protocols):
            # it lost the JoinGroup answer of this generation: give it again
            member.last_heartbeat = now_ms
            effects.answer(token, self._current_join_result(member))
        elif self.is_(S.STABLE) and member_id != self.leader and member.matches(request.protocols):
            member.last_heartbeat = now_ms
            effects.answer(token, self._current_join_result(member))
        else:
            self._update_member_and_rebalance(member, request, token, now_ms, effects)

    def _rejoin_static_member(self, request: JoinRequest, new_member_id: str, token, now_ms: int,
                              effects: Effects) -> None:
        """KIP-345: a restarted static member takes over its old place under a new member id."""
        old_id = self.static_members[request.group_instance_id]
        old = self.members.pop(old_id)
        effects.answer(old.awaiting_join, JoinResult(ErrorCode.fenced_instance_id, old_id))
        effects.answer(old.awaiting_sync, SyncResult(ErrorCode.fenced_instance_id))
        old_protocols = old.protocols
        old.member_id = new_member_id
        old.awaiting_join = old.awaiting_sync = None
        old.client_id, old.client_host = request.client_id, request.client_host
        old.rebalance_timeout_ms, old.session_timeout_ms = request.rebalance_timeout_ms, request.session_timeout_ms
        old.protocols = tuple(request.protocols)
        old.last_heartbeat = now_ms
        self.members[new_member_id] = old
        self.static_members[request.group_instance_id] = new_member_id
        if self.leader == old_id:
            self.leader = new_member_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_member_id)
        member = old
        if self.is_(S.STABLE):
            unchanged = self.select_protocol() == self.protocol and member.metadata(self.protocol) == dict(
                old_protocols).get(self.protocol)
            if unchanged:
                # Kafka's updateStaticMemberAndRebalance: a leader that cannot be told to skip the
                # assignment (JoinGroup before v9) is told the old leader id, so it acts as a follower
                legacy_leader = old_id if self.leader == new_member_id and not request.supports_skip_assignment \
                    else None
                effects.store = StoreGroup(self.group_id, self.generation, self.to_record(), "static-rejoin",
                                           token, new_member_id, legacy_leader)
                return
        member.awaiting_join = token
        self._maybe_prepare_rebalance(now_ms, effects)
        self._maybe_complete_join(now_ms, effects)

    # -- SyncGroup ---------------------------------------------------------------------

    def sync(self, member_id: str, instance_id: str | None, generation: int, protocol_type: str | None,
             protocol_name: str | None, assignments: dict[str, bytes], token, now_ms: int) -> Effects:
        effects = Effects()
        error = self._validate_member(member_id, instance_id, generation)
        if error is None and ((protocol_type is not None and protocol_type != self.protocol_type)
                              or (protocol_name is not None and protocol_name != self.protocol)):
            error = ErrorCode.inconsistent_group_protocol
        if error is None:
            error = {S.EMPTY: ErrorCode.unknown_member_id, S.PREPARING_REBALANCE: ErrorCode.rebalance_in_progress,
                     S.DEAD: ErrorCode.coordinator_not_available}.get(self.state)
        if error is not None:
            effects.answer(token, SyncResult(error))
            return effects
        member = self.members[member_id]
        member.last_heartbeat = now_ms
        self.pending_sync.discard(member_id)
        if not self.pending_sync:
            self.sync_deadline = FAR_FUTURE
        if self.is_(S.STABLE):
            effects.answer(token, SyncResult(ErrorCode.none, self.protocol_type, self.protocol, member.assignment))
            return effects
        assert self.is_(S.COMPLETING_REBALANCE)
        member.awaiting_sync = token
        if member_id == self.leader and self.storing_assignment is None:
            for m in self.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            self.storing_assignment = self.generation
            effects.store = StoreGroup(self.group_id, self.generation, self.to_record(), "assignment")
        return effects

    def on_group_stored(self, store: StoreGroup, error: ErrorCode, now_ms: int) -> Effects:
        """The shell's report on a StoreGroup: the append reached the ISR, or failed with `error`."""
        effects = Effects()
        if store.purpose == "assignment":
            if not (self.is_(S.COMPLETING_REBALANCE) and self.generation == store.generation
                    and self.storing_assignment == store.generation):
                return effects  # a rebalance began meanwhile and answered the parked SyncGroups
            if error:
                self._reset_and_propagate_sync_error(error, effects)
                self._maybe_prepare_rebalance(now_ms, effects)
                return effects
            self.storing_assignment = None
            self._transition(S.STABLE, now_ms)
            for member in self.members.values():
                effects.answer(member.awaiting_sync, SyncResult(ErrorCode.none, self.protocol_type, self.protocol,
                                                                member.assignment))
                member.awaiting_sync = None
        elif store.purpose == "static-rejoin":
            member = self.members.get(store.member_id)
            if member is None or not self.is_(S.STABLE) or self.generation != store.generation:
                effects.answer(store.token, JoinResult(ErrorCode.unknown_member_id, store.member_id))
            elif error:
                effects.answer(store.token, JoinResult(error, store.member_id))
                self._maybe_prepare_rebalance(now_ms, effects)
            elif store.old_leader is not None:
                member.last_heartbeat = now_ms
                effects.answer(store.token, JoinResult(ErrorCode.none, member.member_id, self.generation,
                                                       self.protocol_type, self.protocol, store.old_leader))
            else:
                member.last_heartbeat = now_ms
                effects.answer(store.token, self._current_join_result(member,
                                                                      skip_assignment=member.member_id == self.leader))
        return effects

    # -- Heartbeat, LeaveGroup -------------------------------------------------------------

    def _validate_member(self, member_id: str, instance_id: str | None, generation: int | None) -> ErrorCode | None:
        """Kafka's validateCurrentMember, then the generation."""
        if self.is_(S.DEAD):
            return ErrorCode.coordinator_not_available
        error = self._current_member_error(member_id, instance_id)
        if error is not None:
            return error
        if generation is not None and generation != self.generation:
            return ErrorCode.illegal_generation
        return None

    def heartbeat(self, member_id: str, instance_id: str | None, generation: int, now_ms: int) -> ErrorCode:
        if self.is_(S.EMPTY):
            return ErrorCode.unknown_member_id
        error = self._validate_member(member_id, instance_id, generation)
        if error is not None:
            return error
        self.members[member_id].last_heartbeat = now_ms
        if self.is_(S.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, member_id: str, instance_id: str | None, now_ms: int) -> tuple[ErrorCode, Effects]:
        effects = Effects()
        if self.is_(S.DEAD):
            return ErrorCode.coordinator_not_available, effects
        if member_id == UNKNOWN_MEMBER and instance_id is not None:
            member_id = self.static_members.get(instance_id, UNKNOWN_MEMBER)
            if member_id == UNKNOWN_MEMBER:
                return ErrorCode.unknown_member_id, effects
        elif member_id in self.pending_members:
            del self.pending_members[member_id]
            self._maybe_complete_join(now_ms, effects)
            return ErrorCode.none, effects
        else:
            error = self._current_member_error(member_id, instance_id)
            if error is not None:
                return error, effects
        self._remove_member_and_update_group(member_id, now_ms, effects)
        return ErrorCode.none, effects

    def _remove_member_and_update_group(self, member_id: str, now_ms: int, effects: Effects) -> None:
        member = self._remove_member(member_id)
        effects.answer(member.awaiting_join, JoinResult(ErrorCode.unknown_member_id, member_id))
        effects.answer(member.awaiting_sync, SyncResult(ErrorCode.unknown_member_id))
        if self.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(now_ms, effects)
        self._maybe_complete_join(now_ms, effects)

    # -- timers ----------------------------------------------------------------------------

    def on_timer(self, now_ms: int) -> Effects:
        """Everything whose deadline is at or before `now_ms`."""
        effects = Effects()
        if self.is_(S.DEAD):
            return effects
        for member_id, deadline in list(self.pending_members.items()):
            if deadline <= now_ms:
                del self.pending_members[member_id]
                self._maybe_complete_join(now_ms, effects)
        for member in list(self.members.values()):
            if member.member_id in self.members and member.session_deadline() <= now_ms:
                self._remove_member_and_update_group(member.member_id, now_ms, effects)
        if self.is_(S.PREPARING_REBALANCE) and self.join_deadline <= now_ms:
            if self.initial_delay_remaining_ms is not None and self.new_member_added \
                    and self.initial_delay_remaining_ms > 0:
                # more members arrived during the delay: wait once more for the ones behind them
                self.new_member_added = False
                delay = min(self.config.initial_rebalance_delay_ms, self.initial_delay_remaining_ms)
                self.initial_delay_remaining_ms = max(self.initial_delay_remaining_ms - delay, 0)
                self.join_deadline = now_ms + delay
            else:
                self._complete_join(now_ms, effects)
        if self.sync_deadline <= now_ms:
            self.sync_deadline = FAR_FUTURE
            late = [m for m in self.pending_sync if m in self.members]
            self.pending_sync.clear()
            if late and self.state in (S.COMPLETING_REBALANCE, S.STABLE):
                for member_id in late:
                    member = self._remove_member(member_id)
                    effects.answer(member.awaiting_join, JoinResult(ErrorCode.unknown_member_id, member_id))
                    effects.answer(member.awaiting_sync, SyncResult(ErrorCode.unknown_member_id))
                self._prepare_rebalance(now_ms, effects)
                self._maybe_complete_join(now_ms, effects)
        return effects

    # -- offsets --------------------------------------------------------------------------

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               now_ms: int) -> ErrorCode | None:
        """May this commit be written? (Kafka's validateOffsetCommit and doCommitOffsets, in their order.)"""
        error = self._offset_commit_error(member_id, instance_id, generation, transactional=False)
        if error is not None:
            return error
        if self.is_(S.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress  # a current member: its assignment is about to change
        if member_id in self.members:
            self.members[member_id].last_heartbeat = now_ms
        return None

    def _offset_commit_error(self, member_id: str, instance_id: str | None, generation: int,
                             transactional: bool) -> ErrorCode | None:
        """Kafka's validateOffsetCommit: an Empty group takes a commit without a generation (a
        simple consumer, an admin, a producer); a commit naming a member, an instance or a
        generation must come from a current member of this generation; a non-member's commit
        into a group with members is refused, unless transactional (older TxnOffsetCommit
        versions carry neither)."""
        if self.is_(S.DEAD):
            return ErrorCode.coordinator_not_available
        if generation < 0 and self.is_(S.EMPTY):
            return None
        if generation >= 0 or member_id != UNKNOWN_MEMBER or instance_id is not None:
            error = self._current_member_error(member_id, instance_id)
            if error is None and generation != self.generation:
                error = ErrorCode.illegal_generation
            return error
        if not transactional and not self.is_(S.EMPTY):
            return ErrorCode.unknown_member_id
        return None

    # -- transactional offsets (KIP-98, KIP-447) ----------------------------------------------

    def validate_txn_offset_commit(self, member_id: str, instance_id: str | None, generation: int) -> ErrorCode | None:
        """Kafka's doTxnCommitOffsets checks (validateOffsetCommit, transactional)."""
        return self._offset_commit_error(member_id, instance_id, generation, transactional=True)

    def expired_offsets(self, now_ms: int) -> list[tuple[str, int]]:
        """Kafka's removeExpiredOffsets (KIP-211, KIP-496): an Empty group's offsets expire
        retention after it became Empty; in a Stable consumer group that knows its subscribed
        topics, the offsets of topics it does not subscribe to expire retention after their commit;
        the offsets of a group the coordinator never managed (no protocol type), retention after
        their commit. A commit's own expire timestamp (OffsetCommit v1-v4 retention_time) replaces
        the retention rule. Other groups keep their offsets. An offset with transactional offsets
        pending for its partition does not expire."""
        if self.is_(S.EMPTY):
            since = self.state_timestamp if self.protocol_type is not None else None
            return self._expired_among(now_ms, self.config.offsets_retention_ms, frozenset(), since)
        if self.protocol_type == "consumer" and self.subscribed_topics is not None and self.is_(S.STABLE):
            return self._expired_among(now_ms, self.config.offsets_retention_ms, self.subscribed_topics, None)
        return []

    def deletable_offsets(self, keys) -> tuple[ErrorCode | None, dict]:
        """OffsetDelete, as Kafka's coordinator decides it: (the group's error, or None with each
        partition's: none to delete, GROUP_SUBSCRIBED_TO_TOPIC while the consumer group's generation
        subscribes to its topic, or to every topic when a subscription cannot be read). Only an
        Empty group, or a consumer group, gives offsets up."""
        if self.is_(S.DEAD):
            return ErrorCode.group_id_not_found, {}
        if self.is_(S.EMPTY):
            return None, {key: ErrorCode.none for key in keys}
        if self.protocol_type != "consumer":
            return ErrorCode.non_empty_group, {}
        return None, {key: ErrorCode.group_subscribed_to_topic if self.is_subscribed_to_topic(key[0])
                      else ErrorCode.none for key in keys}

    # -- deletion, unloading ------------------------------------------------------------------

    def check_deletable(self) -> ErrorCode | None:
        if self.is_(S.DEAD):
            return ErrorCode.group_id_not_found
        if not self.is_(S.EMPTY):
            return ErrorCode.non_empty_group
        return None

    def mark_dead(self, error: ErrorCode, now_ms: int) -> Effects:
        """Deleted, expired or unloaded (this broker is no longer its coordinator): parked requests
        are answered with `error` (NOT_COORDINATOR sends the members to the new coordinator)."""
        effects = Effects()
        for member in self.members.values():
            effects.answer(member.awaiting_join, JoinResult(error, member.member_id))
            effects.answer(member.awaiting_sync, SyncResult(error))
            member.awaiting_join = member.awaiting_sync = None
        self._transition(S.DEAD, now_ms)
        self.join_deadline = self.sync_deadline = FAR_FUTURE
        self.pending_members.clear()
        self.pending_sync.clear()
        return effects

    # -- persistence ----------------------------------------------------------------------

    def to_record(self) -> GroupValue:
        protocol = self.protocol
        members = tuple(MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                     m.rebalance_timeout_ms, m.session_timeout_ms,
                                     m.metadata(protocol) if protocol else b"", m.assignment)
                        for m in self.members.values()) if protocol else ()
        return GroupValue(self.protocol_type or "", self.generation, protocol, self.leader if members else None,
                          self.state_timestamp, members)

    @classmethod
    def from_record(cls, group_id: str, value: GroupValue, config: GroupConfig, now_ms: int,
                    partition: int = 0) -> Group:
        """A group as its last stored metadata describes it (a new coordinator loading the log):
        Stable with its members, whose sessions start now (rebalancing if there are more than
        group.max.size); or Empty."""
        group = cls(group_id, config, now_ms, partition)
        group.generation = value.generation
        group.protocol_type = value.protocol_type or None
        if value.members:
            group.protocol = value.protocol
            for m in value.members:
                group._add_member(Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                         m.rebalance_timeout_ms, m.session_timeout_ms, value.protocol_type,
                                         ((value.protocol, m.subscription),), now_ms, m.assignment))
            group.leader = value.leader if value.leader in group.members else next(iter(group.members))
            group.state = S.STABLE
        group.subscribed_topics = group._compute_subscribed_topics()
        if len(group.members) > config.max_size:
            # Kafka's onGroupLoaded: group.max.size was lowered; the members rejoin, the last are shed
            group._prepare_rebalance(now_ms, Effects())
        group.state_timestamp = value.current_state_timestamp if value.current_state_timestamp >= 0 else now_ms
        return group

    def summary(self) -> dict:
        """DescribeGroups: member metadata and assignments only when Stable (as Kafka)."""
        stable = self.is_(S.STABLE)
        return {"group_id": self.group_id, "group_state": self.state.value,
                "protocol_type": self.protocol_type or "", "protocol_data": (self.protocol or "") if stable else "",
                "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                             "client_id": m.client_id, "client_host": m.client_host,
                             "member_metadata": m.metadata(self.protocol) if stable else b"",
                             "member_assignment": m.assignment if stable else b""}
                            for m in self.members.values()]}

