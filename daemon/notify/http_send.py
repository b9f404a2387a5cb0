"""Webhooks and pings over HTTP, with httpx, imported on first use (off the event loop's
thread: the import and the TLS context take tens of milliseconds a loop must not wait for).

Each attempt is bounded as a whole by the target's ``timeout`` (connect, send, the status line:
a server that never answers, or trickles, is cut there); the answer's body is never read, so
no answer grows the daemon. A 2xx is sent; a connection error, a timeout, a 408, 429 or 5xx is
tried again after ``backoff``, doubled each time, up to ``attempts`` in all; any other status
(a 3xx or a 4xx: the request itself is wrong) is given up at once. Errors are said by their
kind and status, never with the URL.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import TYPE_CHECKING, Any

from daemon.log.logs import keep_out_of_log
from daemon.notify.delivery import Delivery

if TYPE_CHECKING:
    from daemon.core.tasks.notify_targets import HttpTarget

USER_AGENT = "runbroker-notify/1"
QUIET_LOGGERS = ("httpx", "httpcore")
RETRY_STATUSES = frozenset({408, 429})
KEPT_CONNECTIONS = 20  # idle ones kept open for the next notice
PING_SUFFIX = {"start": "/start", "success": "", "failure": "/fail"}  # healthchecks.io's paths


def ping_url(base: str, event: str) -> str:
    """The URL a ping of ``event`` goes to: ``BASE``, ``BASE/start`` or ``BASE/fail``."""
    path, sep, query = base.partition("?")
    return f"{path.rstrip('/')}{PING_SUFFIX[event]}{sep}{query}"


def _new_client() -> Any:
    # httpx logs each request's URL (a token in it) at INFO: its loggers never reach the log.
    keep_out_of_log(*QUIET_LOGGERS)
    httpx = importlib.import_module("httpx")
    # No cap on connections: each target's one sender holds at most one, and a pool of a few
    # would let endpoints that never answer hold up the others' notices.
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=KEPT_CONNECTIONS)
    return httpx.AsyncClient(
        follow_redirects=False, headers={"User-Agent": USER_AGENT}, limits=limits
    )


class HttpSender:
    """The one HTTP client of the notifications, made at the first HTTP notice."""

    def __init__(self) -> None:
        self._client: Any = None
        self.retries = 0  # attempts after a first one, all targets

    async def _ready_client(self) -> Any:
        if self._client is None:
            self._client = await asyncio.to_thread(_new_client)
        return self._client

    async def send(self, target: HttpTarget, url: str, body: bytes, content_type: str) -> Delivery:
        """POST ``body`` to ``url`` as ``target`` says: its timeout, attempts and backoff."""
        client = await self._ready_client()
        error = ""
        for attempt in range(1, target.attempts + 1):
            if attempt > 1:
                self.retries += 1
                await asyncio.sleep(target.backoff_s * (1 << (attempt - 2)))
            try:
                async with asyncio.timeout(target.timeout_s):
                    status = await self._post(client, url, body, content_type, target.timeout_s)
            except TimeoutError:
                error = f"no answer within {target.timeout_s:g}s"
                continue
            except Exception as exc:  # httpx's errors, OSError: the endpoint, not the daemon
                error = type(exc).__name__
                continue
            if 200 <= status < 300:
                return Delivery(True, attempt)
            error = f"HTTP {status}"
            if status < 500 and status not in RETRY_STATUSES:
                return Delivery(False, attempt, error)
        return Delivery(False, target.attempts, error)

    @staticmethod
    async def _post(client: Any, url: str, body: bytes, content_type: str, timeout_s: float) -> int:
        headers = {"Content-Type": content_type}
        async with client.stream(
            "POST", url, content=body, headers=headers, timeout=timeout_s
        ) as response:
            status: int = response.status_code
            return status

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
