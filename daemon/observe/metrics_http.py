"""The ``/metrics`` and ``/healthz`` endpoint on ``RUNBROKER_METRICS_ADDR``: minimal HTTP/1.0.

A small asyncio server owned by the broker, so no thread. A request's head is bounded in time
and size, so a stalled scraper holds nothing for long.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from daemon.log.logs import get_logger
from daemon.observe.metrics import Metrics

log = get_logger("runbroker.metrics")

MAX_HTTP_REQUEST_BYTES = 8192
HTTP_DEADLINE_S = 10.0


class MetricsServer:
    """A minimal HTTP/1.0 endpoint for Prometheus scrapes."""

    def __init__(
        self,
        metrics: Metrics,
        addr: str,
        healthy: Callable[[], str | None],
        *,
        deadline_s: float = HTTP_DEADLINE_S,
    ) -> None:
        host, _, port = addr.rpartition(":")
        self.host = host.strip("[]") or "0.0.0.0"
        self.port = int(port)
        self.metrics = metrics
        self.healthy = healthy
        self.deadline_s = deadline_s
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, limit=MAX_HTTP_REQUEST_BYTES
        )
        sockets = self._server.sockets
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        log.info("metrics.listening", host=self.host, port=self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(self.deadline_s):
                head = await reader.readuntil(b"\r\n\r\n")
            status, content_type, body = self._answer(head)
            writer.write(
                f"HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + (b"" if head.startswith(b"HEAD ") else body)
            )
            await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.LimitOverrunError:
            writer.write(b"HTTP/1.0 431 Request Header Fields Too Large\r\n\r\n")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _answer(self, head: bytes) -> tuple[str, str, bytes]:
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split()
        if len(parts) < 2 or parts[0] not in ("GET", "HEAD"):
            return "405 Method Not Allowed", "text/plain", b"method not allowed\n"
        path = parts[1].split("?", 1)[0]
        if path == "/metrics":
            return "200 OK", CONTENT_TYPE_LATEST, self.metrics.exposition()
        if path == "/healthz":
            problem = self.healthy()
            if problem is None:
                return "200 OK", "text/plain", b"healthy\n"
            return "503 Service Unavailable", "text/plain", f"unhealthy: {problem}\n".encode()
        return "404 Not Found", "text/plain", b"not found\n"
