"""Rules 6-7: ElectLeaders (PREFERRED, UNCLEAN) and automatic leader balance."""

from kio.schema.errors import ErrorCode

from weir.controller import ControllerConfig, ElectionType
from weir.zk.model import NO_LEADER

from .cluster import keep_only, make_core, state, written


def test_preferred_election_moves_leadership_back():
    core = make_core([1, 2, 3], {"t": {0: (1, 2, 3)}})
    keep_only(core, 2, 3)
    keep_only(core, 1, 2, 3)
    written(core, [core.on_alter_partition("t", 0, 2, 1, 1, [1, 2, 3]).change])
    epoch = state(core).leader_epoch
    outcome = core.elect_leaders(ElectionType.PREFERRED, [("t", 0)])
    written(core, outcome.changes)
    assert outcome.results == {("t", 0): ErrorCode.none}
    assert (state(core).leader, state(core).leader_epoch, state(core).isr) == (1, epoch + 1, (1, 2, 3))


def test_preferred_election_errors_per_partition_like_kafka():
    core = make_core([1, 2, 3], {"t": {0: (1, 2, 3), 1: (2, 3, 1)}})
    keep_only(core, 2, 3)
    keep_only(core, 1, 2, 3)  # 1 is back but not in the ISR of t-0
    outcome = core.elect_leaders(ElectionType.PREFERRED, [("t", 0), ("t", 1), ("t", 2), ("x", 0)])
    assert outcome.results == {
        ("t", 0): ErrorCode.preferred_leader_not_available,
        ("t", 1): ErrorCode.election_not_needed,
        ("t", 2): ErrorCode.unknown_topic_or_partition,
        ("x", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert outcome.changes == []


def test_unclean_elect_leaders_ignores_topic_config_and_only_touches_offline_partitions():
    core = make_core([1, 2, 3], {"t": {0: (1, 2, 3), 1: (2, 3, 1)}})
    written(core, [core.on_alter_partition("t", 0, 1, 0, 0, [1]).change])
    keep_only(core, 2, 3)
    assert state(core).leader == NO_LEADER
    outcome = core.elect_leaders(ElectionType.UNCLEAN, None)
    written(core, outcome.changes)
    assert outcome.results == {("t", 0): ErrorCode.none, ("t", 1): ErrorCode.election_not_needed}
    assert (state(core).leader, state(core).isr) == (2, (2,))


def test_unclean_elect_leaders_without_any_live_replica():
    core = make_core([1], {"t": {0: (1,)}})
    keep_only(core)
    outcome = core.elect_leaders(ElectionType.UNCLEAN, [("t", 0)])
    assert outcome.results == {("t", 0): ErrorCode.eligible_leaders_not_available}


def test_leader_imbalance_triggers_preferred_election_above_percentage():
    core = make_core([1, 2], {"t": {p: (1, 2) for p in range(10)}})
    keep_only(core, 2)
    keep_only(core, 1, 2)
    # 1 rejoins the ISR of every partition except t-9 (where 1 stays out).
    for p in range(9):
        s = state(core, "t", p)
        written(core, [core.on_alter_partition("t", p, 2, s.leader_epoch, s.partition_epoch, [1, 2]).change])
    assert core.imbalance_ratios() == {1: (10, 10)}
    changes = written(core, core.check_leader_balance())
    assert sorted(c.partition for c in changes) == list(range(9))
    assert {c.reason for c in changes} == {"leader_balance"}
    assert core.imbalance_ratios() == {1: (1, 10)}
    assert state(core, "t", 9).leader == 2


def test_leader_imbalance_at_or_below_percentage_does_nothing():
    core = make_core([1, 2], {"t": {p: (1, 2) for p in range(10)}})
    # One partition of ten (10%) led elsewhere: not above leader.imbalance.per.broker.percentage.
    keep_only(core, 2)
    keep_only(core, 1, 2)
    for p in range(1, 10):
        s = state(core, "t", p)
        written(core, [core.on_alter_partition("t", p, 2, s.leader_epoch, s.partition_epoch, [1, 2]).change])
    written(core, core.elect_leaders(ElectionType.PREFERRED, [("t", p) for p in range(1, 10)]).changes)
    assert core.imbalance_ratios() == {1: (1, 10)}
    assert core.check_leader_balance() == []


def test_leader_balance_disabled_by_config():
    core = make_core([1, 2], {"t": {0: (1, 2)}}, config=ControllerConfig(auto_leader_rebalance_enable=False))
    keep_only(core, 2)
    keep_only(core, 1, 2)
    s = state(core)
    written(core, [core.on_alter_partition("t", 0, 2, s.leader_epoch, s.partition_epoch, [1, 2]).change])
    assert core.check_leader_balance() == []
