"""The transaction coordinator's requests over the wire, with Weir's own client, for the tests
that run real brokers."""

from __future__ import annotations

import asyncio
import time

from weir.client import BrokerConnection
from weir.protocol.errors import ErrorCode
from weir.protocol.versions import ApiKey

TXN_SETTINGS = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3",
                "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
                "group.initial.rebalance.delay.ms": "0"}
KEY_TYPE_TRANSACTION = 1
RETRIABLE = {ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator,
             ErrorCode.concurrent_transactions}


def port_of(bootstrap: str) -> int:
    return int(bootstrap.rsplit(":", 1)[1])


async def call(port: int, api_key: int, version: int, body, timeout_s: float = 15):
    async with await BrokerConnection.open("127.0.0.1", port, timeout_s=timeout_s) as conn:
        return await conn.request(api_key, version, body)


async def find_coordinator(ports: list[int], transactional_id: str, timeout_s: float = 30) -> int:
    """The port of the id's coordinator, once FindCoordinator names one."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = await call(ports[0], ApiKey.FIND_COORDINATOR, 4,
                              {"key_type": KEY_TYPE_TRANSACTION, "coordinator_keys": [transactional_id]})
        found = response.coordinators[0]
        if found.error_code == ErrorCode.none:
            return found.port
        assert found.error_code == ErrorCode.coordinator_not_available, found
        if time.monotonic() > deadline:
            raise AssertionError(f"no coordinator for {transactional_id}: {found}")
        await asyncio.sleep(0.2)


async def until_ok(ask, timeout_s: float = 30, ok=(ErrorCode.none,)):
    """Ask again while the answer is a retriable coordinator error; the last response."""
    deadline = time.monotonic() + timeout_s
    while True:
        response, error = await ask()
        if error in ok or error not in RETRIABLE or time.monotonic() > deadline:
            return response
        await asyncio.sleep(0.2)


async def init_producer_id(port: int, transactional_id: str | None, timeout_ms: int = 60000, version: int = 4,
                           producer_id: int = -1, epoch: int = -1, retry: bool = True):
    body = {"transactional_id": transactional_id, "transaction_timeout": timeout_ms, "producer_id": producer_id,
            "producer_epoch": epoch}

    async def ask():
        response = await call(port, ApiKey.INIT_PRODUCER_ID, version, body)
        return response, response.error_code
    if not retry:
        return (await ask())[0]
    return await until_ok(ask)


async def add_partitions(port: int, transactional_id: str, producer_id: int, epoch: int,
                         partitions: dict[str, list[int]], version: int = 3) -> dict:
    body = {"v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": producer_id,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in partitions.items()]}

    async def ask():
        response = await call(port, ApiKey.ADD_PARTITIONS_TO_TXN, version, body)
        errors = {(t.name, p.partition_index): p.partition_error_code
                  for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}
        return errors, next(iter(errors.values()))
    return await until_ok(ask)


async def end_txn(port: int, transactional_id: str, producer_id: int, epoch: int, committed: bool,
                  version: int = 3, retry: bool = False) -> ErrorCode:
    body = {"transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": epoch,
            "committed": committed}

    async def ask():
        response = await call(port, ApiKey.END_TXN, version, body)
        return response.error_code, response.error_code
    if not retry:
        return (await ask())[0]
    return await until_ok(ask)


async def describe(port: int, transactional_id: str):
    response = await call(port, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]})
    return response.transaction_states[0]


async def list_transactions(port: int, states=(), producer_ids=(), duration_ms: int = -1):
    return await call(port, ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": list(states),
                                                         "producer_id_filters": list(producer_ids),
                                                         "duration_filter": duration_ms})


async def wait_state(port: int, transactional_id: str, states: set[str], timeout_s: float = 30):
    deadline = time.monotonic() + timeout_s
    while True:
        state = await describe(port, transactional_id)
        if state.error_code == ErrorCode.none and state.transaction_state in states:
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"{transactional_id} never reached {states}: {state}")
        await asyncio.sleep(0.2)
