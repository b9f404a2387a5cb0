"""The Postgres runner's fakes for the unit and integration tiers: a fake executor and a running
harness."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from daemon.core.runqueue import Run, RunQueue, RunResult
from daemon.core.tasks import TaskRegistry
from daemon.pg.runner import PgRunner
from daemon.pg.store.base import JobStore
from daemon.pg.waits import first_of
from daemon.settings import Settings

S = TypeVar("S", bound=JobStore)

Handler = Callable[[Run], Awaitable[RunResult]]


async def succeed(_run: Run) -> RunResult:
    return RunResult(ok=True, output={"done": True})


async def fail(_run: Run) -> RunResult:
    return RunResult(ok=False, reason="exit status 3", exit_code=3)


@dataclass
class FakeExecutor:
    """Runs queued runs one at a time with a handler per task, like the real executor."""

    queue: RunQueue
    handlers: dict[str, Handler] = field(default_factory=dict)
    started: list[Run] = field(default_factory=list)
    release_gate: asyncio.Event | None = None  # when set: each run waits for it
    cancels: list[tuple[str, str]] = field(default_factory=list)  # (run id, reason) asked
    tasks: Collection[str] = ()  # a TaskRegistry: each run admitted again, as the executor does
    _cancelled: asyncio.Event = field(default_factory=asyncio.Event)

    def cancel_current(self, run_id: str | None = None, reason: str = "") -> str:
        """As the executor's: the running run (waiting at the gate) ends cancelled."""
        current = self.queue.current
        if current is None or (run_id is not None and current.id != run_id):
            return ""
        self.cancels.append((current.id, reason))
        self._cancelled.set()
        return "cancel requested"

    async def run_forever(self) -> None:
        while (run := await self.queue.take()) is not None:
            refusal = (
                self.tasks.refusal(run.request) if isinstance(self.tasks, TaskRegistry) else None
            )
            if refusal is not None:  # never started: a reload removed its task
                run.finish(RunResult(ok=False, reason=refusal))
                self.queue.release(run)
                continue
            run.mark_started()
            self.started.append(run)
            self._cancelled.clear()
            if self.release_gate is not None:
                await first_of(self.release_gate.wait(), self._cancelled.wait())
            if self._cancelled.is_set():
                reason = self.cancels[-1][1]
                run.finish(RunResult(ok=False, reason=reason, cancelled=True))
            else:
                handler = self.handlers.get(run.request.task, succeed)
                run.finish(await handler(run))
            self.queue.release(run)


def make_settings(**overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "poll_interval_s": 5.0,
        "batch_size": 20,
        "retry_attempts": 3,
        "retry_backoff_s": 0.0,
        "lease_s": 30.0,
        "queue_capacity": 16,
        "shutdown_timeout_s": 5.0,
    }
    base.update(overrides)
    return Settings().model_copy(update=base)


@dataclass
class Harness(Generic[S]):
    store: S
    queue: RunQueue
    executor: FakeExecutor
    runner: PgRunner
    stopping: asyncio.Event


@asynccontextmanager
async def running(
    store: S,
    *,
    tasks: Collection[str] = ("default", "bad", "slow"),
    handlers: dict[str, Handler] | None = None,
    gate: asyncio.Event | None = None,
    dependency_wait_s: float = 5.0,
    owner: str = "me",
    fence_grace_s: float = 0.0,
    **settings: Any,
) -> AsyncIterator[Harness[S]]:
    """Runs a PgRunner and a fake executor; on exit stops the runner, then the executor."""
    config = make_settings(**settings)
    queue = RunQueue(config.queue_capacity)
    executor = FakeExecutor(queue, dict(handlers or {}), release_gate=gate, tasks=tasks)
    runner = PgRunner(
        store=store,
        queue=queue,
        settings=config,
        known_tasks=tasks,  # as the daemon passes its registry: read at each claim
        owner=owner,
        dependency_wait_s=dependency_wait_s,
        cancel_running=executor.cancel_current,
        fence_grace_s=fence_grace_s,
    )
    stopping = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        exec_task = group.create_task(executor.run_forever())
        runner_task = group.create_task(runner.run(stopping))
        try:
            yield Harness(store, queue, executor, runner, stopping)
        finally:
            stopping.set()
            queue.close()
            queue.cancel_all()
            if gate is not None:
                gate.set()
            await runner_task
            await exec_task
