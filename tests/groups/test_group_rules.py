"""The pure group state machine (weir.groups.group), one test per rule, driven with a fake clock."""

import itertools
import struct

import pytest

from weir.groups.consumer_protocol import subscribed_topics
from weir.groups.group import FAR_FUTURE, Effects, Group, GroupConfig, GroupState, JoinRequest, JoinResult, SyncResult
from weir.groups.records import GroupValue, group_value, read_group_value
from weir.protocol.errors import ErrorCode

S = GroupState
SESSION, REBALANCE = 10_000, 30_000


class Driver:
    """A group plus a fake clock; answers for tokens are collected in `answers`."""

    def __init__(self, delay_ms: int = 100, **config) -> None:
        self.now = 1_000_000
        self.group = Group("g", GroupConfig(initial_rebalance_delay_ms=delay_ms, **config), self.now)
        self.answers: dict[object, object] = {}
        self.stores = []
        self._ids = itertools.count()
        self._tokens = itertools.count()

    def _take(self, effects: Effects) -> Effects:
        for token, result in effects.answers:
            assert token not in self.answers, f"token {token} answered twice"
            self.answers[token] = result
        if effects.store is not None:
            self.stores.append(effects.store)
        return effects

    def join(self, member_id="", protocols=(("range", b"r"),), instance=None, session=SESSION, rebalance=REBALANCE,
             version=9):
        token = f"join-{next(self._tokens)}"
        request = JoinRequest(member_id, instance, "client", "host", session, rebalance, "consumer", tuple(protocols),
                              require_known_member_id=version >= 4, supports_skip_assignment=version >= 9)
        self._take(self.group.join(request, f"m{next(self._ids)}", token, self.now))
        return token

    def join_new(self, **kw) -> str:
        """A dynamic member's two JoinGroups (KIP-394); returns the token of the second."""
        first = self.join(**kw)
        result = self.answers[first]
        assert result.error == ErrorCode.member_id_required
        return self.join(member_id=result.member_id, **kw)

    def sync(self, member_id, generation=None, assignments=None, instance=None):
        token = f"sync-{next(self._tokens)}"
        generation = self.group.generation if generation is None else generation
        self._take(self.group.sync(member_id, instance, generation, None, None, assignments or {}, token, self.now))
        return token

    def store_done(self, error=ErrorCode.none):
        store = self.stores.pop(0)
        self._take(self.group.on_group_stored(store, error, self.now))
        return store

    def advance(self, ms: int) -> None:
        """Move the clock, firing each deadline at its own time."""
        target = self.now + ms
        while (deadline := self.group.next_deadline()) <= target:
            self.now = max(self.now, deadline)
            self._take(self.group.on_timer(self.now))
        self.now = target

    def until_join_completes(self) -> None:
        while self.group.is_(S.PREPARING_REBALANCE):
            self.advance(50)

    def result(self, token):
        return self.answers.get(token)


def form_group(d: Driver, count: int) -> list[str]:
    """`count` dynamic members join, sync, and the group is Stable; returns their ids."""
    tokens = [d.join_new() for _ in range(count)]
    if d.group.is_(S.PREPARING_REBALANCE):
        d.until_join_completes()
    members = [d.result(t).member_id for t in tokens]
    leader = d.group.leader
    followers = [d.sync(m) for m in members if m != leader]
    d.sync(leader, assignments={m: m.encode() for m in members})
    d.store_done()
    assert d.group.is_(S.STABLE)
    assert all(d.result(t).error == ErrorCode.none for t in followers)
    return members


# -- JoinGroup ------------------------------------------------------------------------

def test_member_id_required_on_first_join_from_v4():
    d = Driver()
    token = d.join()
    result = d.result(token)
    assert result.error == ErrorCode.member_id_required and result.member_id
    assert d.group.is_(S.EMPTY) and not d.group.members


def test_join_before_v4_is_admitted_without_a_round_trip():
    d = Driver(delay_ms=0)
    token = d.join(version=3)
    assert d.result(token).error == ErrorCode.none
    assert d.group.is_(S.COMPLETING_REBALANCE)


def test_pending_member_expires_after_its_session_timeout():
    d = Driver(delay_ms=0)
    first = d.result(d.join()).member_id
    d.advance(SESSION)
    token = d.join(member_id=first)
    assert d.result(token).error == ErrorCode.unknown_member_id


def test_single_member_completes_join_at_once_without_initial_delay():
    d = Driver(delay_ms=0)
    token = d.join_new()
    result = d.result(token)
    assert result.error == ErrorCode.none and result.generation == 1
    assert result.leader == result.member_id
    assert [m for m, _, _ in result.members] == [result.member_id]
    assert d.group.is_(S.COMPLETING_REBALANCE)


def test_initial_rebalance_delay_gathers_members_into_one_generation():
    d = Driver(delay_ms=3000)
    a = d.join_new()
    d.advance(1000)
    b = d.join_new()
    assert d.result(a) is None and d.result(b) is None
    d.advance(2000)  # first delay ends; a member arrived during it: wait once more
    assert d.result(a) is None
    d.advance(3000)
    assert d.result(a).generation == d.result(b).generation == 1
    assert d.group.is_(S.COMPLETING_REBALANCE)


def test_initial_delay_is_bounded_by_the_rebalance_timeout():
    d = Driver(delay_ms=3000)
    a = d.join_new(rebalance=4000)
    for _ in range(5):
        d.advance(1000)
        d.join_new(rebalance=4000)
    assert d.result(a) is not None and d.result(a).error == ErrorCode.none


def test_join_waits_until_every_known_member_rejoins():
    d = Driver()
    a, b = form_group(d, 2)
    ta = d.join(member_id=a, protocols=(("range", b"changed"),))  # metadata changed: rebalance
    assert d.group.is_(S.PREPARING_REBALANCE) and d.result(ta) is None
    tb = d.join(member_id=b)
    assert d.result(ta).generation == d.result(tb).generation == 2


def test_members_that_do_not_rejoin_are_removed_at_the_rebalance_timeout():
    d = Driver()
    a, b = form_group(d, 2)
    ta = d.join(member_id=a, protocols=(("range", b"changed"),))
    for _ in range(REBALANCE // 1000):
        assert d.group.heartbeat(b, None, 1, d.now) == ErrorCode.rebalance_in_progress  # alive, not rejoining
        d.advance(1000)
    assert d.result(ta).error == ErrorCode.none
    assert set(d.group.members) == {a}


def test_unknown_member_id_rejoin_is_refused():
    d = Driver()
    form_group(d, 1)
    token = d.join(member_id="nobody")
    assert d.result(token).error == ErrorCode.unknown_member_id


def test_follower_rejoining_a_stable_group_with_same_metadata_gets_current_generation():
    d = Driver()
    a, b = form_group(d, 2)
    follower = b if d.group.leader == a else a
    token = d.join(member_id=follower)
    assert d.result(token).error == ErrorCode.none and d.result(token).generation == 1
    assert d.group.is_(S.STABLE)


def test_leader_rejoining_triggers_a_rebalance():
    d = Driver()
    form_group(d, 2)
    d.join(member_id=d.group.leader)
    assert d.group.is_(S.PREPARING_REBALANCE)


def test_protocol_type_or_protocols_must_match_the_group():
    d = Driver()
    form_group(d, 1)
    token = d.join(protocols=(("roundrobin", b""),))
    assert d.result(token).error == ErrorCode.inconsistent_group_protocol


def test_session_timeout_outside_broker_bounds_is_refused():
    d = Driver(min_session_timeout_ms=6000, max_session_timeout_ms=60000)
    assert d.result(d.join(session=1000)).error == ErrorCode.invalid_session_timeout
    assert d.result(d.join(session=100_000)).error == ErrorCode.invalid_session_timeout


def test_group_max_size_refuses_extra_members():
    d = Driver(max_size=1)
    form_group(d, 1)
    assert d.result(d.join()).error == ErrorCode.group_max_size_reached


def test_a_group_loaded_over_group_max_size_rebalances_and_sheds_the_last_to_rejoin():
    """Kafka's onGroupLoaded and acceptJoiningMember (KAFKA-9885): after group.max.size was
    lowered, a loaded group over it rebalances; members rejoin while fewer than the maximum have,
    the others get GROUP_MAX_SIZE_REACHED and leave the group."""
    d = Driver()
    a, b, c = form_group(d, 3)
    value = read_group_value(group_value(d.group.to_record()))
    d.group = Group.from_record("g", value, GroupConfig(initial_rebalance_delay_ms=100, max_size=2), d.now)
    assert d.group.is_(S.PREPARING_REBALANCE)
    first, second = d.join(member_id=b), d.join(member_id=c)
    assert d.result(first) is None and d.result(second) is None
    shed = d.result(d.join(member_id=a))
    assert (shed.error, shed.member_id) == (ErrorCode.group_max_size_reached, "")
    assert set(d.group.members) == {b, c} and d.group.is_(S.COMPLETING_REBALANCE)
    assert d.result(first).error == d.result(second).error == ErrorCode.none
    assert d.result(d.join(member_id=b)).error == ErrorCode.none, "a member of the group stays"
    assert d.result(d.join()).error == ErrorCode.group_max_size_reached


def test_protocol_is_chosen_by_vote_among_protocols_all_members_support():
    d = Driver(delay_ms=100)
    ta = d.join_new(protocols=(("sticky", b"a"), ("range", b"a")))
    tb = d.join_new(protocols=(("range", b"b"), ("sticky", b"b")))
    tc = d.join_new(protocols=(("range", b"c"), ("sticky", b"c"), ("roundrobin", b"c")))
    d.until_join_completes()
    assert {d.result(t).protocol_name for t in (ta, tb, tc)} == {"range"}
    leader = next(t for t in (ta, tb, tc) if d.result(t).members)
    assert {md for _, _, md in d.result(leader).members} == {b"a", b"b", b"c"}


def test_only_the_leader_receives_member_subscriptions():
    d = Driver(delay_ms=100)
    tokens = [d.join_new() for _ in range(3)]
    d.until_join_completes()
    with_members = [t for t in tokens if d.result(t).members]
    assert len(with_members) == 1
    assert d.result(with_members[0]).member_id == d.result(with_members[0]).leader


# -- SyncGroup ----------------------------------------------------------------------------

def test_sync_parks_followers_until_the_leader_assignment_is_stored():
    d = Driver(delay_ms=100)
    tokens = [d.join_new() for _ in range(2)]
    d.until_join_completes()
    ids = [d.result(t).member_id for t in tokens]
    follower = next(m for m in ids if m != d.group.leader)
    tf = d.sync(follower)
    assert d.result(tf) is None
    tl = d.sync(d.group.leader, assignments={m: f"to-{m}".encode() for m in ids})
    assert d.result(tl) is None and d.group.is_(S.COMPLETING_REBALANCE)  # storing
    d.store_done()
    assert d.group.is_(S.STABLE)
    assert d.result(tf).assignment == f"to-{follower}".encode()
    assert d.result(tl).assignment == f"to-{d.group.leader}".encode()


def test_failed_assignment_store_fails_sync_and_rebalances():
    d = Driver(delay_ms=0)
    member = d.result(d.join_new()).member_id
    token = d.sync(member, assignments={member: b"x"})
    d.store_done(ErrorCode.not_coordinator)
    assert d.result(token).error == ErrorCode.not_coordinator
    assert d.group.is_(S.PREPARING_REBALANCE)


def test_sync_with_stale_generation_is_illegal_generation():
    d = Driver()
    [a] = form_group(d, 1)
    assert d.result(d.sync(a, generation=0)).error == ErrorCode.illegal_generation


def test_sync_during_preparing_rebalance_is_rebalance_in_progress():
    d = Driver()
    a, b = form_group(d, 2)
    d.join(member_id=d.group.leader)
    other = a if d.group.leader == b else b
    assert d.result(d.sync(other)).error == ErrorCode.rebalance_in_progress


def test_sync_in_stable_returns_the_members_assignment_again():
    d = Driver()
    [a] = form_group(d, 1)
    assert d.result(d.sync(a)).assignment == a.encode()


def test_a_rebalance_answers_parked_syncs_with_rebalance_in_progress():
    d = Driver(delay_ms=100)
    tokens = [d.join_new() for _ in range(2)]
    d.until_join_completes()
    ids = [d.result(t).member_id for t in tokens]
    follower = next(m for m in ids if m != d.group.leader)
    tf = d.sync(follower)
    d.join_new()  # a third member arrives before the leader synced
    assert d.result(tf).error == ErrorCode.rebalance_in_progress


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout():
    d = Driver(delay_ms=100)
    tokens = [d.join_new() for _ in range(2)]
    d.until_join_completes()
    ids = [d.result(t).member_id for t in tokens]
    leader = d.group.leader
    d.sync(leader, assignments={m: b"" for m in ids})
    d.store_done()
    lazy = next(m for m in ids if m != leader)
    for _ in range(REBALANCE // 1000):
        d.group.heartbeat(lazy, None, 1, d.now)
        d.group.heartbeat(leader, None, 1, d.now)
        d.advance(1000)
    assert lazy not in d.group.members
    assert d.group.is_(S.PREPARING_REBALANCE)


# -- Heartbeat, sessions, LeaveGroup ---------------------------------------------------------

def test_heartbeat_checks_member_then_generation():
    d = Driver()
    [a] = form_group(d, 1)
    assert d.group.heartbeat(a, None, 1, d.now) == ErrorCode.none
    assert d.group.heartbeat("nobody", None, 1, d.now) == ErrorCode.unknown_member_id
    assert d.group.heartbeat(a, None, 0, d.now) == ErrorCode.illegal_generation


def test_heartbeat_during_preparing_rebalance_asks_members_to_rejoin():
    d = Driver()
    a, b = form_group(d, 2)
    d.join(member_id=d.group.leader)
    other = a if d.group.leader == b else b
    assert d.group.heartbeat(other, None, 1, d.now) == ErrorCode.rebalance_in_progress


def test_heartbeat_in_completing_rebalance_is_accepted():
    d = Driver(delay_ms=0)
    member = d.result(d.join_new()).member_id
    assert d.group.heartbeat(member, None, 1, d.now) == ErrorCode.none


def test_session_timeout_removes_a_silent_member_and_rebalances():
    d = Driver()
    a, b = form_group(d, 2)
    for _ in range(SESSION // 1000 + 1):
        d.group.heartbeat(a, None, 1, d.now)
        d.advance(1000)
    assert b not in d.group.members
    assert d.group.is_(S.COMPLETING_REBALANCE) or d.group.is_(S.PREPARING_REBALANCE)


def test_parked_join_keeps_a_member_alive_beyond_its_session():
    d = Driver()
    a, b = form_group(d, 2)
    ta = d.join(member_id=a, protocols=(("range", b"new"),))
    d.advance(SESSION + 1000)  # a is parked; b stops heartbeating
    assert a in d.group.members
    assert d.result(ta).error == ErrorCode.none  # b's expiry completed the join
    assert list(d.group.members) == [a]


def test_leave_removes_member_and_rebalances():
    d = Driver()
    a, b = form_group(d, 2)
    error, effects = d.group.leave(b, None, d.now)
    assert error == ErrorCode.none
    d._take(effects)
    assert b not in d.group.members
    ta = d.join(member_id=a)
    assert d.result(ta).generation == 2


def test_last_member_leaving_empties_the_group_and_stores_it():
    d = Driver()
    [a] = form_group(d, 1)
    error, effects = d.group.leave(a, None, d.now)
    d._take(effects)
    assert d.group.is_(S.EMPTY) and d.group.generation == 2
    assert d.stores[-1].purpose == "empty"


def test_leave_of_unknown_member():
    d = Driver()
    form_group(d, 1)
    assert d.group.leave("nobody", None, d.now)[0] == ErrorCode.unknown_member_id


# -- static membership (KIP-345, KIP-814) -----------------------------------------------------

def test_static_member_joins_without_member_id_required():
    d = Driver(delay_ms=0)
    token = d.join(instance="i-1")
    assert d.result(token).error == ErrorCode.none


def test_static_member_restart_takes_over_without_rebalance():
    d = Driver(delay_ms=100)
    ta, tb = d.join(instance="i-1"), d.join(instance="i-2")
    d.until_join_completes()
    a, b = d.result(ta).member_id, d.result(tb).member_id
    d.sync(b)
    d.sync(d.group.leader, assignments={a: b"A", b: b"B"})
    d.store_done()
    follower_instance = "i-2" if d.group.leader == a else "i-1"
    old = b if follower_instance == "i-2" else a
    token = d.join(instance=follower_instance)
    d.store_done()
    result = d.result(token)
    assert result.error == ErrorCode.none and result.generation == 1 and result.member_id != old
    assert d.group.is_(S.STABLE)
    # the old incarnation is fenced
    assert d.group.heartbeat(old, follower_instance, 1, d.now) == ErrorCode.fenced_instance_id
    assert d.result(d.sync(result.member_id, instance=follower_instance)).assignment in (b"A", b"B")


def static_pair(d: Driver) -> tuple[str, str]:
    """Static members i-1 and i-2 form a Stable group; returns their member ids."""
    ta, tb = d.join(instance="i-1"), d.join(instance="i-2")
    d.until_join_completes()
    a, b = d.result(ta).member_id, d.result(tb).member_id
    d.sync(b if d.group.leader == a else a)
    d.sync(d.group.leader, assignments={a: b"A", b: b"B"})
    d.store_done()
    assert d.group.is_(S.STABLE)
    return a, b


def test_a_static_member_that_does_not_rejoin_in_time_stays_in_the_group():
    """Kafka's onCompleteJoin removes only dynamic members that did not rejoin; a static member
    stays (its session timeout decides), is in the leader's member list, and its late JoinGroup
    gets the generation it is part of."""
    d = Driver()
    a, b = static_pair(d)
    ta = d.join(member_id=a, instance="i-1", protocols=(("range", b"changed"),))
    for _ in range(REBALANCE // 1000):
        assert d.group.heartbeat(b, "i-2", 1, d.now) == ErrorCode.rebalance_in_progress
        d.advance(1000)
    joined = d.result(ta)
    assert joined.error == ErrorCode.none and joined.generation == 2
    assert joined.leader == a and {m for m, _, _ in joined.members} == {a, b}
    late = d.result(d.join(member_id=b, instance="i-2"))
    assert (late.error, late.member_id, late.generation) == (ErrorCode.none, b, 2)


def test_a_rebalance_no_static_member_rejoins_waits_for_them():
    """Kafka's onCompleteJoin with no member rejoined (maybeElectNewJoinedLeader false): the join
    phase goes on for another rebalance timeout; the members stay while their sessions last."""
    d = Driver()
    a, b = static_pair(d)
    assert d.group.leave("", "i-1", d.now)[0] == ErrorCode.none
    for _ in range(2 * REBALANCE // 1000):
        assert d.group.heartbeat(b, "i-2", 1, d.now) == ErrorCode.rebalance_in_progress
        d.advance(1000)
    assert d.group.is_(S.PREPARING_REBALANCE) and set(d.group.members) == {b} and d.group.generation == 1
    d.advance(SESSION)  # b stops heartbeating too: its session ends it, and the group with it
    assert d.group.is_(S.EMPTY) and not d.group.members and d.group.generation == 2


def test_static_leader_restart_is_told_to_skip_assignment():
    d = Driver(delay_ms=0)
    token = d.join(instance="i-1")
    leader = d.result(token).member_id
    d.sync(leader, assignments={leader: b"A"})
    d.store_done()
    again = d.join(instance="i-1")
    d.store_done()
    result = d.result(again)
    assert result.skip_assignment and result.leader == result.member_id and result.members


def test_static_leader_restart_before_v9_is_told_the_old_leader_and_does_not_rebalance():
    """Kafka's updateStaticMemberAndRebalance before JoinGroup v9 (librdkafka sends v5): the
    restarted leader is answered the old leader id and no members, so it syncs as a follower."""
    d = Driver(delay_ms=0)
    token = d.join(instance="i-1")
    leader = d.result(token).member_id
    d.sync(leader, assignments={leader: b"A"})
    d.store_done()
    again = d.join(instance="i-1", version=5)
    d.store_done()
    result = d.result(again)
    assert (result.error, result.generation, result.leader, result.members, result.skip_assignment) == (
        ErrorCode.none, 1, leader, (), False)
    assert result.member_id != leader and d.group.leader == result.member_id and d.group.is_(S.STABLE)
    assert d.result(d.sync(result.member_id, instance="i-1")).assignment == b"A"


def test_fenced_static_member_cannot_commit_or_leave():
    d = Driver(delay_ms=0)
    a = d.result(d.join(instance="i-1")).member_id
    assert d.group.validate_offset_commit("other", "i-1", 1, d.now) == ErrorCode.fenced_instance_id
    assert d.group.leave("other", "i-1", d.now)[0] == ErrorCode.fenced_instance_id
    assert d.group.leave("", "i-1", d.now)[0] == ErrorCode.none
    assert a not in d.group.members


# -- offsets ----------------------------------------------------------------------------------

def test_simple_consumer_commits_into_an_empty_group():
    d = Driver()
    assert d.group.validate_offset_commit("", None, -1, d.now) is None


def test_commit_fencing_follows_generation_and_membership():
    d = Driver()
    [a] = form_group(d, 1)
    assert d.group.validate_offset_commit(a, None, 1, d.now) is None
    assert d.group.validate_offset_commit(a, None, 0, d.now) == ErrorCode.illegal_generation
    assert d.group.validate_offset_commit("nobody", None, 1, d.now) == ErrorCode.unknown_member_id
    assert d.group.validate_offset_commit("", None, -1, d.now) == ErrorCode.unknown_member_id


def test_commit_during_completing_rebalance_is_rebalance_in_progress():
    d = Driver(delay_ms=0)
    member = d.result(d.join_new()).member_id
    assert d.group.validate_offset_commit(member, None, 1, d.now) == ErrorCode.rebalance_in_progress


def test_commit_during_completing_rebalance_checks_membership_and_generation_first():
    """Kafka's validateOffsetCommit comes before doCommitOffsets' REBALANCE_IN_PROGRESS: a member
    of an older generation gets ILLEGAL_GENERATION, one no longer in the group UNKNOWN_MEMBER_ID."""
    d = Driver()
    a, b = form_group(d, 2)
    ta = d.join(member_id=a, protocols=(("range", b"changed"),))
    d.advance(SESSION)  # b neither rejoins nor heartbeats: removed
    assert d.group.is_(S.COMPLETING_REBALANCE) and d.result(ta).generation == 2
    assert d.group.validate_offset_commit(b, None, 1, d.now) == ErrorCode.unknown_member_id
    assert d.group.validate_offset_commit(a, None, 1, d.now) == ErrorCode.illegal_generation
    assert d.group.validate_offset_commit("", None, -1, d.now) == ErrorCode.unknown_member_id
    assert d.group.validate_offset_commit(a, None, 2, d.now) == ErrorCode.rebalance_in_progress


def test_a_group_instance_id_bound_to_no_member_is_an_unknown_member():
    """Kafka's validateCurrentMember: UNKNOWN_MEMBER_ID for an instance id the group does not know,
    even from a member id it knows."""
    d = Driver()
    [a] = form_group(d, 1)
    assert d.group.heartbeat(a, "i-9", 1, d.now) == ErrorCode.unknown_member_id
    assert d.group.validate_offset_commit(a, "i-9", 1, d.now) == ErrorCode.unknown_member_id
    assert d.group.validate_txn_offset_commit(a, "i-9", 1) == ErrorCode.unknown_member_id
    assert d.result(d.sync(a, instance="i-9")).error == ErrorCode.unknown_member_id
    assert d.result(d.join(member_id=a, instance="i-9")).error == ErrorCode.unknown_member_id
    assert d.group.leave(a, "i-9", d.now)[0] == ErrorCode.unknown_member_id
    assert d.group.validate_txn_offset_commit("", None, 1) == ErrorCode.unknown_member_id
    assert d.group.validate_txn_offset_commit("", None, -1) is None
    assert set(d.group.members) == {a}


def test_commit_during_preparing_rebalance_is_allowed_for_the_current_generation():
    d = Driver()
    a, b = form_group(d, 2)
    d.join(member_id=d.group.leader)
    assert d.group.validate_offset_commit(a, None, 1, d.now) is None


def test_later_commit_record_wins():
    from weir.groups.offsets import CommittedOffset
    d = Driver()
    d.group.on_offsets_committed({("t", 0): CommittedOffset(10, -1, "", 1, log_offset=5)})
    d.group.on_offsets_committed({("t", 0): CommittedOffset(7, -1, "", 1, log_offset=3)})
    assert d.group.offsets[("t", 0)].offset == 10


def test_offsets_of_an_empty_group_expire_retention_after_it_became_empty():
    from weir.groups.offsets import CommittedOffset
    d = Driver(offsets_retention_ms=60_000)
    [a] = form_group(d, 1)
    d.group.on_offsets_committed({("t", 0): CommittedOffset(10, -1, "", d.now, log_offset=1)})
    assert d.group.expired_offsets(d.now + 120_000) == []  # Stable: never expire
    d._take(d.group.leave(a, None, d.now)[1])
    emptied = d.now
    assert d.group.expired_offsets(emptied + 59_000) == []
    assert d.group.expired_offsets(emptied + 60_000) == [("t", 0)]


def test_a_stable_consumer_group_expires_the_offsets_of_topics_it_no_longer_subscribes_to():
    """Kafka's removeExpiredOffsets (KIP-496): in a Stable consumer group that knows its subscribed
    topics, an offset of another topic expires retention after its commit; the group's own stay."""
    from weir.groups.offsets import CommittedOffset
    d = Driver(offsets_retention_ms=60_000)
    d.join_new(protocols=(("range", consumer_subscription("orders")),))
    d.until_join_completes()
    [a] = d.group.members
    d.sync(a, assignments={a: b""})
    d.store_done()
    committed = d.now
    d.group.on_offsets_committed({("orders", 0): CommittedOffset(10, -1, "", committed, log_offset=1),
                                  ("old", 0): CommittedOffset(5, -1, "", committed, log_offset=2),
                                  ("old", 1): CommittedOffset(5, -1, "", committed, committed + 1000, log_offset=3),
                                  ("orders", 1): CommittedOffset(5, -1, "", committed, committed + 1000, log_offset=4)})
    assert d.group.expired_offsets(committed + 59_000) == [("old", 1)]  # its own expire timestamp (v1-v4)
    assert d.group.expired_offsets(committed + 60_000) == [("old", 0), ("old", 1)]
    d.join(member_id=a, protocols=(("range", consumer_subscription("orders")),))  # a rebalance: none expire
    assert d.group.is_(S.COMPLETING_REBALANCE) and d.group.expired_offsets(committed + 600_000) == []


def test_offsets_of_a_simple_group_expire_retention_after_commit():
    from weir.groups.offsets import CommittedOffset
    d = Driver(offsets_retention_ms=60_000)
    d.group.on_offsets_committed({("t", 0): CommittedOffset(1, -1, "", d.now, log_offset=1),
                                  ("t", 1): CommittedOffset(1, -1, "", d.now + 30_000, log_offset=2),
                                  # retention_time -(now + 5): Kafka's expire timestamp, however far back
                                  ("t", 2): CommittedOffset(1, -1, "", d.now, -5, log_offset=3)})
    assert d.group.expired_offsets(d.now) == [("t", 2)]
    assert d.group.expired_offsets(d.now + 60_000) == [("t", 0), ("t", 2)]


# -- persistence, deletion, unloading ----------------------------------------------------------

def test_stored_group_reloads_stable_with_its_members():
    d = Driver()
    ids = form_group(d, 2)
    value = read_group_value(group_value(d.group.to_record()))
    loaded = Group.from_record("g", value, d.group.config, d.now + 5)
    assert loaded.is_(S.STABLE) and loaded.generation == 1 and set(loaded.members) == set(ids)
    assert loaded.leader == d.group.leader
    assert loaded.heartbeat(ids[0], None, 1, d.now) == ErrorCode.none
    assert loaded.members[ids[1]].assignment == ids[1].encode()


def test_empty_group_record_reloads_empty():
    value = GroupValue("consumer", 3, None, None, 42, ())
    loaded = Group.from_record("g", read_group_value(group_value(value)), GroupConfig(), 100)
    assert loaded.is_(S.EMPTY) and loaded.generation == 3 and loaded.state_timestamp == 42


def test_only_empty_groups_can_be_deleted():
    d = Driver()
    form_group(d, 1)
    assert d.group.check_deletable() == ErrorCode.non_empty_group
    assert Driver().group.check_deletable() is None


def test_unloading_answers_parked_requests_not_coordinator():
    d = Driver(delay_ms=3000)
    token = d.join_new()
    d._take(d.group.mark_dead(ErrorCode.not_coordinator, d.now))
    assert d.result(token).error == ErrorCode.not_coordinator
    assert d.group.is_(S.DEAD) and d.group.next_deadline() == FAR_FUTURE
    assert d.result(d.join()).error == ErrorCode.coordinator_not_available


def test_illegal_transitions_are_refused():
    d = Driver()
    with pytest.raises(AssertionError):
        d.group._transition(S.STABLE, d.now)


def test_join_results_are_typed():
    d = Driver()
    assert isinstance(d.result(d.join()), JoinResult)
    [a] = form_group(d, 1)
    assert isinstance(d.result(d.sync(a)), SyncResult)


def consumer_subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


def test_offset_delete_spares_the_topics_a_consumer_group_subscribes_to():
    d = Driver(delay_ms=0)
    d.join_new(protocols=(("range", consumer_subscription("orders", "audit")),))
    keys = [("orders", 0), ("refunds", 1)]
    assert d.group.deletable_offsets(keys) == (None, {("orders", 0): ErrorCode.group_subscribed_to_topic,
                                                      ("refunds", 1): ErrorCode.none})
    d.group.protocol_type = "connect"  # another protocol's members: nothing goes while it has any
    assert d.group.deletable_offsets(keys) == (ErrorCode.non_empty_group, {})
    empty = Driver().group
    assert empty.deletable_offsets(keys) == (None, {key: ErrorCode.none for key in keys})


def test_offset_delete_spares_every_topic_while_a_subscription_cannot_be_read():
    """Kafka's computeSubscribedTopics: a subscription that is no ConsumerProtocolSubscription v0
    prefix leaves the subscribed topics unknown, and isSubscribedToTopic is then true for all."""
    assert subscribed_topics(b"\x00") is None
    assert subscribed_topics(consumer_subscription("orders")[:-4]) is None  # no user data
    assert subscribed_topics(consumer_subscription("orders")) == {"orders"}
    d = Driver()
    d.join_new(protocols=(("range", consumer_subscription("orders")),))
    d.join_new(protocols=(("range", b"\x00\x01garbage"),))
    d.until_join_completes()
    assert d.group.is_(S.COMPLETING_REBALANCE) and len(d.group.members) == 2
    keys = [("orders", 0), ("refunds", 1)]
    assert d.group.deletable_offsets(keys) == (None, {key: ErrorCode.group_subscribed_to_topic for key in keys})
