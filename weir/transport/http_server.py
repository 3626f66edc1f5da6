"""A minimal HTTP/1.1 server for Weir's read-only pages: GET a path, get one answer, connection
closed. The brokers' /metrics and the console use it; anything else is 404."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

Route = Callable[[], tuple[str, bytes]]  # → (content type, body)


async def serve_http(routes: dict[str, Route], host: str, port: int) -> asyncio.Server:
    """Serve `routes` (path → callable giving content type and body) on host:port."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):  # the request line and headers
                request_line = await reader.readline()
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
            parts = request_line.split()
            route = routes.get(parts[1].split(b"?")[0].decode("latin-1")) if len(parts) >= 2 and parts[0] == b"GET" \
                else None
            if route is None:
                status, (ctype, body) = "404 Not Found", ("text/plain", f"try {', '.join(routes)}\n".encode())
            else:
                status, (ctype, body) = "200 OK", route()
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                         f"Cache-Control: no-store\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError):
            pass
        except Exception:
            log.exception("HTTP request failed")
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port, reuse_address=True)
