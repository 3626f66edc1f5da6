"""The transaction coordinator's asyncio shell without a broker: it follows the roles of the
__transaction_state partitions (load at the leader epoch, reload at a new one, unload as a
follower, forget a deleted replica), re-sends the markers of a decided transaction after a
load, and writes each change before it answers (a fake ReplicaManager records the appends)."""

import asyncio
import uuid

from weir.broker.txn_coordinator import TransactionCoordinatorShell
from weir.groups.records import encode_batch
from weir.protocol.errors import ErrorCode
from weir.transactions.coordinator import partition_for
from weir.transactions.state_log import TransactionState, TxnLogValue, key_bytes, read_value, value_bytes
from weir.zk.model import BrokerInfo, ClusterView, PartitionState, TopicAssignment

TOPIC = "__transaction_state"
CONFIG = {"transaction.state.log.num.partitions": 3, "request.timeout.ms": 1000}


class FakeLog:
    def __init__(self) -> None:
        self.batches: list[bytes] = []

    @property
    def log_start_offset(self) -> int:
        return 0

    @property
    def log_end_offset(self) -> int:
        return len(self.batches)

    def read(self, offset: int, max_bytes: int, max_offset: int):
        data = b"".join(self._at(i) for i in range(offset, max_offset))

        class Slice:
            def read_bytes(self):
                return data
        return Slice()

    def _at(self, offset: int) -> bytes:
        batch = bytearray(self.batches[offset])
        batch[0:8] = offset.to_bytes(8, "big")
        return bytes(batch)


class FakePartition:
    def __init__(self, index: int, leader_epoch: int, leading: bool = True) -> None:
        self.topic, self.index, self.key = TOPIC, index, (TOPIC, index)
        self.leader_epoch = leader_epoch
        self.leader = object() if leading else None
        self.log = FakeLog()


class FakeReplicas:
    def __init__(self) -> None:
        self.broker_id = 0
        self.partitions: dict = {}
        self.view = ClusterView(brokers={0: BrokerInfo(0, "h", 1)},
                                topics={TOPIC: TopicAssignment(TOPIC, uuid.uuid4(), {0: (0,), 1: (0,), 2: (0,)}),
                                        "data": TopicAssignment("data", uuid.uuid4(), {0: (0,)})},
                                states={("data", 0): PartitionState(-1, 1, (), 1, 0)})  # no leader: markers wait

    def append(self, topic, index, records, acks, now):
        partition = self.partitions[(topic, index)]
        partition.log.batches.append(records)
        offset = len(partition.log.batches) - 1
        return partition, offset, offset, -1

    def await_replication(self, partition, last, timeout_ms, now):
        future = asyncio.get_running_loop().create_future()
        future.set_result(ErrorCode.none)
        return future


def shell_with(replicas) -> TransactionCoordinatorShell:
    async def allocate():
        return 1000

    async def connect(broker_id):
        raise OSError("no peers here")
    return TransactionCoordinatorShell(replicas, CONFIG, None, allocate, connect)


def lead(replicas, shell, index: int, epoch: int) -> FakePartition:
    partition = replicas.partitions.get((TOPIC, index)) or FakePartition(index, epoch)
    partition.leader, partition.leader_epoch = object(), epoch
    replicas.partitions[(TOPIC, index)] = partition
    shell.on_role_change(partition)
    return partition


def records_of(partition: FakePartition) -> list:
    from weir.groups.records import decode_batches
    return [(k, read_value(v)) for _, k, v in decode_batches(partition.log.read(0, 0, partition.log.log_end_offset)
                                                            .read_bytes())[0]]


def test_loading_following_and_reloading_at_a_new_epoch():
    async def scenario():
        replicas = FakeReplicas()
        shell = shell_with(replicas)
        index = partition_for("t", 3)
        partition = lead(replicas, shell, index, epoch=4)
        assert shell.core.describe_transaction("t") == ErrorCode.coordinator_load_in_progress
        await asyncio.sleep(0.01)
        assert shell.epochs == {index: 4} and not shell.loading
        answer = await shell.init_producer_id("t", 60000, None)
        assert (answer.error, answer.producer_id, answer.producer_epoch) == (ErrorCode.none, 1000, 0)
        assert [value.transaction_status for _, value in records_of(partition)] == [TransactionState.EMPTY]
        assert (await shell.add_partitions("t", 1000, 0, [("data", 0)])).error == ErrorCode.none
        assert (await shell.end_txn("t", 1000, 0, committed=True)).error == ErrorCode.none  # PrepareCommit written
        assert records_of(partition)[-1][1].transaction_status == TransactionState.PREPARE_COMMIT
        # a new leader epoch: loaded again from the log, with the decided commit carried on
        lead(replicas, shell, index, epoch=5)
        await asyncio.sleep(0.01)
        meta = shell.core.describe_transaction("t")
        assert (meta.state, meta.producer_epoch, shell.epochs[index]) == (TransactionState.PREPARE_COMMIT, 0, 5)
        assert shell.markers._timers  # data-0 has no leader: its marker waits for one
        # a follower: nothing held; deleted: nothing held either
        partition.leader, partition.leader_epoch = None, 6
        shell.on_role_change(partition)
        assert shell.core.describe_transaction("t") == ErrorCode.not_coordinator and shell.epochs == {}
        lead(replicas, shell, index, epoch=7)
        await asyncio.sleep(0.01)
        del replicas.partitions[(TOPIC, index)]
        shell.on_role_change(partition)
        assert shell.epochs == {} and shell.core.describe_transaction("t") == ErrorCode.not_coordinator
        await shell.stop()

    asyncio.run(scenario())


def test_a_record_written_by_an_earlier_coordinator_is_loaded():
    async def scenario():
        replicas = FakeReplicas()
        shell = shell_with(replicas)
        index = partition_for("old", 3)
        partition = FakePartition(index, 2)
        value = TxnLogValue(77, 3, 30000, TransactionState.ONGOING, (("data", (0,)),), 5, 4)
        partition.log.batches.append(encode_batch([(key_bytes("old"), value_bytes(value))], 5))
        replicas.partitions[(TOPIC, index)] = partition
        shell.on_role_change(partition)
        await asyncio.sleep(0.01)
        meta = shell.core.describe_transaction("old")
        assert (meta.producer_id, meta.producer_epoch, meta.state, meta.partitions) == \
            (77, 3, TransactionState.ONGOING, {("data", 0)})
        await shell.stop()

    asyncio.run(scenario())
