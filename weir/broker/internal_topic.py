"""A coordinator's internal topic (__consumer_offsets, __transaction_state), as Kafka runs one.

- CREATED ON FIRST USE: the first FindCoordinator for it creates it, one creation at a time
  (concurrent callers wait for the same one); a topic that already exists is no error.
- SMALL CLUSTERS: its replication factor is lowered to the live brokers, with a warning naming
  the setting, and its min.insync.replicas to that factor (Kafka keeps both and refuses every
  write until enough brokers join).
- COORDINATOR: the coordinator of a key is the leader of the key's partition;
  COORDINATOR_NOT_AVAILABLE while the topic cannot be created or the partition has no leader.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from kio.schema.errors import ErrorCode

from weir.protocol.errors import KafkaError

log = logging.getLogger(__name__)


class InternalTopic:
    def __init__(self, replicas, create_topic, name: str, factor_setting: str,
                 plan: Callable[[], tuple[int, int, dict[str, str]]]) -> None:
        """`create_topic(name, partitions, replication_factor, assignment, configs)`: AdminApis';
        `plan()`: (partitions, wanted replication factor, topic configs), read when it is created."""
        self.replicas = replicas
        self.name = name
        self._create_topic = create_topic
        self._factor_setting = factor_setting
        self._plan = plan
        self._creating: asyncio.Task | None = None

    async def coordinator(self, partition_of: Callable[[], int]) -> tuple[ErrorCode, object]:
        """(error, BrokerInfo of the leader of partition `partition_of()`), creating the topic if
        need be (`partition_of` is asked after: the partition count may come from the topic)."""
        if self.name not in self.replicas.view.topics:
            try:
                await self.ensure()
            except KafkaError as e:
                log.warning("cannot create %s: %s", self.name, e)
                return ErrorCode.coordinator_not_available, None
        state = self.replicas.view.states.get((self.name, partition_of()))
        broker = self.replicas.view.brokers.get(state.leader) if state is not None else None
        if broker is None:
            return ErrorCode.coordinator_not_available, None
        return ErrorCode.none, broker

    async def ensure(self) -> None:
        """Create the topic as its coordinator plans it, unless it exists (FindCoordinator, and a
        Metadata request that would auto-create it, as Kafka's AutoTopicCreationManager does)."""
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create())
        await asyncio.shield(self._creating)

    async def _create(self) -> None:
        if self.name in self.replicas.view.topics:
            return
        partitions, wanted, configs = self._plan()
        live = len(self.replicas.view.brokers)
        factor = min(wanted, live)
        if factor < wanted:
            log.warning("creating %s with replication factor %d: only %d broker(s) are live (%s is %d)",
                        self.name, factor, live, self._factor_setting, wanted)
        min_isr = int(configs.get("min.insync.replicas", 1))
        if min_isr > factor:
            log.warning("%s: min.insync.replicas %d (asked for %d)", self.name, factor, min_isr)
            configs = {**configs, "min.insync.replicas": str(factor)}
        try:
            await self._create_topic(self.name, partitions, factor, None, configs)
        except KafkaError as e:
            if e.code != ErrorCode.topic_already_exists:
                raise
