"""A trigger of a task that sets ``on_busy``, through the socket: skipped, joined (coalesce),
or replacing the running run; a task that sets none queues as before."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from daemon.core.executor import Executor
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import RunQueue
from daemon.core.tasks import RunContext, Task, TaskRegistry
from daemon.core.ticker.busy import BusyPolicy, OnBusy
from daemon.server.server import SocketServer
from daemon.wire.protocol import AnsweredRequest
from daemon.wire.reasons import CODE_REPLACED, CODE_SKIPPED, REASON_REPLACED
from tests.support.eventually import eventually_async

Answer = list[dict[str, Any]]


class Gate:
    """A handler that runs until the test opens the gate (or its run is cancelled)."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.started = 0

    async def handler(self, _run: RunContext) -> dict[str, Any]:
        self.started += 1
        await self.open.wait()
        return {"n": self.started}


def _no_control(request: AnsweredRequest) -> dict[str, Any]:
    raise AssertionError(f"unexpected control request {request}")


@contextlib.asynccontextmanager
async def serving(path: Path, gate: Gate, on_busy: OnBusy | None) -> AsyncIterator[RunQueue]:
    queue = RunQueue(4)
    registry = TaskRegistry({"slow": Task(name="slow", handler=gate.handler, on_busy=on_busy)})
    executor = Executor(queue, registry, ChildSupervisor(), default_grace_s=1.0)
    busy = BusyPolicy(queue, executor.cancel_current)
    server = SocketServer(path, queue, registry, _no_control, busy=busy)
    await server.start()
    consumer = asyncio.create_task(executor.run_forever())
    try:
        async with asyncio.timeout(20):
            yield queue
    finally:
        gate.open.set()
        queue.close()
        queue.cancel_all()
        executor.shutdown_running(0.0)
        async with asyncio.timeout(10):
            await consumer
            await server.close(timeout_s=1.0)


class Client:
    """One trigger of ``slow``, its answer lines read as they come."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: Answer = []
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Client:
        reader, writer = await asyncio.open_unix_connection(str(self.path))
        writer.write(b'{"task": "slow"}\n')
        self.task = asyncio.create_task(self._read(reader, writer))
        await eventually_async(lambda: bool(self.events), "a first answer line", every_s=0.001)
        return self

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                self.events.append(json.loads(line))
        finally:
            writer.close()

    async def done(self) -> Answer:
        assert self.task is not None
        await self.task
        return self.events


async def _running(queue: RunQueue, gate: Gate, n: int) -> None:
    await eventually_async(lambda: gate.started == n, f"run {n} to start", every_s=0.001)


async def test_skip_refuses_a_trigger_while_the_task_runs(short_dir: Path) -> None:
    gate = Gate()
    async with serving(short_dir / "rb.sock", gate, "skip") as queue:
        first = await Client(short_dir / "rb.sock").start()
        await _running(queue, gate, 1)
        second = await (await Client(short_dir / "rb.sock").start()).done()
        gate.open.set()
        assert (await first.done())[-1]["ok"] is True
    assert [e["event"] for e in second] == ["done"]
    assert second[0]["code"] == CODE_SKIPPED
    assert "on_busy = skip" in second[0]["reason"]
    assert gate.started == 1


async def test_coalesce_joins_the_queued_run_and_hears_its_result(short_dir: Path) -> None:
    gate = Gate()
    async with serving(short_dir / "rb.sock", gate, "coalesce") as queue:
        first = await Client(short_dir / "rb.sock").start()
        await _running(queue, gate, 1)
        second = await Client(short_dir / "rb.sock").start()  # queued behind the running one
        third = await Client(short_dir / "rb.sock").start()  # joins the second's run
        assert queue.waiting_count() == 1
        gate.open.set()
        answers = [await client.done() for client in (first, second, third)]
    assert gate.started == 2
    second_id = answers[1][0]["id"]
    assert [e["event"] for e in answers[2]] == ["queued", "started", "done"]
    assert {e["id"] for e in answers[2]} == {second_id}
    assert answers[2][-1] == answers[1][-1]
    assert answers[2][-1]["output"] == {"n": 2}


async def test_replace_cancels_the_running_run_then_runs_the_new_one(short_dir: Path) -> None:
    gate = Gate()
    async with serving(short_dir / "rb.sock", gate, "replace") as queue:
        first = await Client(short_dir / "rb.sock").start()
        await _running(queue, gate, 1)
        second = await Client(short_dir / "rb.sock").start()
        replaced = await first.done()
        await _running(queue, gate, 2)
        gate.open.set()
        ran = await second.done()
    assert replaced[-1]["ok"] is False
    assert replaced[-1]["reason"] == REASON_REPLACED
    assert replaced[-1]["code"] == CODE_REPLACED
    assert ran[-1]["ok"] is True
    assert ran[-1]["output"] == {"n": 2}


async def test_without_a_policy_a_trigger_queues_behind_the_running_run(short_dir: Path) -> None:
    gate = Gate()
    async with serving(short_dir / "rb.sock", gate, None) as queue:
        first = await Client(short_dir / "rb.sock").start()
        await _running(queue, gate, 1)
        second = await Client(short_dir / "rb.sock").start()
        third = await Client(short_dir / "rb.sock").start()
        assert queue.waiting_count() == 2
        gate.open.set()
        answers = [await client.done() for client in (first, second, third)]
    assert [answer[-1]["ok"] for answer in answers] == [True, True, True]
    assert gate.started == 3
