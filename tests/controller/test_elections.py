"""Rules 2-4: the initial state, clean and unclean election when brokers go, revival when they come back."""

import uuid

from weir.controller import ControllerConfig
from weir.zk.model import NO_LEADER, TopicAssignment

from .cluster import keep_only, make_core, state, written


def test_initial_state_leader_is_first_live_replica_and_isr_the_live_replicas():
    core = make_core([2, 3], {"t": {0: (1, 2, 3), 1: (3, 1, 2)}})
    assert (state(core).leader, state(core).isr, state(core).leader_epoch) == (2, (2, 3), 0)
    assert (state(core, "t", 1).leader, state(core, "t", 1).isr) == (3, (3, 2))
    assert state(core).partition_epoch == 0
    assert state(core).controller_epoch == 1


def test_new_partition_with_no_live_replica_waits_offline_for_the_first_to_register():
    core = make_core([9], {"t": {0: (1, 2)}})
    assert (state(core).leader, state(core).isr) == (NO_LEADER, (1, 2))
    keep_only(core, 9, 2)
    assert (state(core).leader, state(core).isr) == (2, (2,))


def test_topic_creation_changes_are_creates_sent_to_live_replicas():
    core = make_core([1, 2, 3], {})
    changes = core.on_topic_created(TopicAssignment("t", uuid.uuid4(), {0: (1, 2, 4)}))
    assert [(c.old, c.expected_version, c.notify, c.reason) for c in changes] == [(None, None, (1, 2), "new_partition")]


def test_clean_election_picks_first_live_isr_replica_in_assignment_order():
    core = make_core([1, 2, 3, 4], {"t": {0: (1, 2, 3, 4)}})
    before = state(core)
    # The ISR order differs from the assignment order: assignment order decides.
    written(core, [core.on_alter_partition("t", 0, 1, 0, 0, [1, 4, 3]).change])
    changes = keep_only(core, 2, 3, 4)
    after = state(core)
    assert after.leader == 3  # 2 is live but not in the ISR
    assert set(after.isr) == {3, 4}
    assert after.leader_epoch == before.leader_epoch + 1
    assert [c.key for c in changes] == [("t", 0)]
    assert changes[0].old.partition_epoch == 1 and changes[0].new.partition_epoch == 2
    assert changes[0].notify == (2, 3, 4)


def test_dead_follower_leaves_the_isr_without_a_leader_epoch_bump():
    """KRaft since 3.6 (KAFKA-15021): only a leader change bumps the leader epoch."""
    core = make_core([1, 2, 3], {"t": {0: (1, 2, 3)}})
    keep_only(core, 1, 3)
    assert (state(core).leader, state(core).isr, state(core).leader_epoch, state(core).partition_epoch) == \
        (1, (1, 3), 0, 1)


def test_one_batch_for_all_affected_partitions():
    core = make_core([1, 2, 3], {"t": {0: (1, 2), 1: (2, 3), 2: (3, 1)}, "u": {0: (2, 1)}})
    changes = keep_only(core, 1, 3)
    assert sorted(c.key for c in changes) == [("t", 0), ("t", 1), ("u", 0)]
    assert state(core, "t", 1).leader == 3 and state(core, "u", 0).leader == 1


def test_partition_goes_offline_when_no_isr_member_is_live():
    core = make_core([1, 2, 3], {"t": {0: (1, 2, 3)}})
    written(core, [core.on_alter_partition("t", 0, 1, 0, 0, [1, 2]).change])
    keep_only(core, 3)
    offline = state(core)
    assert offline.leader == NO_LEADER
    assert offline.isr == (1,)  # the last member (the old leader) is kept for a later clean election
    assert offline.leader_epoch == 1  # losing the leader is a leader change


def test_unclean_election_picks_first_live_replica_when_enabled_by_topic_config():
    configs = {"t": {"unclean.leader.election.enable": "true"}}
    core = make_core([1, 2, 3, 4], {"t": {0: (1, 2, 3, 4)}, "u": {0: (1, 2, 3, 4)}}, configs=configs)
    for topic in ("t", "u"):
        written(core, [core.on_alter_partition(topic, 0, 1, 0, 0, [1, 2]).change])
    keep_only(core, 3, 4)
    assert (state(core, "t").leader, state(core, "t").isr, state(core, "t").leader_epoch) == (3, (3,), 1)
    assert state(core, "u").leader == NO_LEADER  # the broker default (false) applies to u


def test_topic_config_false_overrides_an_unclean_broker_default():
    core = make_core([1, 2], {"t": {0: (1, 2)}}, configs={"t": {"unclean.leader.election.enable": "false"}},
                     config=ControllerConfig(unclean_leader_election_enable=True))
    written(core, [core.on_alter_partition("t", 0, 1, 0, 0, [1]).change])
    keep_only(core, 2)
    assert state(core).leader == NO_LEADER


def test_enabling_unclean_election_in_topic_config_revives_offline_partitions():
    core = make_core([1, 2], {"t": {0: (1, 2)}})
    written(core, [core.on_alter_partition("t", 0, 1, 0, 0, [1]).change])
    keep_only(core, 2)
    changes = written(core, core.on_topic_config_changed("t", {"unclean.leader.election.enable": "true"}))
    assert [c.reason for c in changes] == ["topic_config_change"]
    assert (state(core).leader, state(core).isr) == (2, (2,))


def test_returning_isr_member_revives_offline_partition():
    core = make_core([1, 2, 3], {"t": {0: (1, 2, 3)}})
    keep_only(core)  # everyone gone
    assert (state(core).leader, state(core).isr) == (NO_LEADER, (1,))
    keep_only(core, 2, 3)  # not ISR members: still offline
    assert state(core).leader == NO_LEADER
    epoch = state(core).leader_epoch
    keep_only(core, 1, 2, 3)
    assert (state(core).leader, state(core).isr, state(core).leader_epoch) == (1, (1,), epoch + 1)


def test_returning_broker_is_not_put_back_into_the_isr_by_the_controller():
    core = make_core([1, 2, 3], {"t": {0: (1, 2, 3)}})
    keep_only(core, 1, 3)
    assert keep_only(core, 1, 2, 3) == []
    assert state(core).isr == (1, 3)


def test_returning_broker_is_elected_uncleanly_when_allowed_and_no_isr_member_is_live():
    core = make_core([1, 2], {"t": {0: (1, 2)}}, config=ControllerConfig(unclean_leader_election_enable=True))
    written(core, [core.on_alter_partition("t", 0, 1, 0, 0, [1]).change])
    keep_only(core)
    assert state(core).leader == NO_LEADER
    keep_only(core, 2)
    assert (state(core).leader, state(core).isr) == (2, (2,))


def test_bounced_leader_loses_leadership_in_one_write():
    core = make_core([1, 2, 3], {"t": {0: (1, 2, 3)}})
    changes = keep_only(core, 1, 2, 3, bounced=[1])
    assert len(changes) == 1 and changes[0].reason == "broker_bounce"
    assert (state(core).leader, state(core).isr, state(core).leader_epoch, state(core).partition_epoch) == \
        (2, (2, 3), 1, 1)


def test_bounced_sole_isr_member_comes_back_with_a_new_leader_epoch():
    core = make_core([1, 2], {"t": {0: (1, 2)}})
    written(core, [core.on_alter_partition("t", 0, 1, 0, 0, [1]).change])
    keep_only(core, 1, 2, bounced=[1])
    assert (state(core).leader, state(core).isr, state(core).leader_epoch) == (1, (1,), 2)


def test_new_controller_reconciles_what_it_read():
    core = make_core([1, 2, 3], {"t": {0: (1, 2, 3)}})
    core.view.brokers.pop(1)  # the new controller reads registrations without broker 1
    changes = written(core, core.reconcile())
    assert [c.reason for c in changes] == ["reconcile"]
    assert state(core).leader == 2
