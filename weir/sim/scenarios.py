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
"""

from __future__ import annotations

from dataclasses import replace

from weir.sim.nemesis import Fault
from weir.sim.settings import SimSettings

SCENARIOS = ("jepsen-unclean", "jepsen-safe")


def build(name: str, seed: int):
    """(settings, schedule, acks choice) of a named scenario."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
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
