"""Sends the leaders' ISR changes to the controller (AlterPartition) and feeds back the answers:
the I/O around the outbox's rules (isr_outbox.py)."""

import asyncio
import logging
import time

from weir.broker.replica_manager import ReplicaManager
from weir.client import ClientError
from weir.protocol.errors import ErrorCode
from weir.protocol.versions import ApiKey
from weir.replication.isr_outbox import isr_change_result

log = logging.getLogger(__name__)

ALTER_PARTITION_VERSION = 3  # members with their broker epochs (KIP-903)


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


async def send_isr_changes(replicas: ReplicaManager, connect) -> None:
    """Forever: send what the outbox has due to the current controller, one request at a time.
    `connect(broker_id)` gives a (cached) BrokerConnection."""
    outbox = replicas.isr_outbox
    while True:
        batch = outbox.take(_monotonic_ms())
        if batch is None:
            wake_at = outbox.wake_at()
            try:
                async with asyncio.timeout(None if wake_at is None else max(0.0, wake_at - _monotonic_ms()) / 1000):
                    await replicas.isr_outbox_ready.wait()
            except TimeoutError:
                pass
            replicas.isr_outbox_ready.clear()
            continue
        try:
            answers = await _send(replicas, connect, batch)
        except (ClientError, OSError) as e:
            log.info("AlterPartition to controller %d failed: %s", replicas.view.controller_id, e)
            outbox.failed(_monotonic_ms())
            continue
        outbox.answered(answers.keys(), _monotonic_ms())
        now_ms = int(time.time() * 1000)
        for key, result in answers.items():
            replicas.on_isr_change_result(key, batch[key], result, now_ms)


async def _send(replicas: ReplicaManager, connect, batch: dict) -> dict:
    """One AlterPartition request: the answers, by partition, to those of `batch` it answered."""
    topics: dict[str, list] = {}
    for (topic, index), proposal in batch.items():
        epochs = dict(proposal.broker_epochs)
        topics.setdefault(topic, []).append({
            "partition_index": index, "leader_epoch": proposal.leader_epoch,
            "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": epochs.get(b, -1)}
                                    for b in sorted(proposal.new_isr)],
            "leader_recovery_state": 0, "partition_epoch": proposal.partition_epoch})
    ids = {name: a.topic_id for name, a in replicas.view.topics.items()}
    conn = await connect(replicas.view.controller_id)
    response = await conn.request(ApiKey.ALTER_PARTITION, ALTER_PARTITION_VERSION, {
        "broker_id": replicas.broker_id, "broker_epoch": replicas.own_broker_epoch(),
        "topics": [{"topic_id": ids[t], "partitions": parts} for t, parts in topics.items() if t in ids]})
    if response.error_code:
        raise ClientError(f"AlterPartition refused: {ErrorCode(response.error_code).name}")
    answers = {}
    for t in response.topics:
        for p in t.partitions:
            key = (replicas.view.topic_name(t.topic_id), p.partition_index)
            if key in batch:
                answers[key] = isr_change_result(p.error_code, p)
    return answers
