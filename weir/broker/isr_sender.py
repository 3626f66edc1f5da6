"""Sends the leaders' ISR changes to the controller (AlterPartition) and feeds back the answers."""

import asyncio
import logging
import time

from ..client import ClientError
from ..protocol.errors import ErrorCode
from ..protocol.versions import ApiKey
from ..replication.leader import IsrChangeAccepted, IsrChangeRejected
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

ALTER_PARTITION_VERSION = 3  # members with their broker epochs (KIP-903)
RETRY_BACKOFF_S = 0.1


async def send_isr_changes(replicas: ReplicaManager, connect) -> None:
    """Forever: drain the outbox into AlterPartition requests to the current controller.

    `connect(broker_id)` gives a (cached) BrokerConnection. Refused or unreachable requests go
    back to the outbox and are retried after a short backoff, against whoever is controller then.
    """
    while True:
        await replicas.isr_outbox_ready.wait()
        replicas.isr_outbox_ready.clear()
        batch = dict(replicas.isr_outbox)
        replicas.isr_outbox.clear()
        if not batch:
            continue
        try:
            await _send(replicas, connect, batch)
        except (ClientError, OSError) as e:
            log.info("AlterPartition to controller %d failed: %s", replicas.view.controller_id, e)
            for key, proposal in batch.items():
                replicas.isr_outbox.setdefault(key, proposal)
        if replicas.isr_outbox:
            await asyncio.sleep(RETRY_BACKOFF_S)
            replicas.isr_outbox_ready.set()


async def _send(replicas: ReplicaManager, connect, batch: dict) -> None:
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
    now_ms = int(time.time() * 1000)
    for t in response.topics:
        for p in t.partitions:
            key = (replicas.view.topic_name(t.topic_id), p.partition_index)
            proposal = batch.get(key)
            if proposal is None:
                continue
            result = (IsrChangeRejected(ErrorCode(p.error_code)) if p.error_code else
                      IsrChangeAccepted(p.leader_epoch, p.partition_epoch, frozenset(p.isr)))
            replicas.on_isr_change_result(key, proposal, result, now_ms)
