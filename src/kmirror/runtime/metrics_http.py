"""`MetricsServer`: the Prometheus scrape endpoint (`GET /metrics` on `metrics.port`).

A minimal HTTP/1.1 server: one request per connection (`Connection: close`), `GET`/`HEAD`
`/metrics` -> 200 with text format 0.0.4, any other path -> 404, any other method -> 405,
a malformed request -> 400. It also polls the registry every meter tick so meters that follow
another component's cumulative count rate events when they happen, not when scraped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from kmirror.metrics.meter import TICK_INTERVAL_MS
from kmirror.metrics.prometheus import CONTENT_TYPE, render
from kmirror.metrics.registry import MetricsRegistry

log = logging.getLogger("kmirror.metrics")

MAX_HEADER_BYTES = 16 * 1024
READ_TIMEOUT_S = 10.0


class MetricsServer:
    def __init__(self, registry: MetricsRegistry, host: str = "127.0.0.1", port: int = 0) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self._poller: asyncio.Task[None] | None = None

    async def start(self) -> int:
        """Listen; returns the bound port (useful with port 0)."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port, limit=MAX_HEADER_BYTES)
        self.port = int(self._server.sockets[0].getsockname()[1])
        self._poller = asyncio.get_running_loop().create_task(self._poll())
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)
        return self.port

    async def stop(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(TICK_INTERVAL_MS / 1000)
            try:
                self.registry.poll()
            except Exception:
                log.exception("metrics poll failed")

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            status, body, content_type = self._respond(head)
            method = head.split(b" ", 1)[0]
            headers = (
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode()
            writer.write(headers if method == b"HEAD" else headers + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _respond(self, head: bytes) -> tuple[str, bytes, str]:
        text = "text/plain; charset=utf-8"
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return "400 Bad Request", b"bad request\n", text
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if target != b"/metrics":
            return "404 Not Found", b"not found; try /metrics\n", text
        if method not in (b"GET", b"HEAD"):
            return "405 Method Not Allowed", b"method not allowed\n", text
        try:
            self.registry.poll()
            return "200 OK", render(self.registry).encode(), CONTENT_TYPE
        except Exception:
            log.exception("metrics scrape failed")
            return "500 Internal Server Error", b"scrape failed\n", text
