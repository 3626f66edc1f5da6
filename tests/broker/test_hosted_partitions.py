"""The replicas a broker hosts (HostedPartitions) through the controller's decisions, on real logs:
the rules ReplicaManager and weir sim's broker share, with a shell that records what it is told."""

import uuid

from kio.schema.errors import ErrorCode
from log.batches import make_batch

from weir.log import LogConfig, PartitionLog
from weir.protocol.record_batch import batch_headers
from weir.replication import ReplicationConfig
from weir.replication.hosted_partitions import HostedPartitions
from weir.replication.partition import FOLLOWER, LEADER, OFFLINE, Partition
from weir.zk.model import PartitionState, TopicAssignment

NOW = 1_000
TOPIC_ID = uuid.UUID(int=7)
ME = 2


class RecordingShell:
    """Storage in a directory, and every effect written down in the order it was carried out."""

    def __init__(self, root) -> None:
        self.root = root
        self.told: list[tuple] = []
        self.deleted: list[tuple[str, int]] = []

    def open_partition(self, topic, index, now_ms):
        return Partition(ME, topic, index, PartitionLog.open(self.root / f"{topic}-{index}", LogConfig(), now_ms), 0)

    def delete_log(self, key):
        self.deleted.append(key)

    def replication_config(self, topic):
        return ReplicationConfig(min_insync_replicas=2)

    def complete(self, completions):
        self.told += [("complete", c.key, c.error) for c in completions]

    def role_changed(self, partition):
        self.told.append(("role", partition.key, partition.role))

    def send_isr_change(self, partition, proposal):
        self.told.append(("isr", partition.key, tuple(sorted(proposal.new_isr))))


def assignment(replicas=(1, 2, 3), partitions=1):
    return TopicAssignment("t", TOPIC_ID, {p: tuple(replicas) for p in range(partitions)})


def state(leader, epoch=4, isr=(1, 2, 3)):
    return PartitionState(leader=leader, leader_epoch=epoch, isr=tuple(isr), controller_epoch=1, partition_epoch=epoch)


def apply(hosting, leader, epoch=4, isr=(1, 2, 3), topic=None, index=0):
    return hosting.apply_state(topic or assignment(), index, state(leader, epoch, isr), NOW, state_zxid=300,
                               own_broker_epoch=200)


def test_a_state_hosts_a_partition_assigned_here_and_only_there(tmp_path):
    shell = RecordingShell(tmp_path)
    hosting = HostedPartitions(ME, shell)
    assert apply(hosting, 1, topic=assignment(replicas=(1, 3))) is None
    assert hosting.partitions == {} and not (tmp_path / "t-0").exists()
    partition, effects = apply(hosting, 1)
    assert hosting.partitions == {("t", 0): partition} and partition.role == FOLLOWER
    assert effects.role_changed and shell.told == [("role", ("t", 0), FOLLOWER)]


def test_a_new_partition_knows_who_is_alive_before_its_first_state(tmp_path):
    """Led here with ISR [2] and replica 1 registered: the stopping broker must wait for 1 to
    take over (Partition.awaits_leadership_handover), which it can only know from the live set."""
    hosting = HostedPartitions(ME, RecordingShell(tmp_path))
    hosting.on_live_brokers(frozenset({1, 2}), NOW)
    partition, _ = apply(hosting, ME, isr=(2,))
    assert partition.live_brokers == frozenset({1, 2}) and partition.awaits_leadership_handover()


def test_effects_are_carried_out_in_order_answers_then_role_then_proposal(tmp_path):
    """A leader with an acks=all produce parked loses leadership: the produce is answered (its fate
    unknown: REQUEST_TIMED_OUT, the purgatory's rule 1) before the fetchers hear of the new role;
    a leader whose followers fell behind proposes an ISR without them."""
    shell = RecordingShell(tmp_path)
    hosting = HostedPartitions(ME, shell)
    hosting.on_live_brokers(frozenset({1, 2, 3}), NOW)
    partition, _ = apply(hosting, ME)
    records = make_batch([b"a"])
    produced = partition.produce(records, batch_headers(records)[0], -1, NOW, proven=True)
    hosting.act(partition, produced.effects)
    assert partition.await_replication("p1", produced.last_offset, NOW + 30_000, NOW) is None
    shell.told.clear()
    apply(hosting, 1, epoch=5)
    assert shell.told == [("complete", "p1", ErrorCode.request_timed_out), ("role", ("t", 0), FOLLOWER)]

    shell.told.clear()
    apply(hosting, ME, epoch=6)
    hosting.act(partition, partition.check_isr(NOW + 60_000))  # no follower fetched for replica.lag.time.max.ms
    assert shell.told == [("role", ("t", 0), LEADER), ("isr", ("t", 0), (2,))]


def test_a_replica_assigned_elsewhere_goes_offline_and_its_log_is_deleted(tmp_path):
    """A reassignment moved partition 0 away (hosted) and partition 1 away (only on disk, from
    before a restart): both logs go; partition 0 stops first, answering what it held."""
    shell = RecordingShell(tmp_path)
    hosting = HostedPartitions(ME, shell)
    topic = assignment(partitions=2)
    partition, _ = apply(hosting, 1, topic=topic)
    shell.told.clear()
    moved = TopicAssignment("t", TOPIC_ID, {0: (1, 3, 4), 1: (1, 3, 4)})
    assert hosting.drop_assigned_elsewhere({"t": moved}, on_storage=[("t", 1)]) == [("t", 0), ("t", 1)]
    assert hosting.partitions == {} and partition.role == OFFLINE
    assert shell.told == [("role", ("t", 0), OFFLINE)] and shell.deleted == [("t", 0), ("t", 1)]
    assert hosting.drop_assigned_elsewhere({"t": topic}, on_storage=[("t", 1)]) == []
