"""The single consumer of the run queue: one run at a time, in arrival order.

Each run gets exactly one result: success, failure (exit status or handler exception), timeout,
cancellation, or shutdown. A handler's crash never takes the executor down.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Mapping

from daemon.core.process import ChildSupervisor, SpawnError
from daemon.core.runqueue import (
    REASON_SHUTDOWN_CANCEL,
    REASON_USER_CANCEL,
    Run,
    RunQueue,
    RunResult,
    job_context,
    run_log_fields,
)
from daemon.core.tasks import Task, TaskRegistry, handler_context
from daemon.observe.logs import get_logger, log_enabled
from daemon.wire import protocol

log = get_logger("runbroker.executor")

ABANDON_WAIT_S = 1.0  # at a forced stop, how long a run's own clean-up may take
# What cancel_current tells: the running run was asked to stop (it has not stopped yet).
CANCEL_REQUESTED = "requested"
CANCEL_ALREADY_REQUESTED = "already requested"

# Settings of the daemon itself are not the job's business (the database URL is a secret).
_PRIVATE_ENV = ("RUNBROKER_",)
# ...except where a job that runs `runbroker trigger` or `once` itself must find the daemon.
_SHARED_ENV = frozenset({"RUNBROKER_SOCKET", "RUNBROKER_LOCK_DIR"})


def shared_environment(base: Mapping[str, str]) -> dict[str, str]:
    """The container's environment minus runbroker's own settings."""
    return {
        key: value
        for key, value in base.items()
        if key in _SHARED_ENV or not key.startswith(_PRIVATE_ENV)
    }


def job_environment(base: Mapping[str, str], run: Run) -> dict[str, str]:
    """The environment a command task runs with: the container's, minus runbroker's own
    settings, plus the run context and the env the trigger was allowed to set."""
    return _with_run(shared_environment(base), run)


def _with_run(shared: Mapping[str, str], run: Run) -> dict[str, str]:
    """``shared`` (the container's environment, made once) with the run's own variables: the
    run context wins over what the trigger set."""
    request = run.request
    env = dict(shared)
    env.update(request.env)
    env["RUNBROKER_RUN_ID"] = run.id
    env["RUNBROKER_TASK"] = request.task
    env["RUNBROKER_TRIGGER"] = request.trigger
    if request.job is not None:  # a database job's run: RUNBROKER_JOB, _SCHEDULED_FOR, _ATTEMPT
        for key, value in job_context(request).items():
            env[f"RUNBROKER_{key}"] = value
    if request.payload is not None:
        env["RUNBROKER_PAYLOAD"] = json.dumps(request.payload, separators=(",", ":"))
    return env


async def _until_done(task: asyncio.Task[RunResult], loop: asyncio.AbstractEventLoop) -> None:
    """Wait for ``task`` to finish, however it finishes (cancelled included); cancelling the
    waiter leaves ``task`` alone. What ``asyncio.wait({task})`` does, at about half its cost
    per run (no set, no timeout handling, one future)."""
    if task.done():
        return
    waiter = loop.create_future()

    def wake(_task: object) -> None:
        if not waiter.done():
            waiter.set_result(None)

    task.add_done_callback(wake)
    try:
        await waiter
    finally:
        task.remove_done_callback(wake)


def _format_s(seconds: float) -> str:
    return f"{seconds:g}s"


class Executor:
    def __init__(
        self,
        queue: RunQueue,
        tasks: TaskRegistry,
        children: ChildSupervisor,
        *,
        default_grace_s: float,
        base_env: Mapping[str, str] | None = None,
        log_output: bool = True,
    ) -> None:
        self.queue = queue
        self.tasks = tasks
        self.children = children
        self.default_grace_s = default_grace_s
        self.base_env = dict(os.environ if base_env is None else base_env)
        self._shared_env = shared_environment(self.base_env)
        self.log_output = log_output
        # Per-run info lines (LOG_LEVEL=warning drops them) are not even built when dropped.
        self._verbose = log_enabled(logging.INFO)
        self._current_task: asyncio.Task[RunResult] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the executor's, once it runs
        self._cancel_reason = ""
        self.grace_cap_s: float | None = None
        self.idle = asyncio.Event()
        self.idle.set()

    async def run_forever(self) -> None:
        """Take runs until the queue is closed and drained."""
        while True:
            run = await self.queue.take()
            if run is None:
                return
            self.idle.clear()
            try:
                await self.execute(run)
            finally:
                self.queue.release(run)
                self.idle.set()

    def cancel_current(self, run_id: str | None = None, reason: str = REASON_USER_CANCEL) -> str:
        """Terminate the running run (if ``run_id`` matches); its result says ``reason``.

        Returns ``CANCEL_REQUESTED``, ``CANCEL_ALREADY_REQUESTED`` (the run is still being
        terminated: a command in its grace, a handler that has not stopped yet) or ``""`` when
        no such run is running. Only the run's result says that it ended."""
        current = self.queue.current
        task = self._current_task
        if current is None or task is None or task.done():
            return ""
        if run_id is not None and current.id != run_id:
            return ""
        self._cancel_reason = reason
        if task.cancelling():  # a second cancel must not cut the first one's grace short
            return CANCEL_ALREADY_REQUESTED
        task.cancel()
        return CANCEL_REQUESTED

    def shutdown_running(self, grace_cap_s: float) -> bool:
        """At shutdown: terminate the running job with at most ``grace_cap_s`` of grace."""
        self.grace_cap_s = grace_cap_s
        return bool(self.cancel_current(None, REASON_SHUTDOWN_CANCEL))

    async def execute(self, run: Run) -> RunResult:
        task = self.tasks.get(run.request.task)
        refusal = self.tasks.refusal(run.request) if task is None else task.refusal(run.request)
        if task is None or refusal is not None:
            result = RunResult(ok=False, reason=refusal or "unknown task")
            run.finish(result)
            log.warning("run.done", **run_log_fields(run), ok=False, reason=result.reason)
            return result
        run.mark_started()
        verbose = self._verbose
        if verbose:
            log.info("run.started", **run_log_fields(run))
        started = time.monotonic()
        self._cancel_reason = ""
        result = await self._follow(run, task, started)
        duration_ms = result.duration_ms
        if result.ok:
            if verbose:
                log.info("run.done", **run_log_fields(run), ok=True, duration_ms=duration_ms)
        else:
            log.warning(
                "run.done",
                **run_log_fields(run),
                ok=False,
                reason=result.reason,
                exit_code=result.exit_code,
                duration_ms=duration_ms,
            )
        return result

    async def _follow(self, run: Run, task: Task, started: float) -> RunResult:
        """Run the attempt in a task of its own (cancellable without the executor) and wait
        for it; the run has its result when this returns."""
        # The loop is looked up once: on CPython 3.11 every get_running_loop() is a getpid().
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        attempt = self._current_task = loop.create_task(self._finishing(run, task, started))
        overdue = None if task.soft_timeout_s is None else self._watch_soft_timeout(run, task)
        try:
            await _until_done(attempt, loop)  # unlike shield(), not raising if attempt is cancelled
        except asyncio.CancelledError:
            # The executor itself is being cancelled (the shutdown budget ran out): stop the
            # run too, but never wait without bound for a handler that ignores cancellation.
            attempt.cancel()
            await asyncio.wait({attempt}, timeout=ABANDON_WAIT_S)
            run.finish(RunResult(ok=False, reason=REASON_SHUTDOWN_CANCEL, cancelled=True))
            raise
        finally:
            if overdue is not None:
                overdue.cancel()
            self._current_task = None
        if attempt.cancelled():  # cancelled before the coroutine could see it
            reason = self._cancel_reason or REASON_SHUTDOWN_CANCEL
            return _recorded(run, RunResult(ok=False, reason=reason, cancelled=True), started)
        return attempt.result()

    async def _finishing(self, run: Run, task: Task, started: float) -> RunResult:
        """The attempt, and the run's result recorded by the attempt's own last step: a
        handler that returns at once has its ``done`` written with its ``started``."""
        return _recorded(run, await self._attempt(run, task), started)

    def _watch_soft_timeout(self, run: Run, task: Task) -> asyncio.TimerHandle | None:
        if task.soft_timeout_s is None:
            return None
        soft_s = task.soft_timeout_s

        def overdue() -> None:
            if not run.is_done:
                reason = f"running longer than {_format_s(soft_s)}"
                run.emit_fields(protocol.EVENT_OVERDUE, protocol.overdue_event(run.id, reason))
                log.warning("run.overdue", **run_log_fields(run), soft_timeout_s=soft_s)

        return asyncio.get_running_loop().call_later(soft_s, overdue)

    async def _attempt(self, run: Run, task: Task) -> RunResult:
        deadline: asyncio.Timeout | None = None
        try:
            if task.timeout_s is None:
                return await self._invoke(run, task)
            async with asyncio.timeout(task.timeout_s) as deadline:
                return await self._invoke(run, task)
        except asyncio.CancelledError as exc:
            current = asyncio.current_task()
            if self._cancel_reason or (current is not None and current.cancelling()):
                reason = self._cancel_reason or REASON_SHUTDOWN_CANCEL
                return RunResult(ok=False, reason=reason, cancelled=True)
            # Nobody cancelled this run: the handler raised CancelledError itself.
            return self._crashed(run, exc)
        except BaseException as exc:
            # A crashing handler fails its run, never the executor: not sys.exit(), not
            # KeyboardInterrupt, not GeneratorExit or a BaseException of its own.
            if isinstance(exc, TimeoutError) and deadline is not None and deadline.expired():
                reason = f"timed out after {_format_s(task.timeout_s or 0.0)}"
                return RunResult(ok=False, reason=reason, timed_out=True)
            return self._crashed(run, exc)

    def _crashed(self, run: Run, exc: BaseException) -> RunResult:
        log.warning(
            "run.crashed",
            **run_log_fields(run),
            error_type=type(exc).__name__,
            exc_info=exc,
        )
        return RunResult(ok=False, reason=f"{type(exc).__name__}: {exc}"[:1000])

    async def _invoke(self, run: Run, task: Task) -> RunResult:
        if task.handler is not None:
            request = run.request
            context = handler_context(
                run.id,
                task.name,
                request.trigger,
                request.args,
                dict(request.env),
                request.payload,
                {} if request.job is None else job_context(request),
            )
            output = await task.handler(context)
            if output is not None and not isinstance(output, dict):
                return RunResult(ok=False, reason="handler returned a non-dict value")
            if output is not None and not _json_safe(output):
                return RunResult(ok=False, reason="handler returned output that is not JSON")
            return RunResult(ok=True, output=output)
        task_grace_s = task.grace_s if task.grace_s is not None else self.default_grace_s

        def grace_s() -> float:
            cap_s = self.grace_cap_s
            return task_grace_s if cap_s is None else min(task_grace_s, cap_s)

        log_output = self.log_output and self._verbose

        def sink(stream: str, line: str) -> None:
            if run.listened:
                run.emit_fields(protocol.EVENT_OUTPUT, protocol.output_event(run.id, stream, line))
            if log_output:
                log.info(
                    "run.output", run_id=run.id, task=run.request.task, stream=stream, line=line
                )

        try:
            outcome = await self.children.run_command(
                (*task.command, *run.request.args),
                _with_run(self._shared_env, run),
                sink,
                grace_s=grace_s,
            )
        except SpawnError as exc:
            return RunResult(ok=False, reason=str(exc))
        if outcome.exit_code == 0:
            return RunResult(ok=True, exit_code=0)
        if outcome.signal_name:
            reason = f"killed by {outcome.signal_name}"
        else:
            reason = f"exit status {outcome.exit_code}"
        return RunResult(ok=False, reason=reason, exit_code=outcome.exit_code)


def _recorded(run: Run, result: RunResult, started: float) -> RunResult:
    """``result``, with the run's duration, recorded as the run's result."""
    result.duration_ms = max(1, round((time.monotonic() - started) * 1000))
    run.finish(result)
    return result


def _json_safe(output: dict[str, object]) -> bool:
    """Whether the output can travel on the wire and into ``job_runs.output`` (jsonb)."""
    try:
        json.dumps(output, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return False
    return True
