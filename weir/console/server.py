"""The console's server: every POLL_S, a picture of the cluster (Metadata through any live broker,
each broker's Prometheus metrics), served as JSON at /api/state; the page (page.html) at /
redraws from it without reloading. Read-only: it never changes the cluster.

A picture costs the brokers work in proportion to their partitions. While no page has asked for
one in VIEWED_S, the console takes one every IDLE_POLL_S only (enough for the timeline to
note changes), and a page that comes back is answered from a fresh one at once.

`weir console --bootstrap-server H:P` finds metrics at `--metrics-port` + broker id on each
broker's host (what `weir up` sets up), or at the `--metrics broker=URL` given.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from weir.client import ClusterClient
from weir.console.state import ConsoleState
from weir.transport.http_server import serve_http

log = logging.getLogger(__name__)

POLL_S = 0.5
IDLE_POLL_S = 10
VIEWED_S = 5
PAGE = Path(__file__).with_name("page.html")


async def http_get(url: str, timeout_s: float = 2.0) -> bytes:
    parts = urlsplit(url)
    async with asyncio.timeout(timeout_s):
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
    try:
        writer.write(f"GET {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\n\r\n".encode())
        async with asyncio.timeout(timeout_s):
            response = await reader.read()
    finally:
        writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        status_line = head.split(b"\r\n", 1)[0]
        raise ConnectionError(f"{url}: {status_line!r}")
    return body


def parse_metrics(text: str) -> dict[str, list]:
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


class Console:
    def __init__(self, bootstrap: str, metrics_port: int | None, metrics_urls: dict[int, str], security=None) -> None:
        self.client = ClusterClient(bootstrap, client_id="weir-console", timeout_s=5, retries=1,
                                    **({"security": security} if security else {}))
        self.metrics_port = metrics_port
        self.metrics_urls = metrics_urls
        self.state = ConsoleState()
        self.picture: dict = {"brokers": [], "topics": [], "groups": [], "timeline": [], "error": "starting"}
        self._viewed_at = -VIEWED_S  # monotonic seconds of the last page's ask
        self._viewer = asyncio.Event()  # set when a page asks while the console polls idly

    def viewed(self) -> bytes:
        """A page's ask for the picture: the latest one, and polling at POLL_S again."""
        now = time.monotonic()
        if now - self._viewed_at > VIEWED_S:
            self._viewer.set()
        self._viewed_at = now
        return json.dumps(self.picture).encode()

    def _poll_interval_s(self) -> float:
        return POLL_S if time.monotonic() - self._viewed_at <= VIEWED_S else IDLE_POLL_S

    def metrics_url(self, broker) -> str | None:
        if broker.node_id in self.metrics_urls:
            return self.metrics_urls[broker.node_id]
        if self.metrics_port is not None:
            return f"http://{broker.host}:{self.metrics_port + broker.node_id}/metrics"
        return None

    async def poll_forever(self) -> None:
        while True:
            try:
                await self.poll()
            except Exception as e:  # a cluster mid-failover: keep the last picture, say why it is old
                log.info("console: no picture this round: %r", e)
                self.picture = {**self.picture, "error": f"{type(e).__name__}: {e}"}
            self._viewer.clear()
            try:
                await asyncio.wait_for(self._viewer.wait(), self._poll_interval_s())
            except TimeoutError:
                pass

    async def poll(self) -> None:
        await self.client.refresh_metadata()
        brokers = dict(self.client.brokers)
        urls = {b: url for b, info in brokers.items() if (url := self.metrics_url(info))}
        fetched = await asyncio.gather(*map(http_get, urls.values()), return_exceptions=True)
        metrics = {b: parse_metrics(body.decode()) for b, body in zip(urls, fetched)
                   if not isinstance(body, BaseException)}
        self.picture = self.state.picture(int(time.time() * 1000), brokers, self.client.controller_id,
                                          dict(self.client.topics), metrics)


async def serve(console: Console, host: str, port: int, ready=None) -> None:
    page = PAGE.read_bytes()
    server = await serve_http({"/": lambda: ("text/html; charset=utf-8", page),
                               "/api/state": lambda: ("application/json", console.viewed())},
                              host, port)
    url = f"http://{host}:{server.sockets[0].getsockname()[1]}/"
    if ready is not None:
        ready(url)
    async with server:
        await console.poll_forever()


def run(args) -> int:
    metrics_urls = {}
    for item in args.metrics:
        broker, _, url = item.partition("=")
        metrics_urls[int(broker)] = url
    from weir.security.client_config import load_command_config
    console = Console(args.bootstrap_server, args.metrics_port, metrics_urls, load_command_config(args.command_config))
    try:
        asyncio.run(serve(console, args.host, args.port, lambda url: print(f"weir console on {url}", flush=True)))
    except KeyboardInterrupt:
        pass
    return 0


def register(sub) -> None:
    console = sub.add_parser("console", help="a live web console of a cluster (read-only)")
    console.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    console.add_argument("--command-config", metavar="FILE", default=None,
                         help="Kafka client properties: security.protocol, sasl.*, ssl.* (a secured cluster)")
    console.add_argument("--host", default="127.0.0.1")
    console.add_argument("--port", type=int, default=8080)
    console.add_argument("--metrics-port", type=int, default=9404,
                         help="broker N's metrics are at this port + N on its host (as `weir up` sets them)")
    console.add_argument("--metrics", action="append", default=[], metavar="BROKER=URL",
                         help="a broker's metrics URL, when not at --metrics-port + id")
    console.set_defaults(func=run)
