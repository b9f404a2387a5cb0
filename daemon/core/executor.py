"""The single consumer of the run queue: one run at a time, in arrival order.

Each run gets exactly one result: success, failure (exit status or handler exception), timeout,
cancellation, or shutdown. A handler's crash never takes the executor down.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from daemon.core.attempt import AttemptRunner
from daemon.core.journal import Journal
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import (
    REASON_SHUTDOWN_CANCEL,
    REASON_USER_CANCEL,
    Run,
    RunQueue,
    RunResult,
    run_log_fields,
)
from daemon.core.tasks import Task, TaskRefused, TaskRegistry
from daemon.observe.logs import get_logger

log = get_logger("runbroker.executor")

ABANDON_WAIT_S = 1.0  # at a forced stop, how long a run's own clean-up may take
# What cancel_current tells: the running run was asked to stop (it has not stopped yet).
CANCEL_REQUESTED = "requested"
CANCEL_ALREADY_REQUESTED = "already requested"


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


class Executor(AttemptRunner):
    def __init__(
        self,
        queue: RunQueue,
        tasks: TaskRegistry,
        children: ChildSupervisor,
        *,
        default_grace_s: float,
        base_env: Mapping[str, str] | None = None,
        log_output: bool = True,
        journal: Journal | None = None,
    ) -> None:
        super().__init__(
            children,
            default_grace_s=default_grace_s,
            base_env=base_env,
            log_output=log_output,
            journal=journal,
        )
        self.queue = queue
        self.tasks = tasks
        self._current_task: asyncio.Task[RunResult] | None = None
        self._loop: asyncio.AbstractEventLoop  # the executor's, from run_forever()
        self.idle = asyncio.Event()
        self.idle.set()

    async def run_forever(self) -> None:
        """Take runs until the queue is closed and drained."""
        # The loop is looked up once: on CPython 3.11 every get_running_loop() is a getpid().
        self._loop = asyncio.get_running_loop()
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
        try:
            task = self.tasks.admit(run.request)  # again: the tasks may have been reloaded
        except TaskRefused as refused:
            result = RunResult(ok=False, reason=refused.reason)
            run.finish(result)
            log.warning("run.done", **run_log_fields(run), ok=False, reason=result.reason)
            return result
        # Journaled before "started" is told: a client following the queued run finds it. A
        # handler's run has no output lines: it is not journaled (nor pushes command runs out).
        journal_log = self.journal.begin(run) if task.command else None
        run.mark_started()
        if journal_log is not None:
            journal_log.started_at = run.started_at or 0.0
        verbose = self._verbose
        if verbose:
            log.info("run.started", **run_log_fields(run))
        started = time.monotonic()
        self._cancel_reason = ""
        try:
            result = await self._follow(run, task, started)
        finally:  # the run has its result by now, however it ended
            if journal_log is not None:
                shutdown = RunResult(ok=False, reason=REASON_SHUTDOWN_CANCEL, cancelled=True)
                self.journal.end(journal_log, run.result or shutdown)
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
        loop = self._loop
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


def _recorded(run: Run, result: RunResult, started: float) -> RunResult:
    """``result``, with the run's duration, recorded as the run's result."""
    result.duration_ms = max(1, round((time.monotonic() - started) * 1000))
    run.finish(result)
    return result
