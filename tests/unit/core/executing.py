"""An executor over a small registry, run for one test, and a listener of its runs' events: what
the executor's tests share."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from daemon.core.executor import Executor
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import Event, Run, RunQueue, RunResult
from daemon.core.tasks import Handler, RunContext, Task, TaskRegistry
from tests.unit.conftest import JOB_ENV


@dataclass
class Recorder:
    """A run listener: every event, and asyncio events to wait on."""

    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    seen: dict[str, asyncio.Event] = field(default_factory=dict)

    def saw(self, name: str) -> asyncio.Event:
        return self.seen.setdefault(name, asyncio.Event())

    def __call__(self, _run: Run, event: Event) -> None:
        self.events.append((event.kind, dict(event.fields)))
        self.saw(event.kind).set()
        if event.kind == "output":
            for line in event.fields["lines"]:
                self.lines.append(line)
                self.saw(f"line:{line}").set()

    def kinds(self) -> list[str]:
        return [kind for kind, _fields in self.events]


def registry_of(*tasks: Task) -> TaskRegistry:
    return TaskRegistry({task.name: task for task in tasks})


def sh_task(name: str, script: str, **options: Any) -> Task:
    return Task(name=name, command=("sh", "-c", script, name), **options)


@asynccontextmanager
async def executing(
    *tasks: Task, base_env: Mapping[str, str] | None = None, grace_s: float = 5.0
) -> AsyncIterator[tuple[RunQueue, Executor]]:
    queue = RunQueue(capacity=16)
    executor = Executor(
        queue,
        registry_of(*tasks),
        ChildSupervisor(),
        default_grace_s=grace_s,
        base_env=JOB_ENV if base_env is None else base_env,
    )
    consumer = asyncio.create_task(executor.run_forever())
    try:
        async with asyncio.timeout(20):
            yield queue, executor
    finally:
        await stop_executing(queue, executor, consumer)


async def stop_executing(queue: RunQueue, executor: Executor, consumer: asyncio.Task[None]) -> None:
    """Close the queue, cancel what waits and what runs, and wait for the executor's end."""
    queue.close()
    queue.cancel_all()
    executor.shutdown_running(0.0)
    async with asyncio.timeout(10):
        await consumer


async def result_of(run: Run) -> RunResult:
    async with asyncio.timeout(15):
        return await run.wait()


def handler_task(name: str, handler: Handler, **options: Any) -> Task:
    return Task(name=name, handler=handler, handler_ref=f"tests:{name}", **options)


def deaf_task(entered: asyncio.Event, release: asyncio.Event) -> Task:
    """Task ``deaf``: a handler that swallows every cancellation until ``release`` is set, with
    a timeout and a grace of 0.05 s, so that it is a stray 0.1 s after it starts."""

    async def deaf(_run: RunContext) -> dict[str, Any] | None:
        entered.set()
        while not release.is_set():
            with suppress(asyncio.CancelledError):
                await release.wait()
        return None

    return handler_task("deaf", deaf, timeout_s=0.05, grace_s=0.05)


async def waits_a_moment(_run: RunContext) -> dict[str, Any] | None:
    """A handler that waits on the loop once before it returns."""
    await asyncio.sleep(0.01)
    return {"waited": True}


def waits_forever(entered: asyncio.Event | None = None) -> Handler:
    """A handler that sets ``entered``, if given, and waits until its run is cancelled."""

    async def forever(_run: RunContext) -> dict[str, Any] | None:
        if entered is not None:
            entered.set()
        await asyncio.Event().wait()
        return None

    return forever
