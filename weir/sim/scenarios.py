"""Named scenarios: fixed settings and fault schedules that tell a known story.

jepsen-unclean / jepsen-safe: Jepsen's Kafka analysis (Kingsbury, 2013; the seed text
004_40263582ff2da982). The leader of the one partition is cut off from its followers: the ISR
shrinks to the leader alone, which goes on acknowledging acks=all writes by itself. Then the
leader loses ZooKeeper too (total isolation); its session expires and the controller, with no live
ISR member, elects a follower that is arbitrarily far behind. Four brokers, the controller on the
one that hosts no replica: in Kafka 0.8 the leader wrote the ISR to ZooKeeper itself; since
KIP-497 it asks the controller, which must still be reachable for the ISR to shrink.

- jepsen-unclean: unclean.leader.election.enable=true, min.insync.replicas=1 (the 0.8-era
  behaviour). The unclean election happens and the writes the old leader acknowledged alone are
  lost when it comes back and truncates; the checker counts them (`lost_writes`).
- jepsen-safe: unclean.leader.election.enable=false, min.insync.replicas=2. The leader refuses
  acks=all writes once the ISR is below 2 (NOT_ENOUGH_REPLICAS), and nobody outside the ISR is
  elected: the partition is unavailable until the leader returns, and nothing is lost.

stalled-successor: a leader is elected and at once stalls (its request handlers are stuck; its
ZooKeeper session and timers go on), then loses ZooKeeper. Its followers' OffsetForLeaderEpoch
questions wait in its queue while its session expires and the next replica takes over; when the
stall ends, it answers them as the leader it still believes it is. No follower may take those
answers for its new leadership (issue 11, hole 2): its fetcher for the old leader no longer holds
the partition, as in production, and its core matches an answer to the leadership it asked in.
The replica that takes over last is slow, so it lagged the others when the first leader crashed
(the stalled one's answers promise too much) and its own answers come after the stale ones. Five
brokers, four replicas, the controller on the fifth; timeouts in Kafka's proportions
(replica.lag.time.max.ms and replica.socket.timeout.ms above the session timeout), so that the
stale answers are still awaited and the stalled leader does not shrink its ISR to itself first.

empty-leadership: the story of stalled-successor with three replicas, but the replica that takes
over first is the slow one: it is elected while it stalls, so it leads its epoch without writing
anything, loses ZooKeeper, and then follows the other, which holds more of the previous epoch than
it does. The leader-epoch answer tells it to truncate at its own log end; its epoch cache must still
drop the empty epoch, or the previous epoch's records it fetches next fall under it.

reassign: the random faults of the seed on five brokers, with one to three partition
reassignments (KIP-455) among them, each to three brokers drawn at random, some cancelled: new
replicas catch up while the faults go on, leadership moves into the target, old replicas delete
their copy. Nothing acknowledged may be lost, and every partition ends healthy on its new replicas.

controlled-shutdown: the random faults of the seed, with one to three controlled shutdowns among
them (an operator stopping a broker, mostly a partition's leader, and starting it again after a
while): the broker asks the controller to move its leaderships away and waits for it by the rule
server.py follows (Partition.awaits_leadership_handover), the controller takes it out of the ISRs
and elects others (ControllerCore.on_controlled_shutdown), then the broker stops cleanly. Nothing
acknowledged may be lost, and every partition ends healthy with the broker back. Its crashes are
process crashes: a machine crash's lost tail on a replica left as the ISR's last member once a
controlled shutdown took a full one out is the case KIP-966 addresses (seed 177 found it: Kafka's
ZooKeeper mode elects that replica and loses the tail too).

bounced-follower: a leader stalls with a follower's fetches in its queue; the follower's machine
crashes, losing its unflushed tail, restarts and registers again (a new broker epoch). When the
stall ends, the leader takes the old incarnation's fetch, whose offset the new one no longer has,
and asks the controller to put the follower back in the ISR; the controller must refuse a broker
epoch older than the registered one (KIP-903, issue 11 hole 4), for the leader then crashes and
the next clean election would pick that follower. Timeouts in Kafka's proportions, as above.

transactions: the transaction coordinator and data partitions under the seed's faults (issue 13):
transactional producers sharing ids, a `__transaction_state` whose writes fail or are cut and
whose leadership fails over, WriteTxnMarkers lost, duplicated and refused, leader changes that
cut partitions' unreplicated tails, producer crashes and transaction timeouts. Its own world and
checker: weir/sim/txn_world.py and weir/sim/txn_checker.py (run_seed dispatches to it).
"""

from __future__ import annotations

import random
from dataclasses import replace

from weir.sim.nemesis import Fault, random_schedule
from weir.sim.settings import SimSettings

SCENARIOS = ("jepsen-unclean", "jepsen-safe", "stalled-successor", "empty-leadership", "bounced-follower", "reassign",
             "controlled-shutdown", "transactions")


def build(name: str, seed: int):
    """(settings, schedule, acks choice) of a named scenario."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    if name == "transactions":
        raise ValueError("the transactions scenario has its own world: weir.sim.txn_world")
    if name == "stalled-successor":
        return _stalled_successor(random.Random(f"scenario/{seed}"), replicas=4, slow="successor:0:2")
    if name == "empty-leadership":
        return _stalled_successor(random.Random(f"scenario/{seed}"), replicas=3, slow="successor:0")
    if name == "bounced-follower":
        return _bounced_follower(random.Random(f"scenario/{seed}"))
    if name == "reassign":
        return _reassign(seed)
    if name == "controlled-shutdown":
        return _controlled_shutdown(seed)
    unsafe = name == "jepsen-unclean"
    settings = replace(SimSettings(), brokers=4, partitions=1, drop_rate=0.0, duplicate_rate=0.0,
                       controller_outside_replicas=True,
                       min_insync_replicas=1 if unsafe else 2, unclean_leader_election_enable=unsafe,
                       auto_leader_rebalance_enable=False)
    heal = settings.heal_at_ms
    schedule = [
        Fault(1000, "partition", "leader:0", heal - 1000, "leader-replicas"),
        Fault(3500, "partition", "leader:0", heal - 3500, "leader-zk"),
    ]
    return settings, schedule, lambda rng: -1


def _staged(brokers: int, replication_factor: int, replica_lag_time_max_ms: int) -> SimSettings:
    """One partition, the controller on a broker outside it, no random drops or duplicates, and
    timeouts in Kafka's proportions (replica.lag.time.max.ms and replica.socket.timeout.ms above
    the session timeout)."""
    return replace(SimSettings(), brokers=brokers, partitions=1, replication_factor=replication_factor,
                   controller_outside_replicas=True, replica_lag_time_max_ms=replica_lag_time_max_ms,
                   fetch_timeout_ms=2500, auto_leader_rebalance_enable=False, drop_rate=0.0, duplicate_rate=0.0)


def _stalled_successor(rng: random.Random, replicas: int, slow: str):
    settings = _staged(brokers=replicas + 1, replication_factor=replicas, replica_lag_time_max_ms=2500)
    heal = settings.heal_at_ms
    crash = rng.randint(1000, 2000)
    stall = crash + rng.randint(700, 1000)  # before the crashed leader's session expires
    cut = crash + rng.randint(1300, 1800)  # after its successor learned that it leads
    resume = cut + rng.randint(1100, 2300)  # about when the stalled one's session has expired
    schedule = [
        Fault(200, "slow", slow, heal - 200, 400),  # it lags, and answers late
        Fault(crash, "crash", "leader:0", heal - crash),
        Fault(stall, "stall", "successor:0", resume - stall),
        Fault(cut, "partition", "leader:0", heal - cut, "leader-zk"),
    ]
    return settings, schedule, None


def _bounced_follower(rng: random.Random):
    settings = _staged(brokers=4, replication_factor=3, replica_lag_time_max_ms=3000)
    heal = settings.heal_at_ms
    stall = rng.randint(1000, 2500)
    crash = stall + rng.randint(20, 200)
    resume = crash + rng.randint(1900, 2600)  # after the follower registered again
    schedule = [
        Fault(stall, "stall", "leader:0", resume - stall),
        Fault(crash, "crash", "successor:0", rng.randint(150, 600), True),
        Fault(resume + rng.randint(10, 60), "crash", "leader:0", heal - resume),
    ]
    return settings, schedule, None


def _reassign(seed: int):
    settings = replace(SimSettings(), brokers=5)
    rng = random.Random(f"reassign/{seed}")
    start, end = settings.fault_window_ms
    moves = [Fault(rng.randint(start, end), "reassign", f"partition:{rng.randrange(settings.partitions)}", 0,
                   None if rng.random() < 0.15 else tuple(rng.sample(range(1, settings.brokers + 1), 3)))
             for _ in range(rng.randint(1, 3))]
    faults = random_schedule(random.Random(f"schedule/{seed}"), settings)
    return settings, sorted(faults + moves, key=lambda f: (f.at_ms, f.kind)), None


def _controlled_shutdown(seed: int):
    settings = SimSettings()
    rng = random.Random(f"controlled-shutdown/{seed}")
    start, end = settings.fault_window_ms
    stops = [Fault(rng.randint(start, end), "shutdown",
                   rng.choice([f"leader:{rng.randrange(settings.partitions)}"] * 3 + ["controller",
                              f"broker:{rng.randint(1, settings.brokers)}"]), rng.randint(300, 2500))
             for _ in range(rng.randint(1, 3))]
    # Process crashes only: a machine crash's lost tail with a full replica taken out of the ISR by
    # a controlled shutdown is the case KIP-966 addresses, which Kafka's ZooKeeper mode loses too.
    faults = [replace(f, option=False) if f.kind == "crash" else f
              for f in random_schedule(random.Random(f"schedule/{seed}"), settings)]
    return settings, sorted(faults + stops, key=lambda f: (f.at_ms, f.kind)), None
