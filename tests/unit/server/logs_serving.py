"""A socket server whose connections a test makes by hand, over a transport whose client reads
only when told, and a running run's log: what the tests of the ``logs`` op share."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from daemon.core.journal import Journal, RunLog
from daemon.core.runqueue import Run, RunQueue, RunRequest, RunResult
from daemon.core.tasks import Task, TaskRegistry
from daemon.server.connection import Connection
from daemon.server.server import SocketServer

HIGH_WATER_BYTES = 64 * 1024  # where asyncio's transports pause their protocol
CHATTY = Task(name="chatty", command=("true",))
FAILED = RunResult(ok=False, reason="exit status 3", exit_code=3, duration_ms=12)


class SlowTransport:
    """A transport whose client reads only when told: what is written stays buffered, and the
    protocol is paused past the high-water mark, as asyncio's transports do."""

    def __init__(self, protocol: Connection) -> None:
        self.protocol = protocol
        self.buffered = b""
        self.received = b""
        self.paused = False
        self.closed = False
        self._ours, self._theirs = socket.socketpair()  # the peer check: this process

    def get_extra_info(self, name: str) -> Any:
        return self._ours if name == "socket" else None

    def get_write_buffer_size(self) -> int:
        return len(self.buffered)

    def write(self, data: bytes) -> None:
        self.buffered += data
        if not self.paused and len(self.buffered) > HIGH_WATER_BYTES:
            self.paused = True
            self.protocol.pause_writing()

    def writelines(self, pieces: list[bytes]) -> None:
        self.write(b"".join(pieces))

    def can_write_eof(self) -> bool:
        return True

    def read_all(self) -> None:
        """The client reads everything buffered."""
        self.received += self.buffered
        self.buffered = b""
        if self.paused:
            self.paused = False
            self.protocol.resume_writing()

    def close(self) -> None:
        self.closed = True
        self._ours.close()
        self._theirs.close()

    abort = close

    def answer(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.received.splitlines()]


async def loop_turns(count: int = 6) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


def logs_server(
    journal: Journal, queue: RunQueue | None = None, tasks: Iterable[Task] = (CHATTY,)
) -> SocketServer:
    server = SocketServer(
        Path("/nonexistent/rb.sock"),  # never bound: connections are made by hand
        queue or RunQueue(4),
        TaskRegistry({task.name: task for task in tasks}),
        lambda _request: {},
        journal=journal,
    )
    server.loop = asyncio.get_running_loop()
    return server


def connect_reader(server: SocketServer, request: bytes) -> SlowTransport:
    connection = Connection(server)
    transport = SlowTransport(connection)
    connection.connection_made(transport)  # type: ignore[arg-type]
    connection.data_received(request)
    return transport


def running_log(journal: Journal, task: str = "chatty") -> RunLog:
    queue = RunQueue(4)
    run = queue.submit(RunRequest(task=task, trigger="tick"))
    return journal.begin(run)


async def read_until_closed(transport: SlowTransport) -> list[dict[str, Any]]:
    """The client reads a buffer a few loop turns at a time until the connection closes: the
    whole answer."""
    for _ in range(500):
        transport.read_all()
        await loop_turns()
        if transport.closed:
            break
    transport.read_all()
    return transport.answer()


def run_to_a_failed_end(journal: Journal, run: Run, *lines: str) -> None:
    """``run`` as the executor takes it: its log begun before it is marked started, its lines
    on stdout, its failed end."""
    log = journal.begin(run)
    run.mark_started()
    for line in lines:
        log.add("stdout", line)
    run.finish(FAILED)
    journal.end(log, FAILED)
