"""`weir transactions`, in the manner of Kafka's kafka-transactions.sh (KIP-664).

    weir transactions list [--state S]... [--producer-id P]... [--duration-filter MS]
    weir transactions describe --transactional-id X
    weir transactions describe-producers --topic T --partition P [--broker-id B]

`list` asks every broker (ListTransactions: each answers for the ids it coordinates) and prints
TransactionalId, Coordinator, ProducerId, TransactionState; `describe` asks the id's coordinator
(FindCoordinator with key type TRANSACTION, then DescribeTransactions) and prints its producer,
state, timeout, start, duration and partitions, as Kafka's tool does; `describe-producers` asks
the partition's leader (or --broker-id's replica) with DescribeProducers for its active
producers, their last sequence and timestamp, coordinator epoch and open transaction's start.
"""

from __future__ import annotations

import time

from weir.cli.common import common_options, run_command, table
from weir.client import ClusterClient, check_error
from weir.protocol.versions import ApiKey

KEY_TYPE_TRANSACTION = 1


async def coordinator_id(client: ClusterClient, transactional_id: str) -> int:
    response = await client.call_any(ApiKey.FIND_COORDINATOR, {"key": transactional_id, "key_type":
                                                               KEY_TYPE_TRANSACTION}, max_version=3)
    check_error(response.error_code, response.error_message)
    if int(response.node_id) not in client.brokers:
        await client.refresh_metadata([])
    return int(response.node_id)


async def list_transactions(client: ClusterClient, states=(), producer_ids=(), duration_ms: int = -1) -> list[tuple]:
    """(transactional id, coordinator, producer id, state) of every transaction in the cluster."""
    await client.refresh_metadata([])
    rows = []
    for broker_id in sorted(client.brokers):
        conn = await client.connection(broker_id)
        response = await conn.call(ApiKey.LIST_TRANSACTIONS, {"state_filters": list(states),
                                                              "producer_id_filters": list(producer_ids),
                                                              "duration_filter": duration_ms}, max_version=1)
        check_error(response.error_code, f"ListTransactions on broker {broker_id}")
        rows += [(t.transactional_id, broker_id, int(t.producer_id), t.transaction_state)
                 for t in response.transaction_states]
    return sorted(rows)


async def describe_transaction(client: ClusterClient, transactional_id: str):
    broker_id = await coordinator_id(client, transactional_id)
    conn = await client.connection(broker_id)
    response = await conn.call(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]}, max_version=0)
    (described,) = response.transaction_states
    check_error(described.error_code, f"transactional id {transactional_id}")
    return broker_id, described


async def list_action(client: ClusterClient, args) -> int:
    rows = await list_transactions(client, args.state or (), args.producer_id or (), args.duration_filter)
    table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], [list(r) for r in rows])
    return 0


async def describe_action(client: ClusterClient, args) -> int:
    broker_id, t = await describe_transaction(client, args.transactional_id)
    start = int(t.transaction_start_time)
    duration = int(time.time() * 1000) - start if start >= 0 else "None"
    partitions = ",".join(f"{topic.topic}-{p}" for topic in t.topics for p in topic.partitions)
    table(["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
           "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"],
          [[broker_id, t.transactional_id, int(t.producer_id), int(t.producer_epoch), t.transaction_state,
            int(t.transaction_timeout.total_seconds() * 1000), start if start >= 0 else "None", duration,
            partitions]])
    return 0


async def describe_producers_action(client: ClusterClient, args) -> int:
    body = {"topics": [{"name": args.topic, "partition_indexes": [args.partition]}]}
    if args.broker_id is None:
        response = await client.call_leader(args.topic, args.partition, ApiKey.DESCRIBE_PRODUCERS, body, max_version=0)
    else:
        await client.refresh_metadata([args.topic])
        response = await (await client.connection(args.broker_id)).call(ApiKey.DESCRIBE_PRODUCERS, body,
                                                                         max_version=0)
    (partition,) = response.topics[0].partitions
    check_error(partition.error_code, partition.error_message or f"{args.topic}-{args.partition}")
    table(["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
           "CurrentTransactionStartOffset"],
          [[int(p.producer_id), int(p.producer_epoch), int(p.coordinator_epoch), int(p.last_sequence),
            int(p.last_timestamp), int(p.current_txn_start_offset) if p.current_txn_start_offset >= 0 else "None"]
           for p in partition.active_producers])
    return 0


def register(sub) -> None:
    command = sub.add_parser("transactions", help="list and describe transactions")
    actions = command.add_subparsers(dest="transactions_action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the transactions of every coordinator")
    common_options(listing, suppress=False)
    listing.add_argument("--state", action="append", metavar="STATE", help="only these states (Ongoing, ...)")
    listing.add_argument("--producer-id", action="append", type=int, metavar="ID")
    listing.add_argument("--duration-filter", type=int, default=-1, metavar="MS",
                         help="only transactions running longer than this")
    listing.set_defaults(func=lambda args: run_command(list_action, args))
    describing = actions.add_parser("describe", help="one transactional id, from its coordinator")
    common_options(describing, suppress=False)
    describing.add_argument("--transactional-id", required=True)
    describing.set_defaults(func=lambda args: run_command(describe_action, args))
    producers = actions.add_parser("describe-producers", help="a partition's active producers and their transactions")
    common_options(producers, suppress=False)
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    producers.add_argument("--broker-id", type=int, help="ask this replica rather than the leader")
    producers.set_defaults(func=lambda args: run_command(describe_producers_action, args))
