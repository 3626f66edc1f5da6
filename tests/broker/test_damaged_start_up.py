"""A broker starts on a log directory whatever damage a crash, a full disk or a bad disk left in
its files: seeded random damage (cut short, bytes flipped, garbage appended, emptied, deleted) to
one to three files of a directory that held segments, indexes, checkpoints and producer state.
Each time the partition opens, leads, takes a write and reads back from its start to its end; when
no segment file was touched, no record is lost (what else the broker keeps, it rebuilds from the
segments), and a partition.metadata damaged into another topic id has the log set aside whole."""

import random
import shutil
import uuid

import pytest
from log.batches import batch_crc_ok, make_batch, patched, record_values
from test_checkpoint_recovery import manager as start_on

from weir.broker.replica_manager import ReplicaManager
from weir.log.checkpoint_file import encode_topic_id
from weir.protocol.record_batch import batch_headers

RECORDS = 60
PRODUCER_ID = 4000
TXN_PRODUCER = 5000  # + the record after which it writes its transaction
OPEN_PRODUCER = 6000  # its transaction is open when the broker stops
SEEDS = 100


def manager(root) -> ReplicaManager:
    """A broker's start on `root` (test_checkpoint_recovery's), leading the partition, with index
    entries every 300 bytes and transactions unverified (this test writes their batches itself)."""
    return start_on(root, **{"log.index.interval.bytes": "300", "transaction.partition.verification.enable": "false"})


def write(replicas: ReplicaManager, first: int, count: int, producer_id: int = PRODUCER_ID) -> None:
    """Records `first` to `first + count - 1` of an idempotent producer (or of none: producer id
    -1); after every tenth, a transaction of two records, aborted or committed by turns."""
    for i in range(first, first + count):
        replicas.append("t", 0, batch(b"v%03d" % i, producer_id, i), 1, 1_000 + i)
        if producer_id >= 0 and i % 10 == 5:
            txn = TXN_PRODUCER + i
            for seq in range(2):
                replicas.append("t", 0, batch(b"t%03d" % i, txn, seq, transactional=True), 1, 1_000 + i)
            replicas.append_marker("t", 0, txn, 0, (i // 10) % 2 == 1, 0, 1_000 + i)


def batch(value: bytes, producer_id: int, sequence: int, transactional: bool = False) -> bytearray:
    idempotent = producer_id >= 0
    records = make_batch([value + b"x" * 150], timestamp=1_000, producer_id=producer_id,
                         producer_epoch=0 if idempotent else -1, base_sequence=sequence if idempotent else -1)
    return bytearray(patched(records, attributes=0x10) if transactional else records)


def transactions(replicas: ReplicaManager) -> tuple[int, list]:
    """What READ_COMMITTED consumers are told: the LSO, and the aborted transactions (producer,
    first offset) of fetches from every offset up to 3, 10 or 30 offsets on."""
    partition = replicas.partitions[("t", 0)]
    end = partition.log.log_end_offset
    return partition.last_stable_offset, [
        [t.as_aborted_transaction() for t in partition.aborted_transactions(offset, min(offset + span, end))]
        for offset in range(end) for span in (3, 10, 30)]


def served(replicas: ReplicaManager) -> dict[int, bytes]:
    """offset → value of every record the partition serves, read from its log start to its end,
    but for batches whose CRC fails: a segment trusted (below the recovery point, or after a clean
    shutdown) is served as it is, as Kafka's, and the consumer's CRC check finds the damage."""
    log = replicas.partitions[("t", 0)].log
    out: dict[int, bytes] = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20, log.log_end_offset).read_bytes()
        headers = batch_headers(data)
        assert headers, f"nothing served at {offset}, below the log end {log.log_end_offset}"
        position = 0
        for header in headers:
            last = header.base_offset + header.last_offset_delta
            if batch_crc_ok(data, position):
                out.update(record_values(data[position:position + header.length]))
            position += header.length
            offset = max(offset, last) + 1
    return out


def damage(path, rng: random.Random) -> str:
    data = path.read_bytes()
    how = rng.choice(["cut", "flip", "garbage", "empty", "delete"])
    if how == "cut":
        path.write_bytes(data[:rng.randrange(len(data))] if data else b"")
    elif how == "flip" and data:
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(damaged))
    elif how == "garbage":
        path.write_bytes(data + rng.randbytes(rng.randint(1, 64)))
    elif how == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()
    return f"{how} {path.name}"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Directories as a broker left them, with several segments with index entries, checkpoints,
    a leader epoch and a producer's state: after a clean shutdown, and after a crash whose last
    flush and checkpoints were 20 records before the end."""
    dirs = {}
    for clean in (True, False):
        root = tmp_path_factory.mktemp("clean" if clean else "crashed")
        replicas = manager(root)
        write(replicas, 0, RECORDS - 20)
        replicas.logs.get("t", 0).delete_records_before(3)
        replicas.logs.get("t", 0).flush()
        replicas.checkpoint()
        write(replicas, RECORDS - 20, 20)
        replicas.append("t", 0, batch(b"open", OPEN_PRODUCER, 0, transactional=True), 1, 2_000)
        if clean:
            replicas.close()
        dirs[clean] = root
    return dirs


@pytest.mark.parametrize("clean", [True, False], ids=["after a clean shutdown", "after a crash"])
def test_a_broker_starts_and_serves_whatever_files_are_damaged(written, tmp_path, clean):
    intact = manager(shutil.copytree(written[clean], tmp_path / "intact"))
    before = served(intact)
    write(intact, RECORDS, 1, producer_id=-1)
    stable = transactions(intact)
    intact.close()
    assert stable[0] == max(before) and {t for ts in stable[1] for t in ts} == {(5005, 6), (5025, 32), (5045, 58)}
    for seed in range(SEEDS):
        rng = random.Random(seed)
        root = shutil.copytree(written[clean], tmp_path / str(seed))
        files = sorted(p for p in root.rglob("*") if p.is_file())
        hurt = [damage(path, rng) for path in rng.sample(files, rng.randint(1, 3))]
        try:
            replicas = manager(root)
            try:
                after = served(replicas)
                end = replicas.partitions[("t", 0)].log.log_end_offset
                write(replicas, RECORDS, 1, producer_id=-1)
                assert replicas.partitions[("t", 0)].log.log_end_offset == end + 1
                after_stable = transactions(replicas)
            finally:
                replicas.close()
        except Exception as e:
            raise AssertionError(f"seed {seed}, damage: {hurt}") from e
        strays = list(root.glob("t-0.*-stray"))
        if strays:  # partition.metadata names another topic: the log is kept aside, whole
            assert any(h.endswith("partition.metadata") for h in hurt), (seed, hurt)
            assert {p.name for p in strays[0].glob("*.log")} == {p.name for p in written[clean].glob("t-0/*.log")}
        elif not any(h.endswith(".log") for h in hurt):  # the rest is rebuilt from the segments
            assert {o: v for o, v in after.items() if o >= 3} == before, (seed, hurt)
            # A .txnindex deleted, cut at an entry or damaged into other entries that parse is not
            # seen (as in Kafka): test_a_damaged_transaction_index_is_built_again covers the rest.
            assert after_stable == stable or any(h.endswith(".txnindex") for h in hurt), (seed, hurt)


def test_a_log_under_another_topic_id_is_set_aside_whole_not_deleted(written, tmp_path):
    """A copy of a deleted topic of the same name, or a partition.metadata damaged into another
    id: the broker cannot tell which, so it keeps the log for an operator (Kafka's stray replicas)
    and the replica starts empty (a follower fetches it again from its leader)."""
    root = shutil.copytree(written[True], tmp_path / "root")
    (root / "t-0" / "partition.metadata").write_text(f"version: 0\ntopic_id: {encode_topic_id(uuid.uuid4())}\n")
    replicas = manager(root)
    try:
        assert replicas.partitions[("t", 0)].log.log_end_offset == 0
    finally:
        replicas.close()
    (stray,) = root.glob("t-0.*-stray")
    assert sorted(p.name for p in stray.iterdir()) == sorted(p.name for p in (written[True] / "t-0").iterdir())


def test_a_damaged_transaction_index_is_built_again(written, tmp_path):
    """An entry of a .txnindex that cannot be (its first offset after its marker's): every index
    is built again from the whole log, and READ_COMMITTED consumers are told of every aborted
    transaction as before (dropping only the damaged file lost its aborts for good, and the
    entry failed the broker's start before that)."""
    intact = manager(shutil.copytree(written[True], tmp_path / "intact"))
    stable = transactions(intact)
    intact.close()
    root = shutil.copytree(written[True], tmp_path / "root")
    (damaged, *_) = [p for p in sorted(root.glob("t-0/*.txnindex")) if p.stat().st_size]
    data = bytearray(damaged.read_bytes())
    data[10] ^= 0x40  # the first offset's high bytes
    damaged.write_bytes(bytes(data))
    replicas = manager(root)
    try:
        assert transactions(replicas) == stable
    finally:
        replicas.close()
