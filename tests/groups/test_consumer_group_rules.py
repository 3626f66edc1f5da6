"""The pure consumer-protocol group (weir.groups.consumer_group, KIP-848), driven directly with a
fake clock and simulated clients that do what a consumer does with each answer."""

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.groups.assignors import ASSIGNORS, AssignmentSpec
from weir.groups.consumer_group import (ConsumerGroup, ConsumerGroupConfig, ConsumerGroupState, HeartbeatRequest,
                                        MemberState, TopicInfo, check_heartbeat, pairs_of)
from weir.groups.consumer_records import group_records, read_key, rebuild
from weir.protocol.errors import ErrorCode

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"t1": TopicInfo(T1, "t1", 6), "t2": TopicInfo(T2, "t2", 3)}
CONFIG = ConsumerGroupConfig(session_timeout_ms=45000, heartbeat_interval_ms=5000)


class Client:
    """A consumer: owns what its last answer assigned it (revoking at once what it lost)."""

    def __init__(self, group: ConsumerGroup, member_id: str, topics=("t1",), regex=None, instance=None):
        self.group, self.member_id, self.topics, self.regex, self.instance = group, member_id, topics, regex, instance
        self.epoch = 0
        self.owned: dict = {}

    def beat(self, now: int, topics=TOPICS):
        joining = self.epoch == 0
        request = HeartbeatRequest(self.member_id, self.epoch, self.instance, None, 30000 if joining else -1,
                                   tuple(self.topics) if joining and self.topics else None,
                                   self.regex if joining else None, None, dict(self.owned))
        result = self.group.heartbeat(request, topics, now)
        if result.error == ErrorCode.none:
            self.epoch = result.member_epoch
            if result.assignment is not None:
                self.owned = dict(result.assignment)
        elif result.error in (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id):
            self.epoch, self.owned = 0, {}
        return result

    def leave(self):
        self.owned = {}
        return self.group.leave(self.member_id, self.instance, -1)


def settle(clients, now, rounds=6):
    for _ in range(rounds):
        for c in clients:
            c.beat(now)


def test_two_members_split_and_a_third_joins_revoking_first():
    group = ConsumerGroup("g", CONFIG)
    a, b = Client(group, "a"), Client(group, "b")
    a.beat(0)
    assert pairs_of(a.owned) == {(T1, p) for p in range(6)} and a.epoch == 1
    b.beat(0)
    assert b.owned == {} and group.state == ConsumerGroupState.RECONCILING  # a still holds them all
    result = a.beat(1)
    assert len(pairs_of(result.assignment)) == 3 and group.members["a"].state == MemberState.UNREVOKED_PARTITIONS
    assert a.epoch == 1, "revocation first: the epoch moves only once the partitions are given up"
    a.beat(2)
    assert a.epoch == 2
    b.beat(3)
    assert len(pairs_of(b.owned)) == 3 and not pairs_of(a.owned) & pairs_of(b.owned)
    assert group.state == ConsumerGroupState.STABLE and group.group_epoch == group.target_epoch == 2
    c = Client(group, "c")
    c.beat(4)
    settle([a, b, c], 5)
    assert sorted(len(pairs_of(x.owned)) for x in (a, b, c)) == [2, 2, 2]
    assert group.state == ConsumerGroupState.STABLE
    b.leave()
    settle([a, c], 6)
    assert sorted(len(pairs_of(x.owned)) for x in (a, c)) == [3, 3] and "b" not in group.members


def test_a_heartbeat_that_changes_nothing_leaves_the_version():
    group = ConsumerGroup("g", CONFIG)
    a = Client(group, "a")
    a.beat(0)
    version = group.version
    a.beat(1)
    a.beat(2)
    assert group.version == version
    Client(group, "b").beat(3)
    assert group.version > version


def test_epochs_fence():
    group = ConsumerGroup("g", CONFIG)
    a = Client(group, "a")
    a.beat(0)
    ahead = group.heartbeat(HeartbeatRequest("a", 5, owned={}), TOPICS, 1)
    assert ahead.error == ErrorCode.fenced_member_epoch
    unknown = group.heartbeat(HeartbeatRequest("zz", 1, owned={}), TOPICS, 1)
    assert unknown.error == ErrorCode.unknown_member_id
    Client(group, "b").beat(2)
    a.beat(3)
    a.beat(4)
    assert a.epoch == 2
    # the previous epoch with a subset of the assignment: the answer was lost, accepted
    lost = group.heartbeat(HeartbeatRequest("a", 1, owned=dict(a.owned)), TOPICS, 5)
    assert lost.error == ErrorCode.none and lost.member_epoch == 2
    older = group.heartbeat(HeartbeatRequest("a", 0 + 1, owned={T1: frozenset(range(6))}), TOPICS, 5)
    assert older.error == ErrorCode.fenced_member_epoch


def test_request_checks():
    assignors = CONFIG.assignors
    join = HeartbeatRequest("m", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",), owned={})
    assert check_heartbeat("g", join, assignors, True) is None
    assert check_heartbeat("", join, assignors, True)[0] == ErrorCode.invalid_request
    assert check_heartbeat("g", HeartbeatRequest("", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",),
                                                 owned={}), assignors, True)[0] == ErrorCode.invalid_request
    assert check_heartbeat("g", HeartbeatRequest("", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",),
                                                 owned={}), assignors, False) is None  # v0: the server names it
    assert check_heartbeat("g", HeartbeatRequest("m", 0, rebalance_timeout_ms=1, owned={}), assignors,
                           True)[0] == ErrorCode.invalid_request
    assert check_heartbeat("g", HeartbeatRequest("m", -3), assignors, True)[0] == ErrorCode.invalid_request
    assert check_heartbeat("g", HeartbeatRequest("m", -2), assignors, True)[0] == ErrorCode.invalid_request
    bad_assignor = HeartbeatRequest("m", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",),
                                    server_assignor="sticky", owned={})
    assert check_heartbeat("g", bad_assignor, assignors, True)[0] == ErrorCode.unsupported_assignor
    for regex in ("t(", "(?=t)t", r"(t)\1"):  # bad syntax; lookarounds and backreferences are not RE2's
        bad_regex = HeartbeatRequest("m", 0, rebalance_timeout_ms=1, subscribed_topic_regex=regex, owned={})
        assert check_heartbeat("g", bad_regex, assignors, True)[0] == ErrorCode.invalid_regular_expression, regex


def test_a_pattern_that_would_backtrack_for_ever_is_matched_in_linear_time():
    """RE2, as Kafka's RE2/J: (a|aa)+$ against a long name would take a backtracking engine
    (Python's re) longer than the universe has; a client's pattern must not stall the broker."""
    group = ConsumerGroup("g", CONFIG)
    name = "a" * 200 + "b"
    topics = {name: TopicInfo(T1, name, 1)}
    result = group.heartbeat(HeartbeatRequest("m", 0, rebalance_timeout_ms=1, subscribed_topic_regex="(a|aa)+",
                                              owned={}), topics, 0)
    assert result.error == ErrorCode.none and result.assignment == {}


def test_regex_subscription_follows_new_topics():
    group = ConsumerGroup("g", CONFIG)
    a = Client(group, "a", topics=(), regex="t.*")
    a.beat(0)
    assert pairs_of(a.owned) == {(T1, p) for p in range(6)} | {(T2, p) for p in range(3)}
    t3 = uuid.UUID(int=3)
    grown = {**TOPICS, "t3": TopicInfo(t3, "t3", 2), "__consumer_offsets": TopicInfo(uuid.UUID(int=4), "x", 50)}
    epoch = group.group_epoch
    a.beat(1, grown)
    assert group.group_epoch == epoch + 1 and (t3, 1) in pairs_of(a.owned)
    assert "__consumer_offsets" not in group.metadata


def test_session_and_rebalance_timeouts_fence():
    group = ConsumerGroup("g", CONFIG)
    a, b = Client(group, "a"), Client(group, "b")
    a.beat(0)
    b.beat(0)
    assert group.next_deadline() == 45000
    a.owned = {T1: frozenset(range(6))}
    group.heartbeat(HeartbeatRequest("a", a.epoch, owned=dict(a.owned)), TOPICS, 1000)  # does not revoke
    assert group.members["a"].state == MemberState.UNREVOKED_PARTITIONS
    assert group.on_timer(1000 + 30000) == [("a", "rebalance timeout")]
    b.beat(31001)
    assert pairs_of(b.owned) == {(T1, p) for p in range(6)}
    assert group.on_timer(31001 + 45000) == [("b", "session timeout")] and group.state == ConsumerGroupState.EMPTY


def test_static_member_comes_back_with_its_assignment():
    group = ConsumerGroup("g", CONFIG)
    a = Client(group, "a", instance="i1")
    a.beat(0)
    epoch = group.group_epoch
    assert group.leave("a", "i1", -2).member_epoch == -2
    assert group.group_epoch == epoch, "a static leave bumps nothing"
    other = Client(group, "a2", instance="i1")
    result = other.beat(1)
    assert result.error == ErrorCode.none and pairs_of(other.owned) == {(T1, p) for p in range(6)}
    assert "a" not in group.members and group.group_epoch == epoch
    taken = Client(group, "a3", instance="i1").beat(2)
    assert taken.error == ErrorCode.unreleased_instance_id


def test_offsets_need_the_current_epoch():
    group = ConsumerGroup("g", CONFIG)
    assert group.validate_offset_commit("", -1, 9) is None  # an admin into an empty group
    a = Client(group, "a")
    a.beat(0)
    assert group.validate_offset_commit("a", 1, 9) is None
    assert group.validate_offset_commit("a", 0, 9)[0] == ErrorCode.stale_member_epoch
    assert group.validate_offset_commit("a", 1, 8)[0] == ErrorCode.unsupported_version
    assert group.validate_offset_commit("x", 1, 9)[0] == ErrorCode.unknown_member_id
    assert group.validate_offset_commit("", -1, 2, transactional=True) is None  # a producer naming no member
    assert group.validate_offset_commit("a", 0, 3, transactional=True)[0] == ErrorCode.stale_member_epoch
    assert group.validate_offset_fetch(None, -1) is None
    assert group.validate_offset_fetch("a", 7)[0] == ErrorCode.stale_member_epoch


def test_assignors_cover_each_partition_once():
    members = {"a": frozenset({T1}), "b": frozenset({T1, T2}), "c": frozenset({T2})}
    spec = AssignmentSpec(members, {T1: 6, T2: 3}, {})
    for name, assign in ASSIGNORS.items():
        result = assign(spec)
        owned = [pair for m in result.values() for pair in pairs_of(m)]
        assert sorted(owned) == sorted({(T1, p) for p in range(6)} | {(T2, p) for p in range(3)}), name
        assert all(t in members[m] for m, a in result.items() for t in a), name
    uniform = ASSIGNORS["uniform"](AssignmentSpec({"a": frozenset({T1}), "b": frozenset({T1})}, {T1: 6}, {}))
    sticky = ASSIGNORS["uniform"](AssignmentSpec({m: frozenset({T1}) for m in "abc"}, {T1: 6}, uniform))
    moved = sum(len(pairs_of(uniform[m]) - pairs_of(sticky[m])) for m in "ab")
    assert moved == 2 and all(len(pairs_of(a)) == 2 for a in sticky.values())


# -- the property: whatever clients do, no partition is owned by two members ---------------

ACTIONS = st.lists(st.tuples(st.sampled_from(["beat", "join", "leave", "static-leave", "lose", "tick", "topics"]),
                             st.integers(0, 4)), min_size=1, max_size=80)


@settings(max_examples=150, deadline=None)
@given(ACTIONS, st.sampled_from(sorted(ASSIGNORS)))
def test_no_partition_is_ever_owned_by_two_members(actions, assignor):
    group = ConsumerGroup("g", ConsumerGroupConfig(assignors=(assignor,)))
    clients: dict[int, Client] = {}
    topics = dict(TOPICS)
    now = 0
    last_records, last_version = group_records(group), group.version
    for action, n in actions:
        now += 1000
        client = clients.get(n)
        if action == "join" and client is None:
            clients[n] = Client(group, f"m{n}", topics=("t1", "t2")[: 1 + n % 2], instance=f"i{n}" if n == 4 else None)
            clients[n].beat(now, topics)
        elif action == "beat" and client is not None:
            client.beat(now, topics)
        elif action == "leave" and client is not None:
            client.leave()
            del clients[n]
        elif action == "static-leave" and client is not None and client.instance is not None:
            client.owned = {}
            group.leave(client.member_id, client.instance, -2)
            del clients[n]
        elif action == "lose" and client is not None:
            client.epoch, client.owned = 0, {}  # a client that lost its partitions rejoins
        elif action == "tick":
            for member_id, _ in group.on_timer(now + 50_000 * (n == 0)):
                for k, c in list(clients.items()):
                    if c.member_id == member_id:
                        c.owned = {}  # its session is gone: a real client finds out and gives them up
                        del clients[k]
        elif action == "topics":
            topics = {**TOPICS, "t1": TopicInfo(T1, "t1", 6 + n)}
        # the server's view: one owner per partition, and what each member holds is its own
        seen: dict = {}
        for member in group.members.values():
            for pair in pairs_of(member.assigned) | pairs_of(member.pending_revocation):
                assert pair not in seen, (pair, seen.get(pair), member.member_id)
                seen[pair] = member.member_id
        assert seen == group.owners
        # what the coordinator writes gives the same group back (a new coordinator's load), and
        # it changes only with the version (the coordinator skips the records of an unchanged one)
        records = group_records(group)
        assert records == last_records or group.version != last_version, (action, n)
        last_records, last_version = records, group.version
        rebuilt, problems = rebuild("g", {read_key(k): v for k, v in records.items()}, group.config, 0, now)
        assert not problems and group_records(rebuilt) == records and rebuilt.owners == group.owners
        # the clients' view: no two clients hold one partition at once
        held: dict = {}
        for c in clients.values():
            for pair in pairs_of(c.owned):
                assert pair not in held, (pair, held[pair], c.member_id)
                held[pair] = c.member_id
    now += 46_000  # static members that left are fenced once their session ends
    for c in clients.values():
        c.beat(now, topics)
    group.on_timer(now)
    for _ in range(8):
        for c in clients.values():
            c.beat(now, topics)
    if clients:
        assert group.state == ConsumerGroupState.STABLE
        total = sum(len(pairs_of(c.owned)) for c in clients.values())
        wanted = sum(info.partitions for info in topics.values() if any(info.name in c.topics for c in clients.values()))
        assert total == wanted
