"""The transaction coordinator in real brokers, over the wire: FindCoordinator for transactional
ids, InitProducerId's epochs and fencing, AddPartitionsToTxn, EndTxn, DescribeTransactions,
ListTransactions, the abort of a timed-out transaction, and failover of a coordinator."""

import asyncio
import subprocess
import sys

from confluent_kafka.admin import AdminClient, NewTopic

from weir.protocol.errors import ErrorCode
from weir.protocol.versions import ApiKey
from weir.transactions.coordinator import partition_for

from .txn_wire import (TXN_SETTINGS, add_partitions, call, describe, end_txn, find_coordinator, init_producer_id,
                       list_transactions, wait_state)


def create_topic(bootstrap: str, name: str, partitions: int, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication)])[name].result(30)


def test_find_coordinator_init_producer_id_fencing_and_describe(start_broker):
    broker = start_broker(0, **{k.replace(".", "_"): v for k, v in TXN_SETTINGS.items()})
    create_topic(broker.bootstrap, "data", 2)

    async def scenario():
        port = await find_coordinator([broker.port], "txn-a")
        assert port == broker.port
        # the older, unbatched versions answer for transactions too
        for version in (1, 2, 3):
            response = await call(port, ApiKey.FIND_COORDINATOR, version, {"key": "txn-a", "key_type": 1})
            assert (response.error_code, response.node_id, response.port) == (ErrorCode.none, 0, port)
        response = await call(port, ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [""]})
        assert response.coordinators[0].error_code == ErrorCode.invalid_request

        first = await init_producer_id(port, "txn-a")
        assert first.error_code == ErrorCode.none and first.producer_epoch == 0
        second = await init_producer_id(port, "txn-a")
        assert (second.error_code, second.producer_id, second.producer_epoch) == (ErrorCode.none, first.producer_id, 1)
        # an idempotent producer gets a fresh id
        idempotent = await init_producer_id(port, None)
        assert idempotent.error_code == ErrorCode.none and idempotent.producer_id != first.producer_id
        # KIP-360: a producer naming its old epoch is fenced (INVALID_PRODUCER_EPOCH before v4)
        fenced = await init_producer_id(port, "txn-a", producer_id=first.producer_id, epoch=0, retry=False)
        assert (fenced.error_code, fenced.producer_id) == (ErrorCode.producer_fenced, -1)
        fenced = await init_producer_id(port, "txn-a", producer_id=first.producer_id, epoch=0, version=3, retry=False)
        assert fenced.error_code == ErrorCode.invalid_producer_epoch
        half = await init_producer_id(port, "txn-a", producer_id=first.producer_id, epoch=-1, retry=False)
        assert half.error_code == ErrorCode.invalid_request  # one of id and epoch -1
        bad_timeout = await init_producer_id(port, "txn-a", timeout_ms=900_001, retry=False)
        assert bad_timeout.error_code == ErrorCode.invalid_transaction_timeout

        pid = first.producer_id
        # the fenced epoch: PRODUCER_FENCED from v2 on, INVALID_PRODUCER_EPOCH before
        errors = await add_partitions(port, "txn-a", pid, 0, {"data": [0]}, version=3)
        assert set(errors.values()) == {ErrorCode.producer_fenced}
        errors = await add_partitions(port, "txn-a", pid, 0, {"data": [0]}, version=1)
        assert set(errors.values()) == {ErrorCode.invalid_producer_epoch}
        errors = await add_partitions(port, "txn-a", pid + 1000, 1, {"data": [0]})
        assert set(errors.values()) == {ErrorCode.invalid_producer_id_mapping}
        errors = await add_partitions(port, "txn-a", pid, 1, {"data": [0], "nope": [0]})
        assert errors == {("data", 0): ErrorCode.operation_not_attempted,
                          ("nope", 0): ErrorCode.unknown_topic_or_partition}
        assert await end_txn(port, "txn-a", pid, 1, committed=True) == ErrorCode.invalid_txn_state

        errors = await add_partitions(port, "txn-a", pid, 1, {"data": [0, 1]})
        assert set(errors.values()) == {ErrorCode.none}
        state = await describe(port, "txn-a")
        assert (state.error_code, state.transaction_state, state.producer_id, state.producer_epoch) == \
            (ErrorCode.none, "Ongoing", pid, 1)
        assert [(t.topic, sorted(t.partitions)) for t in state.topics] == [("data", [0, 1])]
        assert state.transaction_timeout.total_seconds() == 60
        listed = await list_transactions(port, states=["Ongoing"])
        assert [(t.transactional_id, t.producer_id) for t in listed.transaction_states] == [("txn-a", pid)]
        listed = await list_transactions(port, states=["Bogus"], producer_ids=[pid + 1])
        assert list(listed.unknown_state_filters) == ["Bogus"] and not listed.transaction_states
        # every state Kafka has is known, those never current too (TransactionState.fromName)
        listed = await list_transactions(port, states=["Dead", "PrepareEpochFence", "Bogus"])
        assert list(listed.unknown_state_filters) == ["Bogus"] and not listed.transaction_states
        listed = await list_transactions(port, duration_ms=3_600_000)
        assert not listed.transaction_states

        # the old epoch cannot end it; the current one commits (answered once PrepareCommit is written)
        assert await end_txn(port, "txn-a", pid, 0, committed=True, version=1) == ErrorCode.invalid_producer_epoch
        assert await end_txn(port, "txn-a", pid, 1, committed=True) == ErrorCode.none
        state = await wait_state(port, "txn-a", {"CompleteCommit"})  # the markers were written
        assert (state.producer_epoch, list(state.topics)) == (1, [])
        assert await end_txn(port, "txn-a", pid, 1, committed=True) == ErrorCode.none  # a retry
        assert await end_txn(port, "txn-a", pid, 1, committed=False) == ErrorCode.invalid_txn_state
        # InitProducerId on an ongoing transaction aborts it with the epoch bumped: the caller
        # hears CONCURRENT_TRANSACTIONS, and its retry gets the next epoch once the abort is done
        assert set((await add_partitions(port, "txn-a", pid, 1, {"data": [1]})).values()) == {ErrorCode.none}
        fence = await init_producer_id(port, "txn-a", retry=False)
        assert fence.error_code == ErrorCode.concurrent_transactions
        assert await end_txn(port, "txn-a", pid, 1, committed=True) == ErrorCode.producer_fenced
        again = await init_producer_id(port, "txn-a")
        assert (again.error_code, again.producer_id, again.producer_epoch) == (ErrorCode.none, pid, 3)
        assert (await describe(port, "txn-a")).transaction_state == "Empty"
        unknown = await describe(port, "never-seen")
        assert unknown.error_code == ErrorCode.transactional_id_not_found
        return pid

    pid = asyncio.run(scenario())
    # the operator's view: weir transactions list / describe
    listed = weir_cli(broker, "transactions", "list")
    assert listed.returncode == 0, listed.stderr
    lines = [line.split() for line in listed.stdout.splitlines() if line.strip()]
    assert lines[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert lines[1][:3] == ["txn-a", "0", str(pid)]
    described = weir_cli(broker, "transactions", "describe", "--transactional-id", "txn-a")
    assert described.returncode == 0, described.stderr
    header, row = [line.split() for line in described.stdout.splitlines() if line.strip()]
    fields = dict(zip(header, row))
    assert (fields["CoordinatorId"], fields["TransactionalId"], fields["ProducerId"], fields["ProducerEpoch"]) == \
        ("0", "txn-a", str(pid), "3")
    assert fields["TransactionState"] == "Empty"
    producers = weir_cli(broker, "transactions", "describe-producers", "--topic", "data", "--partition", "0")
    assert producers.returncode == 0, producers.stderr
    header, *rows = [line.split() for line in producers.stdout.splitlines() if line.strip()]
    assert header[:3] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch"]
    # only the commit marker was written there: the producer, its epoch, the coordinator epoch, no open transaction
    assert [row[:4] + row[5:] for row in rows] == [[str(pid), "1", "0", "-1", "None"]]
    missing = weir_cli(broker, "transactions", "describe", "--transactional-id", "never-seen")
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr.upper()


def weir_cli(broker, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "weir.cli.main", *args, "--bootstrap-server", broker.bootstrap],
                          capture_output=True, text=True, timeout=60)


def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced_and_an_idle_id_expires(start_broker):
    broker = start_broker(0, **{k.replace(".", "_"): v for k, v in TXN_SETTINGS.items()},
                          transactional_id_expiration_ms="3000",
                          transaction_remove_expired_transaction_cleanup_interval_ms="500")
    create_topic(broker.bootstrap, "data", 1)

    async def scenario():
        port = await find_coordinator([broker.port], "slow")
        first = await init_producer_id(port, "slow", timeout_ms=1000)
        pid = first.producer_id
        errors = await add_partitions(port, "slow", pid, 0, {"data": [0]})
        assert set(errors.values()) == {ErrorCode.none}
        state = await wait_state(port, "slow", {"PrepareAbort", "CompleteAbort"}, timeout_s=15)
        assert state.producer_epoch == 1  # bumped: the producer at epoch 0 is fenced
        assert await end_txn(port, "slow", pid, 0, committed=True) == ErrorCode.producer_fenced
        # idle for transactional.id.expiration.ms: forgotten (a tombstone), and a new producer
        # of the id starts afresh
        await wait_state(port, "slow", {"CompleteAbort"}, timeout_s=15)
        deadline = asyncio.get_running_loop().time() + 20
        while (await describe(port, "slow")).error_code != ErrorCode.transactional_id_not_found:
            assert asyncio.get_running_loop().time() < deadline, "never expired"
            await asyncio.sleep(0.3)
        fresh = await init_producer_id(port, "slow")
        assert fresh.error_code == ErrorCode.none and fresh.producer_id != pid and fresh.producer_epoch == 0

    asyncio.run(scenario())


def test_txn_offset_commit_is_pending_until_its_transaction_ends(start_broker):
    """TxnOffsetCommit writes a transactional batch; the offsets stay invisible, and OffsetFetch
    with require_stable answers UNSTABLE_OFFSET_COMMIT, until the commit marker lands."""
    broker = start_broker(0, **{k.replace(".", "_"): v for k, v in TXN_SETTINGS.items()})
    create_topic(broker.bootstrap, "data", 1)

    async def scenario():
        port = await find_coordinator([broker.port], "offsets-txn")
        first = await init_producer_id(port, "offsets-txn")
        pid, epoch = first.producer_id, first.producer_epoch
        response = await call(port, ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": "offsets-txn",
                                                                   "producer_id": pid, "producer_epoch": epoch,
                                                                   "group_id": "g"})
        assert response.error_code == ErrorCode.none
        state = await describe(port, "offsets-txn")
        assert [t.topic for t in state.topics] == ["__consumer_offsets"]
        await call(port, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
        body = {"transactional_id": "offsets-txn", "group_id": "g", "producer_id": pid, "producer_epoch": epoch,
                "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": "data", "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                            "committed_leader_epoch": -1,
                                                            "committed_metadata": "m"}]},
                           {"name": "nope", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                            "committed_leader_epoch": -1,
                                                            "committed_metadata": ""}]}]}
        for _ in range(100):
            response = await call(port, ApiKey.TXN_OFFSET_COMMIT, 3, body)
            errors = {t.name: t.partitions[0].error_code for t in response.topics}
            if errors["data"] not in (ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
                                      ErrorCode.not_coordinator):
                break
            await asyncio.sleep(0.2)
        assert errors == {"data": ErrorCode.none, "nope": ErrorCode.unknown_topic_or_partition}
        fetch = {"group_id": "g", "topics": [{"name": "data", "partition_indexes": [0]}]}
        unstable = await call(port, ApiKey.OFFSET_FETCH, 7, {**fetch, "require_stable": True})
        partition = unstable.topics[0].partitions[0]
        assert (partition.error_code, partition.committed_offset) == (ErrorCode.unstable_offset_commit, -1)
        plain = await call(port, ApiKey.OFFSET_FETCH, 7, {**fetch, "require_stable": False})
        partition = plain.topics[0].partitions[0]
        assert (partition.error_code, partition.committed_offset) == (ErrorCode.none, -1)
        # the commit marker lands in __consumer_offsets: the offset is visible and stable
        assert await end_txn(port, "offsets-txn", pid, epoch, committed=True) == ErrorCode.none
        assert await stable_offset(port, "g", ("data", 0)) == 42

    asyncio.run(scenario())


def test_txn_offset_commit_of_a_negative_producer_id_or_epoch_is_refused_as_kafkas_verification_does(start_broker):
    """No transactional id maps to a negative producer id (INVALID_PRODUCER_ID_MAPPING), and a
    negative epoch is fenced (INVALID_PRODUCER_EPOCH): Kafka's coordinator answers so when the
    group coordinator verifies the transaction (KIP-890). Nothing is written."""
    broker = start_broker(0, **{k.replace(".", "_"): v for k, v in TXN_SETTINGS.items()})
    create_topic(broker.bootstrap, "data", 1)

    async def commit(pid: int, epoch: int) -> ErrorCode:
        body = {"transactional_id": "negative", "group_id": "g", "producer_id": pid, "producer_epoch": epoch,
                "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": "data", "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                            "committed_leader_epoch": -1,
                                                            "committed_metadata": ""}]}]}
        for _ in range(100):  # until the group coordinator has loaded __consumer_offsets
            response = await call(port, ApiKey.TXN_OFFSET_COMMIT, 3, body)
            error = response.topics[0].partitions[0].error_code
            if error not in (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator):
                return error
            await asyncio.sleep(0.2)
        raise AssertionError("the group coordinator never loaded")

    async def scenario():
        await call(port, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
        assert await commit(-1, 0) == ErrorCode.invalid_producer_id_mapping
        assert await commit(-7, -1) == ErrorCode.invalid_producer_id_mapping
        assert await commit(4000, -1) == ErrorCode.invalid_producer_epoch
        fetch = await call(port, ApiKey.OFFSET_FETCH, 7, {"group_id": "g", "require_stable": True,
                                                         "topics": [{"name": "data", "partition_indexes": [0]}]})
        partition = fetch.topics[0].partitions[0]
        assert (partition.error_code, partition.committed_offset) == (ErrorCode.none, -1)

    port = broker.port
    asyncio.run(scenario())
    assert "Traceback" not in broker.output()


async def stable_offset(port: int, group: str, tp: tuple[str, int], timeout_s: float = 30) -> int:
    """The committed offset once OffsetFetch with require_stable gives one."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        response = await call(port, ApiKey.OFFSET_FETCH, 7, {"group_id": group, "require_stable": True,
                                                            "topics": [{"name": tp[0], "partition_indexes": [tp[1]]}]})
        partition = response.topics[0].partitions[0] if response.topics else None
        if response.error_code == ErrorCode.none and partition is not None and partition.error_code == ErrorCode.none:
            return partition.committed_offset
        assert asyncio.get_running_loop().time() < deadline, response
        await asyncio.sleep(0.2)


async def txn_offset_commit(port: int, transactional_id: str, group: str, offsets: dict[tuple[str, int], int],
                            timeout_ms: int = 60000) -> tuple[int, int]:
    """A new transaction of `transactional_id` that commits `offsets` for `group`; (producer id, epoch)."""
    init = await init_producer_id(port, transactional_id, timeout_ms=timeout_ms)
    pid, epoch = init.producer_id, init.producer_epoch
    response = await call(port, ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": transactional_id,
                                                               "producer_id": pid, "producer_epoch": epoch,
                                                               "group_id": group})
    assert response.error_code == ErrorCode.none
    body = {"transactional_id": transactional_id, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
            "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": [{"partition_index": p, "committed_offset": o,
                                                   "committed_leader_epoch": -1, "committed_metadata": ""}]}
                       for (t, p), o in offsets.items()]}
    for _ in range(100):
        response = await call(port, ApiKey.TXN_OFFSET_COMMIT, 3, body)
        errors = {p.error_code for t in response.topics for p in t.partitions}
        if errors == {ErrorCode.none}:
            return pid, epoch
        assert errors <= {ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
                          ErrorCode.not_coordinator, ErrorCode.concurrent_transactions}, errors
        await asyncio.sleep(0.2)
    raise AssertionError("TxnOffsetCommit never succeeded")


def test_loading_replays_transactional_offsets_and_their_markers(start_broker):
    """After a restart the group coordinator rebuilds from __consumer_offsets: a committed
    transaction's offsets are visible, an aborted one's are not, an open one's are pending."""
    settings = {k.replace(".", "_"): v for k, v in TXN_SETTINGS.items()}
    broker = start_broker(0, **settings)
    create_topic(broker.bootstrap, "data", 2)

    async def before():
        port = await find_coordinator([broker.port], "committer")
        await call(port, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
        pid, epoch = await txn_offset_commit(port, "committer", "g", {("data", 0): 42})
        assert await end_txn(port, "committer", pid, epoch, committed=True) == ErrorCode.none
        assert await stable_offset(port, "g", ("data", 0)) == 42
        pid, epoch = await txn_offset_commit(port, "aborter", "g", {("data", 0): 99})
        assert await end_txn(port, "aborter", pid, epoch, committed=False) == ErrorCode.none
        assert await stable_offset(port, "g", ("data", 0)) == 42
        await txn_offset_commit(port, "open", "g", {("data", 1): 7})

    asyncio.run(before())
    broker.kill()
    broker.start()

    async def after():
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            response = await call(broker.port, ApiKey.OFFSET_FETCH, 7, {
                "group_id": "g", "require_stable": True,
                "topics": [{"name": "data", "partition_indexes": [0, 1]}]})
            if response.error_code == ErrorCode.none:
                break
            assert asyncio.get_running_loop().time() < deadline, response
            await asyncio.sleep(0.2)
        by_partition = {p.partition_index: (p.error_code, p.committed_offset) for p in response.topics[0].partitions}
        assert by_partition == {0: (ErrorCode.none, 42), 1: (ErrorCode.unstable_offset_commit, -1)}
        state = await describe(await find_coordinator([broker.port], "open"), "open")
        assert state.transaction_state == "Ongoing"

    asyncio.run(after())


def test_a_killed_coordinators_transactions_are_reloaded_and_its_markers_sent_again(start_cluster):
    """kill -9 of the __transaction_state leader while a commit's marker cannot be written (the
    data partition's only replica is down): the next leader loads the partition, answers for a
    decided (PrepareCommit) and an Ongoing transaction, and, once the data partition is back,
    writes the marker the old coordinator could not and completes the commit."""
    cluster = start_cluster(**{k.replace(".", "_"): v for k, v in TXN_SETTINGS.items()},
                            replica_lag_time_max_ms="2000")
    ports = [b.port for b in cluster.brokers]

    async def scenario():
        port = await find_coordinator(ports, "fo")
        coordinator = next(b for b in cluster.brokers if b.port == port)
        data_broker, survivor = [b for b in cluster.brokers if b is not coordinator]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("data", 1, replica_assignment=[[data_broker.broker_id]])])[
            "data"].result(30)
        first = await init_producer_id(port, "fo")
        pid, epoch = first.producer_id, first.producer_epoch
        assert set((await add_partitions(port, "fo", pid, epoch, {"data": [0]})).values()) == {ErrorCode.none}
        # a second id in the same __transaction_state partition, left Ongoing
        other = next(f"fo-{i}" for i in range(1000) if partition_for(f"fo-{i}", 3) == partition_for("fo", 3))
        second = await init_producer_id(port, other)
        assert set((await add_partitions(port, other, second.producer_id, 0, {"data": [0]})).values()) == \
            {ErrorCode.none}
        data_broker.kill()
        assert await end_txn(port, "fo", pid, epoch, committed=True, retry=True) == ErrorCode.none
        await asyncio.sleep(1)
        assert (await describe(port, "fo")).transaction_state == "PrepareCommit"  # its marker cannot be written
        coordinator.kill()
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            new_port = await find_coordinator([survivor.port], "fo", timeout_s=60)
            if new_port == survivor.port:  # until the killed broker's session expires, it is still named
                state = await describe(new_port, "fo")
                if state.error_code == ErrorCode.none:
                    break
            assert asyncio.get_running_loop().time() < deadline, "no new coordinator"
            await asyncio.sleep(0.3)
        assert (state.producer_id, state.producer_epoch, state.transaction_state) == (pid, epoch, "PrepareCommit")
        ongoing = await describe(new_port, other)
        assert (ongoing.transaction_state, [(t.topic, list(t.partitions)) for t in ongoing.topics]) == \
            ("Ongoing", [("data", [0])])
        data_broker.start()
        state = await wait_state(new_port, "fo", {"CompleteCommit"}, timeout_s=60)
        assert (state.producer_id, state.producer_epoch, list(state.topics)) == (pid, epoch, [])

    asyncio.run(scenario())


def test_txn_offset_commit_verified_with_a_coordinator_on_another_broker(start_cluster):
    """KIP-890 for TxnOffsetCommit: the group's coordinator asks the transaction's coordinator,
    on another broker, with AddPartitionsToTxn v4 verify_only, before it appends the offsets."""
    cluster = start_cluster(**{k.replace(".", "_"): v for k, v in TXN_SETTINGS.items()})
    create_topic(cluster.bootstrap, "data", 1, replication=3)
    ports = [b.port for b in cluster.brokers]

    async def scenario():
        group_port = None
        for _ in range(100):
            response = await call(ports[0], ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
            if response.coordinators[0].error_code == ErrorCode.none:
                group_port = response.coordinators[0].port
                break
            await asyncio.sleep(0.2)
        assert group_port is not None
        for i in range(100):
            txn_port = await find_coordinator(ports, f"remote-{i}")
            if txn_port != group_port:
                transactional_id = f"remote-{i}"
                break
        # the producer talks to each coordinator: TxnOffsetCommit goes to the group's
        init = await init_producer_id(txn_port, transactional_id)
        pid, epoch = init.producer_id, init.producer_epoch
        body = {"transactional_id": transactional_id, "group_id": "g", "producer_id": pid, "producer_epoch": epoch,
                "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": "data", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                            "committed_leader_epoch": -1,
                                                            "committed_metadata": ""}]}]}
        # not added to the transaction yet (no AddOffsetsToTxn): the verification refuses it
        response = await call(group_port, ApiKey.TXN_OFFSET_COMMIT, 3, body)
        assert response.topics[0].partitions[0].error_code == ErrorCode.invalid_txn_state
        response = await call(txn_port, ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": transactional_id,
                                                                       "producer_id": pid, "producer_epoch": epoch,
                                                                       "group_id": "g"})
        assert response.error_code == ErrorCode.none
        response = await call(group_port, ApiKey.TXN_OFFSET_COMMIT, 3, body)
        assert response.topics[0].partitions[0].error_code == ErrorCode.none
        assert await end_txn(txn_port, transactional_id, pid, epoch, committed=True) == ErrorCode.none
        assert await stable_offset(group_port, "g", ("data", 0)) == 5

    asyncio.run(scenario())
