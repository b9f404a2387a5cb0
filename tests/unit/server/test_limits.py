"""The connections the socket server holds at once: past ``MAX_CONNECTIONS`` the oldest idle
one makes room, else only control requests are taken (within a reserve), else a newcomer is
refused at once; ``health`` keeps answering; each incident is logged once."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from daemon.server.limits import ConnectionLimits
from daemon.wire.protocol import AnsweredRequest
from daemon.wire.reasons import REASON_CONNECTIONS
from tests.support.eventually import eventually_async
from tests.unit.core.executing import sh_task
from tests.unit.server.serving import exchange, serving

BUSY = {"event": "done", "ok": False, "reason": REASON_CONNECTIONS, "code": "busy"}


def _health(_request: AnsweredRequest) -> dict[str, Any]:
    return {"event": "health", "ok": True}


async def _idle(path: Path) -> socket.socket:
    """A client that connects and sends nothing."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, str(path))
    return sock


async def _answer(sock: socket.socket) -> list[Any]:
    data = b""
    loop = asyncio.get_running_loop()
    while chunk := await loop.sock_recv(sock, 65536):
        data += chunk
    return [json.loads(line) for line in data.splitlines()]


async def test_past_the_bound_idle_ones_make_room_and_health_still_answers(
    short_dir: Path, logs: list[MutableMapping[str, Any]]
) -> None:
    path = short_dir / "rb.sock"
    slow = sh_task("default", "sleep 20")
    async with serving(path, slow, control=_health, max_connections=2) as (server, queue, _f):
        first, second = await _idle(path), await _idle(path)
        await eventually_async(lambda: len(server.connections) == 2, "two connections")
        third = await _idle(path)  # past the bound: the oldest idle one goes
        assert await _answer(first) == [BUSY]
        await eventually_async(lambda: len(server.connections) == 2, "the oldest gone")
        for sock in (second, third):
            sock.close()
        await eventually_async(lambda: not server.connections, "the idle ones gone")
        # Two triggers waiting for their runs: nothing idle left to make room.
        readers = []
        for _ in range(2):
            reader, writer = await asyncio.open_unix_connection(str(path))
            writer.write(b"{}\n")
            readers.append((reader, writer))
        await eventually_async(lambda: queue.statistics().accepted == 2, "two runs accepted")
        assert await exchange(path, b'{"op":"health"}\n') == [{"event": "health", "ok": True}]
        assert await exchange(path, b'{"task":"default"}\n') == [BUSY]  # no run past it
        assert await exchange(path, b'{"op":"logs","follow":true}\n') == [BUSY]
        holder = await _idle(path)  # past the bound, in the reserve
        await eventually_async(lambda: len(server.connections) == 3, "in the reserve")
        assert await exchange(path, b'{"op":"health"}\n') == [{"event": "health", "ok": True}]
        assert await _answer(holder) == [BUSY]  # the idle one made room for it
        server.limits.reserve_end = 2  # no reserve: past the bound and nothing idle
        assert await exchange(path, b'{"op":"health"}\n') == [BUSY]  # refused at once
        for _reader, writer in readers:
            writer.close()
    incidents = [e for e in logs if e["event"].startswith("socket.connections_")]
    # One line as each incident starts and one as it ends, not one per connection: the idle
    # ones, then the triggers holding the connections.
    assert [e["event"] for e in incidents] == [
        "socket.connections_limited",
        "socket.connections_normal",
    ] * 2
    assert (incidents[0]["limit"], incidents[0]["max_connections"]) == ("connections", 2)


def test_the_bound_stays_below_the_descriptor_limit() -> None:
    assert ConnectionLimits(1024, nofile=1_048_576).bound == 1024
    assert ConnectionLimits(1024, nofile=1024).bound == 1024 - 256 - 64
    low = ConnectionLimits(1024, nofile=1024)
    assert low.meets(3, fd=low.descriptor_high) == "descriptors"  # jobs hold the rest
    assert low.meets(4, fd=low.descriptor_high + 1) == "descriptors"
    assert low.meets(5, fd=10) == ""
    assert low.limited == ""  # over: a descriptor well below the limit again
