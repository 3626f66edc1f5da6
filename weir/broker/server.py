"""The broker process: listens, serves, runs periodic log work, shuts down cleanly."""

import asyncio
import logging
import signal
import time

from ..config import BrokerConfig
from .apis import KafkaApis
from .connection import Connection
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.replicas: ReplicaManager | None = None
        self.server: asyncio.Server | None = None
        self._tasks: list[asyncio.Task] = []
        self._stopped = asyncio.Event()

    async def start(self) -> None:
        self.replicas = ReplicaManager(self.config, _now_ms())
        apis = KafkaApis(self.replicas)
        host, port = self.config.listener
        max_request = self.config["socket.request.max.bytes"]
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: Connection(apis, max_request), host, port,
                                               reuse_address=True, backlog=1024)
        self._tasks = [
            loop.create_task(self._every(self.config["log.retention.check.interval.ms"], self.replicas.maintain)),
            loop.create_task(self._every(1000, self.replicas.flush_due)),
            loop.create_task(self._every(self.config["log.flush.offset.checkpoint.interval.ms"],
                                         lambda now: self.replicas.checkpoint())),
        ]
        log.info("broker %d listening on %s:%d (log.dirs=%s)", self.config["broker.id"], host, port,
                 self.config["log.dirs"])

    async def _every(self, interval_ms: int, work) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                work(_now_ms())
            except Exception:
                log.exception("periodic task failed")

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.server is not None:
            self.server.close()
        if self.replicas is not None:
            self.replicas.close()
        log.info("broker %d shut down cleanly", self.config["broker.id"])
        self._stopped.set()

    async def run_until_signalled(self) -> None:
        await self.start()
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(f"weir broker {self.config['broker.id']} ready on "
              f"{self.config.advertised[0]}:{self.config.advertised[1]}", flush=True)
        await stop.wait()
        await self.stop()
