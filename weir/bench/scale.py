"""`weir bench scale`: what a broker costs per partition it hosts (issue 41: a broker's cost grows
with its work, not with its partitions).

For each size of --partitions (1,000, 3,000 and 10,000 unless told), a fresh cluster of three
brokers is given that many RF=3 partitions, --batch at a time (a topic of that many partitions per
CreateTopics), and the bench prints, as it measures them:
- how long the first and the last batch took, from CreateTopics until Metadata shows each of the
  batch's partitions led: what adding partitions costs on an empty cluster and on a full one;
- the CPU cores the three brokers spend together once the partitions exist and nobody writes
  (utime + stime from /proc/<pid>/stat, over --idle-seconds);
- per broker, its file descriptors (/proc/<pid>/fd) and resident memory (/proc/<pid>/statm)
  divided by the replicas it hosts, and what it held empty, with the growth since per replica;
- the time from kill -9 of the broker leading the most partitions until every partition has a
  live leader again (Metadata polled), beside zookeeper.session.timeout.ms, the time ZooKeeper
  takes to tell the controller that the broker is gone;
- the time from that broker's restart until it is back in every ISR it belongs in (its replicas
  caught up, the leaders' AlterPartitions written).
Every wait is bounded (BATCH_TIMEOUT_S for a batch, FAILOVER_TIMEOUT_S for the failover): a
wedged cluster ends the run with what timed out, not a hang. Figures are printed, never asserted.
"""

import os
import time
from collections import Counter
from pathlib import Path

from weir.bench.clusters import (FAILOVER_TIMEOUT_S, BenchTimedOut, _create_topic, _discard, _scratch_cluster,
                                 _user_and_system_seconds, _wait_until_led)

BROKERS = 3
BATCH_TIMEOUT_S = 120  # one batch created and led: a healthy cluster takes seconds
METADATA_TIMEOUT_S = 30
REJOIN_TIMEOUT_S = 300  # a restarted broker back in every ISR: the issue asks 30 s at 10,000 replicas


def bench_scale(args) -> int:
    for partitions in args.partitions:
        cluster = _scratch_cluster(BROKERS)
        try:
            cluster.start()
            _bench_size(cluster, partitions, args.batch, args.idle_seconds)
        except BenchTimedOut as e:
            print(f"timed out at {partitions:,} partitions: {e}")
            return 1
        finally:
            _discard(cluster)
    return 0


def _bench_size(cluster, partitions: int, batch: int, idle_s: float) -> None:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    empty = {b.broker_id: _descriptors_and_memory(b.proc.pid) for b in cluster.brokers}
    topics = {f"scale-{first // batch:05d}": min(batch, partitions - first) for first in range(0, partitions, batch)}
    seconds = [create_batch(cluster.bootstrap, admin, topic, count, BATCH_TIMEOUT_S) for topic, count in topics.items()]
    print(f"{partitions:,} partitions, RF=3, {BROKERS} brokers, created {batch:,} at a time")
    print(f"  create {batch:,} partitions: first batch {seconds[0]:.2f} s, last (batch {len(seconds)}) "
          f"{seconds[-1]:.2f} s; all {sum(seconds):.1f} s")
    _print_idle_cpu(cluster, idle_s)
    metadata = _metadata(admin)
    _print_footprints(cluster, metadata, empty)
    victim = _print_failover(cluster, metadata, topics)
    _print_rejoin(admin, victim, topics)


def _print_idle_cpu(cluster, idle_s: float) -> None:
    cpu, began = sum(_user_and_system_seconds(cluster)), time.monotonic()
    time.sleep(idle_s)  # the window the CPU is measured over
    cores = (sum(_user_and_system_seconds(cluster)) - cpu) / (time.monotonic() - began)
    print(f"  idle after creation: {cores:.3f} CPU cores, {BROKERS} brokers together, over {idle_s:g} s")


def _print_footprints(cluster, metadata, empty: dict[int, tuple[int, int]]) -> None:
    """Each broker's descriptors and resident memory, now and empty (`empty`), per replica it hosts."""
    hosted = Counter(r for t in metadata.topics.values() for p in t.partitions.values() for r in p.replicas)
    print(f"  {'broker':<8}{'replicas':>9}{'fds':>8}{'(empty)':>9}{'/replica':>10}{'(added)':>9}"
          f"{'RSS MiB':>10}{'(empty)':>9}{'KiB/replica':>13}{'(added)':>9}")
    for broker in cluster.brokers:
        replicas = hosted[broker.broker_id]
        fds, rss = _descriptors_and_memory(broker.proc.pid)
        fds_empty, rss_empty = empty[broker.broker_id]
        print(f"  {broker.broker_id:<8}{replicas:>9,}{fds:>8,}{fds_empty:>9,}{fds / replicas:>10.2f}"
              f"{(fds - fds_empty) / replicas:>9.2f}{rss / 2**20:>10.1f}{rss_empty / 2**20:>9.1f}"
              f"{rss / 2**10 / replicas:>13.1f}{(rss - rss_empty) / 2**10 / replicas:>9.1f}")
    print("  (empty): the broker before the first partition; /replica: now over the replicas it hosts; "
          "(added): the growth since empty, per replica")


def _print_failover(cluster, metadata, topics: dict[str, int]):
    """kill -9 the broker leading the most partitions; the time until every partition is led again."""
    from confluent_kafka.admin import AdminClient
    led = Counter(p.leader for t in metadata.topics.values() for p in t.partitions.values())
    victim = max(cluster.brokers, key=lambda b: led[b.broker_id])
    survivors = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in cluster.brokers if b is not victim)})
    killed = time.monotonic()
    victim.kill()
    _wait_until_led(survivors, topics, f"failover of broker {victim.broker_id}", FAILOVER_TIMEOUT_S,
                    dead=victim.broker_id)
    role = ", the controller" if metadata.controller_id == victim.broker_id else ""
    print(f"  failover: kill -9 of broker {victim.broker_id} (leader of {led[victim.broker_id]:,} partitions{role}); "
          f"every partition led again after {time.monotonic() - killed:.2f} s (zookeeper.session.timeout.ms "
          f"{victim.overrides['zookeeper.session.timeout.ms']})")
    return victim


def _print_rejoin(admin, broker, topics: dict[str, int]) -> None:
    """Restart `broker` (killed); the time until every partition's ISR holds all its replicas."""
    from confluent_kafka import KafkaException
    started = time.monotonic()
    broker.start()
    deadline = started + REJOIN_TIMEOUT_S
    while True:
        try:
            listed = admin.list_topics(timeout=METADATA_TIMEOUT_S).topics
            short = sum(len(p.isrs) < len(p.replicas) for name in topics if name in listed
                        for p in listed[name].partitions.values())
        except KafkaException:
            short = None
        if short == 0:
            break
        if time.monotonic() >= deadline:
            raise BenchTimedOut(f"rejoin of broker {broker.broker_id}: {short} partitions short of an ISR member "
                                f"after {REJOIN_TIMEOUT_S} s")
        time.sleep(0.2)  # the poll's interval, as _wait_until_led's
    print(f"  rejoin: broker {broker.broker_id} restarted; in every ISR again after {time.monotonic() - started:.2f} s "
          f"(its start included)")


def create_batch(bootstrap: str, admin, topic: str, partitions: int, timeout_s: float) -> float:
    """Seconds until `topic`, of `partitions` RF=3 partitions, is created and each partition led;
    BenchTimedOut after `timeout_s`."""
    began = time.monotonic()
    _create_topic(bootstrap, topic, partitions, BROKERS, timeout_s=timeout_s)
    _wait_until_led(admin, {topic: partitions}, f"creating {topic}", timeout_s - (time.monotonic() - began))
    return time.monotonic() - began


def _metadata(admin):
    from confluent_kafka import KafkaException
    try:
        return admin.list_topics(timeout=METADATA_TIMEOUT_S)
    except KafkaException as e:
        raise BenchTimedOut(f"Metadata after creation: {e}") from e


def _descriptors_and_memory(pid: int) -> tuple[int, int]:
    """Process `pid`'s open file descriptors, and its resident memory in bytes."""
    resident_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return len(os.listdir(f"/proc/{pid}/fd")), resident_pages * os.sysconf("SC_PAGE_SIZE")
