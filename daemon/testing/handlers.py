"""Run a handler as the executor would, without a daemon, a socket or a database.

The run goes through the daemon's own ``Executor`` and restates none of its rules, so what a
test sees is what the daemon would do with the same handler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict, Unpack

from daemon.core.executor import Executor
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import Run, RunQueue, RunRequest, RunResult, Trigger
from daemon.core.tasks import Handler, RunContext, Task, TaskRegistry
from daemon.testing.logs import plain_tracebacks

__all__ = [
    "Handler",
    "HandlerOptions",
    "HandlerResult",
    "HandlerRun",
    "RunContext",
    "run_handler",
    "start_handler",
]


@dataclass(frozen=True)
class HandlerResult:
    """What a run came to, as a user of the daemon sees it (``trigger``'s last line)."""

    run_id: str
    ok: bool
    reason: str
    """Why it failed: ``"ValueError: boom"``, ``"timed out after 2s"``, ``"handler returned a
    non-dict value"``, ``"cancelled by request"``...; empty on success."""
    output: dict[str, Any] | None
    duration_ms: int
    timed_out: bool
    cancelled: bool

    @property
    def duration_s(self) -> float:
        return self.duration_ms / 1000


def _result_of(run: Run) -> HandlerResult:
    result = run.result
    if result is None:  # every run the executor takes comes to a result: this is a bug
        raise RuntimeError(f"run {run.id} ended without a result")
    return _from(run.id, result)


def _from(run_id: str, result: RunResult) -> HandlerResult:
    return HandlerResult(
        run_id=run_id,
        ok=result.ok,
        reason=result.reason,
        output=result.output,
        duration_ms=result.duration_ms,
        timed_out=result.timed_out,
        cancelled=result.cancelled,
    )


class HandlerRun:
    """A handler's run in progress (``start_handler``): cancel it as ``runbroker cancel`` would,
    await its result.

    The executor's task is owned here and awaited by ``result()``, so await it before the test
    ends. To cancel a handler while it runs, let the handler tell the test it is in, with an
    ``asyncio.Event`` of the test's."""

    def __init__(self, executor: Executor, queue: RunQueue, request: RunRequest) -> None:
        self._executor = executor
        self._queue = queue
        self._run = queue.submit(request)
        queue.close()  # this one run, then the executor returns
        self._task = asyncio.get_running_loop().create_task(executor.run_forever())

    @property
    def run_id(self) -> str:
        return self._run.id

    def cancel(self) -> bool:
        """Cancel the run with the reason ``runbroker cancel`` gives. False if it has ended."""
        if self._executor.cancel_current(self._run.id):
            return True
        return self._queue.cancel_waiting(self._run.id) is not None

    async def result(self) -> HandlerResult:
        """The run's result, once the executor is done with it."""
        await self._task
        return _result_of(self._run)


class HandlerOptions(TypedDict, total=False):
    """The keywords of ``start_handler`` and ``run_handler``: one list, so the two agree."""

    task: str  # the task's name (default ``"handler"``)
    args: tuple[str, ...]
    env: Mapping[str, str] | None
    payload: Any
    timeout_s: float | None  # the task's ``timeout``
    trigger: Trigger  # default ``"external"``
    job: str | None  # a database job's run: its name, attempt and occurrence
    attempt: int | None
    scheduled_for: datetime | None


def start_handler(handler: Handler, **options: Unpack[HandlerOptions]) -> HandlerRun:
    """Start ``handler``'s run on the daemon's executor and return it running.

    The options are ``run_handler``'s. Call from a running event loop."""
    unknown = sorted(options.keys() - HandlerOptions.__optional_keys__)
    if unknown:  # what a signature of named keywords would refuse, for callers without mypy
        raise TypeError(f"start_handler() got unexpected keyword arguments: {', '.join(unknown)}")
    plain_tracebacks()
    task = options.get("task", "handler")
    args = tuple(options.get("args", ()))
    env = dict(options.get("env") or {})
    definition = Task(
        name=task,
        handler=handler,
        allow_args=bool(args),
        allow_env=frozenset(env),
        timeout_s=options.get("timeout_s"),
    )
    queue = RunQueue(1)
    executor = Executor(
        queue,
        TaskRegistry({task: definition}),
        ChildSupervisor(),
        default_grace_s=0.0,  # a handler has no grace: cancelling it is immediate
        base_env={},
        output_log_mode=None,
    )
    request = RunRequest(
        task=task,
        trigger=options.get("trigger", "external"),
        args=args,
        env=env,
        payload=options.get("payload"),
        job=options.get("job"),
        attempt=options.get("attempt"),
        scheduled_for=options.get("scheduled_for"),
    )
    return HandlerRun(executor, queue, request)


async def run_handler(handler: Handler, **options: Unpack[HandlerOptions]) -> HandlerResult:
    """Run ``handler`` once as the daemon's executor would and return its result.

    The handler receives the same ``RunContext`` as in the daemon: ``task`` (its name),
    ``trigger``, ``args``, ``env`` (the variables the request passes), ``payload`` and, for a
    database job's run (``job``, ``attempt``, ``scheduled_for``), its ``context``
    (``JOB``, ``ATTEMPT``, ``SCHEDULED_FOR``). ``timeout_s`` is the task's ``timeout``.
    A handler that raises, times out or returns something else than a dict (or None) does
    not raise here: its result says so, as ``runbroker trigger`` would."""
    return await start_handler(handler, **options).result()
