"""The ``/metrics`` and ``/healthz`` endpoint, over a real loopback socket, in process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from daemon.core.runqueue import RunQueue
from daemon.observe.metrics import Metrics
from daemon.observe.metrics_http import MAX_HTTP_REQUEST_BYTES, MetricsServer

Problem = Callable[[], str | None]


class Health:
    """What ``/healthz`` reports: None (healthy) or the problem, set by the test."""

    def __init__(self) -> None:
        self.problem: str | None = None

    def __call__(self) -> str | None:
        return self.problem


@pytest.fixture
def health() -> Health:
    return Health()


@pytest.fixture
async def server(health: Health) -> AsyncIterator[MetricsServer]:
    metrics = Metrics(RunQueue(capacity=4), tasks=("default",))
    endpoint = MetricsServer(metrics, "127.0.0.1:0", health, deadline_s=0.2)
    await endpoint.start()
    try:
        yield endpoint
    finally:
        await endpoint.close()


async def _exchange(port: int, request: bytes) -> bytes:
    """Send ``request``, then read the whole answer (the server closes when it is done)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(5):
            return await reader.read()
    finally:
        writer.close()


def _split(answer: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *header_lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    return status, headers, body


async def test_metrics_are_served_with_their_length(server: MetricsServer) -> None:
    status, headers, body = _split(await _exchange(server.port, b"GET /metrics HTTP/1.0\r\n\r\n"))
    assert status == "HTTP/1.0 200 OK"
    assert headers["Content-Type"].startswith("text/plain; version=")
    assert int(headers["Content-Length"]) == len(body)
    assert (
        b'runbroker_runs_total{outcome="succeeded",task="default",trigger="external"} 0.0' in body
    )


async def test_a_query_string_is_ignored(server: MetricsServer) -> None:
    status, _, _ = _split(await _exchange(server.port, b"GET /metrics?x=1 HTTP/1.1\r\n\r\n"))
    assert status == "HTTP/1.0 200 OK"


async def test_head_has_the_headers_of_get_and_no_body(server: MetricsServer) -> None:
    _, get_headers, get_body = _split(
        await _exchange(server.port, b"GET /healthz HTTP/1.0\r\n\r\n")
    )
    status, headers, body = _split(await _exchange(server.port, b"HEAD /healthz HTTP/1.0\r\n\r\n"))
    assert status == "HTTP/1.0 200 OK"
    assert headers["Content-Length"] == get_headers["Content-Length"] == str(len(get_body))
    assert body == b""


async def test_health_follows_the_daemon(server: MetricsServer, health: Health) -> None:
    answer = await _exchange(server.port, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert _split(answer)[0] == "HTTP/1.0 200 OK"
    assert _split(answer)[2] == b"healthy\n"
    health.problem = "database unreachable"
    status, _, body = _split(await _exchange(server.port, b"GET /healthz HTTP/1.0\r\n\r\n"))
    assert status == "HTTP/1.0 503 Service Unavailable"
    assert body == b"unhealthy: database unreachable\n"


@pytest.mark.parametrize(
    ("request_head", "expected"),
    [
        (b"GET /nothing HTTP/1.0\r\n\r\n", "HTTP/1.0 404 Not Found"),
        (b"POST /metrics HTTP/1.0\r\n\r\n", "HTTP/1.0 405 Method Not Allowed"),
        (b"garbage\r\n\r\n", "HTTP/1.0 405 Method Not Allowed"),
    ],
)
async def test_other_requests_are_answered_with_their_status(
    server: MetricsServer, request_head: bytes, expected: str
) -> None:
    assert _split(await _exchange(server.port, request_head))[0] == expected


async def test_a_head_over_the_cap_is_refused(server: MetricsServer) -> None:
    oversized = b"GET /metrics HTTP/1.0\r\nX-Filler: " + b"a" * MAX_HTTP_REQUEST_BYTES + b"\r\n\r\n"
    status, _, body = _split(await _exchange(server.port, oversized))
    assert status == "HTTP/1.0 431 Request Header Fields Too Large"
    assert b"runbroker_" not in body


async def test_a_head_just_under_the_cap_is_served(server: MetricsServer) -> None:
    prefix = b"GET /metrics HTTP/1.0\r\nX-Filler: "
    filler = b"a" * (MAX_HTTP_REQUEST_BYTES - len(prefix) - len(b"\r\n\r\n"))
    status, _, _ = _split(await _exchange(server.port, prefix + filler + b"\r\n\r\n"))
    assert status == "HTTP/1.0 200 OK"


async def test_a_silent_client_is_closed_at_the_deadline(server: MetricsServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(b"GET /metrics HTTP/1.0\r\n")  # the head never ends
        async with asyncio.timeout(5):
            assert await reader.read() == b""
    finally:
        writer.close()
