"""Producer ids for idempotent producers, unique cluster-wide: each broker claims blocks of them
from ZooKeeper (Kafka's /latest_producer_id_block, a compare-and-set on the znode's version)."""

import asyncio
import json

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from weir.coordination.zk_client import ZkSession

PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
BLOCK_SIZE = 1000


class ProducerIdAllocator:
    def __init__(self, session: ZkSession, broker_id: int) -> None:
        self.session = session
        self.broker_id = broker_id
        self._next = 0
        self._end = -1  # the current block is empty
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next > self._end:
                self._next, self._end = await self._claim_block()
            producer_id = self._next
            self._next += 1
            return producer_id

    async def _claim_block(self) -> tuple[int, int]:
        """Claim the block after the latest one; retried until our compare-and-set wins."""
        client = self.session.client
        while True:
            try:
                data, stat = await self.session.wait(client.get_async(PRODUCER_ID_BLOCK_PATH))
            except NoNodeError:
                try:
                    await self.session.wait(client.create_async(PRODUCER_ID_BLOCK_PATH, self._encode(0), makepath=True))
                    return 0, BLOCK_SIZE - 1
                except NodeExistsError:
                    continue
            start = int(json.loads(data)["block_end"]) + 1
            try:
                await self.session.wait(client.set_async(PRODUCER_ID_BLOCK_PATH, self._encode(start),
                                                         version=stat.version))
                return start, start + BLOCK_SIZE - 1
            except BadVersionError:
                continue  # another broker claimed it first

    def _encode(self, start: int) -> bytes:
        return json.dumps({"version": 1, "broker": self.broker_id, "block_start": str(start),
                           "block_end": str(start + BLOCK_SIZE - 1)}).encode()
