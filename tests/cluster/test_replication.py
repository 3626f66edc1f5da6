"""Replication with real brokers, real ZooKeeper and confluent-kafka (issue: ISR, HW, controller)."""

import subprocess
import sys

import pytest
from cluster_tools import SteadyProducer, create_topic, partition_metadata, read_all, wait_until
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient


def leader_of(cluster, topic, partition=0):
    return partition_metadata(cluster.bootstrap, topic)[partition][0]


def assert_all_acked_readable(bootstrap: str, producer: SteadyProducer):
    records = read_all(bootstrap, producer.topic, producer.partitions)
    present = {v for values in records.values() for v in values}
    lost = producer.acked - present
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:5]}"
    # Duplicates are allowed: without idempotence a retried batch may be written twice.


def test_kill_leader_mid_stream_elects_from_isr_and_loses_nothing(cluster):
    create_topic(cluster.bootstrap, "orders", 3, 3, **{"min.insync.replicas": "2"})
    producer = SteadyProducer(cluster.bootstrap, "orders", 3).start()
    producer.wait_acked(3000)
    victim = leader_of(cluster, "orders", 0)
    cluster.brokers[victim].kill()
    wait_until(lambda: leader_of(cluster, "orders", 0) not in (victim, -1), "a new leader from the ISR")
    before = len(producer.acked)
    producer.wait_acked(before + 3000)  # the producer carries on against the new leader
    producer.stop()
    new_leader, replicas, isr = partition_metadata(cluster.bootstrap, "orders")[0]
    assert new_leader != victim and victim not in isr
    assert_all_acked_readable(cluster.bootstrap, producer)


def test_paused_follower_leaves_isr_and_rejoins_after_catching_up(start_cluster):
    brokers = start_cluster(replica_lag_time_max_ms="3000").brokers
    bootstrap = brokers[0].bootstrap
    create_topic(bootstrap, "paused", 1, 3, **{"min.insync.replicas": "2"})
    leader, replicas, _ = partition_metadata(bootstrap, "paused")[0]
    follower = next(r for r in replicas if r != leader)
    bootstrap = brokers[leader].bootstrap  # never the paused one
    producer = SteadyProducer(bootstrap, "paused", 1).start()
    producer.wait_acked(500)
    brokers[follower].pause()
    wait_until(lambda: follower not in partition_metadata(bootstrap, "paused")[0][2], "the paused follower leaves the ISR")
    during = len(producer.acked)
    producer.wait_acked(during + 2000)  # the HW keeps moving with two in sync
    brokers[follower].resume()
    wait_until(lambda: follower in partition_metadata(bootstrap, "paused")[0][2], "the follower rejoins the ISR")
    producer.stop()
    assert_all_acked_readable(bootstrap, producer)


def test_acks_all_waiting_on_a_stalled_in_sync_follower_times_out_with_request_timed_out(start_cluster):
    """The Produce's own timeout (librdkafka's request.timeout.ms) bounds an acks=all wait: the
    broker answers REQUEST_TIMED_OUT while the stalled follower is still in the ISR."""
    brokers = start_cluster(replica_lag_time_max_ms="60000").brokers
    create_topic(brokers[0].bootstrap, "stalled", 1, 3, **{"min.insync.replicas": "2"})
    leader, replicas, isr = partition_metadata(brokers[0].bootstrap, "stalled")[0]
    follower = next(r for r in replicas if r != leader)
    producer = Producer({"bootstrap.servers": brokers[leader].bootstrap, "acks": "all", "retries": 0,
                         "request.timeout.ms": 1000, "message.timeout.ms": 30000})
    outcomes = []
    producer.produce("stalled", b"before", partition=0, on_delivery=lambda err, msg: outcomes.append(err))
    producer.flush(30)
    assert outcomes == [None]
    brokers[follower].pause()
    try:
        producer.produce("stalled", b"stalled", partition=0, on_delivery=lambda err, msg: outcomes.append(err))
        producer.flush(30)
        assert follower in partition_metadata(brokers[leader].bootstrap, "stalled")[0][2], "still in sync"
    finally:
        brokers[follower].resume()
    assert len(outcomes) == 2 and outcomes[1] is not None and outcomes[1].name() == "REQUEST_TIMED_OUT"


def test_two_of_three_down_refuses_acks_all_and_loses_nothing(cluster):
    create_topic(cluster.bootstrap, "scarce", 1, 3, **{"min.insync.replicas": "2"})
    producer = SteadyProducer(cluster.bootstrap, "scarce", 1).start()
    producer.wait_acked(1000)
    producer.stop()
    leader = leader_of(cluster, "scarce")
    for broker in cluster.brokers:
        if broker.broker_id != leader:
            broker.kill()
    wait_until(lambda: len(partition_metadata(cluster.brokers[leader].bootstrap, "scarce")[0][2]) == 1,
               "the ISR shrinks to the leader")
    refused = []
    p = Producer({"bootstrap.servers": cluster.brokers[leader].bootstrap, "acks": "all", "retries": 0,
                  "message.timeout.ms": 10000})
    p.produce("scarce", b"must-not-be-acked", partition=0, on_delivery=lambda err, msg: refused.append(err))
    p.flush(30)
    assert refused and refused[0] is not None and refused[0].name() == "NOT_ENOUGH_REPLICAS"
    cluster.brokers[(leader + 1) % 3].start()
    assert_all_acked_readable(cluster.bootstrap, producer)


@pytest.mark.parametrize("unclean", [False, True])
def test_all_isr_members_down(cluster, unclean):
    """Unclean off: the partition stays offline until an ISR member returns. Unclean on: a stale
    replica is elected, and the records only the old ISR had are gone (the visible loss)."""
    create_topic(cluster.bootstrap, "fragile", 1, 3, **{"min.insync.replicas": "1",
                                                        "unclean.leader.election.enable": str(unclean).lower()})
    leader, replicas, _ = partition_metadata(cluster.bootstrap, "fragile")[0]
    stale = next(r for r in replicas if r != leader)
    cluster.brokers[stale].kill()  # it misses everything from here on
    third = next(r for r in replicas if r not in (leader, stale))
    producer = SteadyProducer(cluster.bootstrap, "fragile", 1).start()
    producer.wait_acked(500)
    producer.stop()
    cluster.brokers[third].kill()
    cluster.brokers[leader].kill()  # now no ISR member is alive
    cluster.brokers[stale].start()
    bootstrap = cluster.brokers[stale].bootstrap
    if not unclean:
        # once the controller sees the sessions end, nobody clean is left to lead; the ISR keeps one
        # member: whichever of the two the controller saw go last (their sessions expire in
        # ZooKeeper's order, not in the order of the kills). A leader whose registration is gone
        # shows as -1 before the controller has written that state, with the ISR it had.
        def offline_with_one_member():
            answer = partition_metadata(bootstrap, "fragile")[0]
            return answer[0] == -1 and len(answer[2]) == 1 and answer[2]
        isr = wait_until(offline_with_one_member, "the partition offline, its ISR down to one member")
        assert isr[0] in (leader, third), "the ISR keeps its last member, never the stale one"
        cluster.brokers[isr[0]].start()
        wait_until(lambda: leader_of(cluster, "fragile") == isr[0], "the last ISR member leads again")
        assert_all_acked_readable(cluster.bootstrap, producer)
    else:
        wait_until(lambda: partition_metadata(bootstrap, "fragile")[0][0] == stale, "the stale replica is elected")
        records = read_all(bootstrap, "fragile", 1)
        lost = producer.acked - set(records[0])
        assert lost, "unclean election loses what only the old ISR had"


def test_controller_killed_another_takes_over_and_elections_work(cluster):
    create_topic(cluster.bootstrap, "ctl", 3, 3)
    controller = cluster_controller(cluster)
    cluster.brokers[controller].kill()
    wait_until(lambda: cluster_controller(cluster) not in (controller, -1), "a new controller")
    wait_until(lambda: all(m[0] not in (controller, -1) for m in partition_metadata(cluster.bootstrap, "ctl").values()),
               "every partition led by a live broker: the new controller elected them")


def cluster_controller(cluster) -> int:
    client = AdminClient({"bootstrap.servers": cluster.bootstrap})
    return client.list_topics(timeout=10).controller_id


def test_preferred_election_restores_balance_after_a_broker_returns(cluster):
    create_topic(cluster.bootstrap, "balanced", 6, 3)
    preferred = {p: replicas[0] for p, (_, replicas, _) in partition_metadata(cluster.bootstrap, "balanced").items()}
    cluster.brokers[1].stop()  # controlled shutdown: leadership moves off broker 1
    wait_until(lambda: all(m[0] != 1 for m in partition_metadata(cluster.bootstrap, "balanced").values()),
               "leadership moved off broker 1")
    cluster.brokers[1].start()
    wait_until(lambda: all(1 in m[2] for m in partition_metadata(cluster.bootstrap, "balanced").values()),
               "broker 1 back in every ISR")
    out = subprocess.run([sys.executable, "-m", "weir.cli.main", "elect-leaders", "--bootstrap-server", cluster.bootstrap,
                          "--election-type", "PREFERRED", "--all-topic-partitions"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    leaders = {p: m[0] for p, m in partition_metadata(cluster.bootstrap, "balanced").items()}
    assert leaders == preferred


def test_a_new_controller_checks_leader_balance_five_seconds_after_its_election(cluster):
    """Kafka's onControllerFailover runs the first balance check 5 s after the election; only the
    later ones wait leader.imbalance.check.interval.seconds (300 here, the default)."""
    create_topic(cluster.bootstrap, "failover", 6, 3)
    preferred = {p: replicas[0] for p, (_, replicas, _) in partition_metadata(cluster.bootstrap, "failover").items()}
    controller = cluster_controller(cluster)
    returning = next(b for b in range(3) if b != controller)
    cluster.brokers[returning].stop()
    wait_until(lambda: all(m[0] != returning for m in partition_metadata(cluster.bootstrap, "failover").values()),
               "leadership moved off the returning broker")
    cluster.brokers[returning].start()
    wait_until(lambda: all(returning in m[2] for m in partition_metadata(cluster.bootstrap, "failover").values()),
               "the returning broker back in every ISR")
    cluster.brokers[controller].stop()
    wait_until(lambda: all(m[0] == returning for p, m in partition_metadata(cluster.bootstrap, "failover").items()
                           if preferred[p] == returning),
               "the new controller's first balance check to give the returning broker its leaderships back",
               timeout_s=30)


def test_auto_leader_rebalance_moves_leadership_back(start_cluster):
    cluster = start_cluster(leader_imbalance_check_interval_seconds="2")
    create_topic(cluster.bootstrap, "rebalanced", 6, 3)
    preferred = {p: replicas[0] for p, (_, replicas, _) in partition_metadata(cluster.bootstrap, "rebalanced").items()}
    cluster.brokers[2].stop()
    wait_until(lambda: all(m[0] != 2 for m in partition_metadata(cluster.bootstrap, "rebalanced").values()),
               "leadership moved off broker 2")
    cluster.brokers[2].start()
    wait_until(lambda: {p: m[0] for p, m in partition_metadata(cluster.bootstrap, "rebalanced").items()} == preferred,
               "the controller's balance check to restore preferred leaders")
