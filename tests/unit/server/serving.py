"""A socket server with its queue and executor, run for one test; a client's exchange with it; fake
transports that record what a connection writes: what the server's tests share."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

from daemon.core.executor import Executor
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import Run, RunQueue
from daemon.core.tasks import Task, TaskRegistry
from daemon.server.server import SocketServer
from daemon.wire.protocol import AnsweredRequest
from tests.unit.conftest import JOB_ENV
from tests.unit.core.executing import stop_executing

Answer = list[dict[str, Any]]


def _no_control(request: AnsweredRequest) -> dict[str, Any]:
    raise AssertionError(f"unexpected control request {request}")


class Finished:
    """Runs as the queue releases them, with an event per task name."""

    def __init__(self, queue: RunQueue) -> None:
        self.runs: list[Run] = []
        self._events: dict[str, asyncio.Event] = {}
        queue.on_finish(self._on_finish)

    def _on_finish(self, run: Run) -> None:
        self.runs.append(run)
        self.event(run.request.task).set()

    def event(self, task: str) -> asyncio.Event:
        return self._events.setdefault(task, asyncio.Event())

    async def wait(self, task: str) -> Run:
        await self.event(task).wait()
        return next(run for run in self.runs if run.request.task == task)


@asynccontextmanager
async def serving(
    path: Path,
    *tasks: Task,
    capacity: int = 4,
    control: Any = _no_control,
    output_hold_s: float = 5.0,
    **server_options: Any,
) -> AsyncIterator[tuple[SocketServer, RunQueue, Finished]]:
    queue = RunQueue(capacity)
    registry = TaskRegistry({task.name: task for task in tasks})
    executor = Executor(
        queue,
        registry,
        ChildSupervisor(),
        default_grace_s=1.0,
        base_env=JOB_ENV,
        output_hold_s=output_hold_s,
    )
    server = SocketServer(path, queue, registry, control, **server_options)
    finished = Finished(queue)
    await server.start()
    consumer = asyncio.create_task(executor.run_forever())
    try:
        async with asyncio.timeout(30):
            yield server, queue, finished
    finally:
        await stop_executing(queue, executor, consumer)
        await server.close(timeout_s=1.0)


async def read_answer(reader: asyncio.StreamReader) -> Answer:
    answer = []
    while True:
        try:
            line = await reader.readline()
        except ConnectionResetError:
            break
        if not line:
            break
        answer.append(json.loads(line))
    return answer


async def exchange(path: Path, payload: bytes) -> Answer:
    """Send one request and read every answer line until the server closes."""
    reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 20)
    try:
        writer.write(payload)
        return await read_answer(reader)
    finally:
        writer.close()
        with suppress(ConnectionError):
            await writer.wait_closed()


class FakeTransport:
    """What a connection writes, and whether it closed; its peer is this process."""

    def __init__(self) -> None:
        self.written = b""
        self.closed = False
        self._ours, self._theirs = socket.socketpair()

    def get_extra_info(self, name: str) -> Any:
        return self._ours if name == "socket" else None

    def get_write_buffer_size(self) -> int:
        return 0

    def write(self, data: bytes) -> None:
        self.written += data

    def writelines(self, pieces: list[bytes]) -> None:
        self.write(b"".join(pieces))

    def close(self) -> None:
        self.closed = True
        self._ours.close()
        self._theirs.close()

    abort = close


class WritesTransport(FakeTransport):
    """A fake transport that keeps each write apart and tells when it is closed."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed_event = asyncio.Event()

    def write(self, data: bytes) -> None:
        super().write(data)
        self.writes.append(data)

    def close(self) -> None:
        super().close()
        self.closed_event.set()

    abort = close
