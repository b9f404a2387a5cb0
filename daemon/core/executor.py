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

# What cancel_current tells: the running run was asked to stop (it has not stopped yet).
CANCEL_REQUESTED = "requested"
CANCEL_ALREADY_REQUESTED = "already requested"
TURN_S = 0.002  # the longest the executor keeps the loop to itself while runs are waiting


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
        self._task: asyncio.Task[None] | None = None  # the executor's own, in run_forever()
        self._attempting = False  # suspended inside a run's attempt: a cancel reaches the run
        self._cancels = 0  # cancels cancel_current asked of the executor's task for this run
        self._stray_cancel = False  # the last attempt left a cancel of the task behind

    async def run_forever(self) -> None:
        """Take runs until the queue is closed and drained.

        Each attempt runs in the executor's own task, awaited where it stands: a handler that
        returns without waiting on anything is done in the step that started it, and the next
        waiting run starts in the same step, up to ``TURN_S``, after which the executor lets the
        loop turn once (the socket, the ticker and the database get theirs)."""
        self._task = asyncio.current_task()
        turn_ends = time.monotonic() + TURN_S
        turn = False
        while True:
            waits = turn or not self.queue.waiting_count()
            run = await self._next_run(turn)
            if run is None:
                return
            if waits:
                turn_ends = time.monotonic() + TURN_S
            try:
                await self.execute(run)
            finally:
                self.queue.release(run)
            turn = self._stray_cancel or (
                bool(self.queue.waiting_count()) and time.monotonic() >= turn_ends
            )

    @property
    def idle(self) -> bool:
        """No run is being executed."""
        return self.queue.current is None

    async def _next_run(self, turn: bool) -> Run | None:
        """The next run (None once the queue is closed and drained), after one turn of the
        loop when ``turn``. A cancellation that reaches the executor here while no cancel of
        its task is pending is one a handler made and left behind (``_answer_cancels``): the
        run it came from has its result, and the executor goes on."""
        while True:
            try:
                if turn:
                    await asyncio.sleep(0)
                return await self.queue.take()
            except asyncio.CancelledError:
                if self._task is None or self._task.cancelling():
                    raise
                turn = False

    def cancel_current(self, run_id: str | None = None, reason: str = REASON_USER_CANCEL) -> str:
        """Terminate the running run (if ``run_id`` matches); its result says ``reason``.

        Returns ``CANCEL_REQUESTED``, ``CANCEL_ALREADY_REQUESTED`` (the run is still being
        terminated: a command in its grace, a handler that has not stopped yet) or ``""`` when
        no such run is running. Only the run's result says that it ended.

        The cancel is the executor task's own: it is asked only while that task is suspended
        inside the attempt, so it reaches the handler or the command where it waits."""
        current = self.queue.current
        task = self._task
        if current is None or task is None or not self._attempting:
            return ""
        if run_id is not None and current.id != run_id:
            return ""
        self._cancel_reason = reason
        if self._cancels:  # a second cancel must not cut the first one's grace short
            return CANCEL_ALREADY_REQUESTED
        self._cancels += 1
        task.cancel()
        return CANCEL_REQUESTED

    def shutdown_running(self, grace_cap_s: float) -> bool:
        """At shutdown: terminate the running job with at most ``grace_cap_s`` of grace."""
        self.grace_cap_s = grace_cap_s
        return bool(self.cancel_current(None, REASON_SHUTDOWN_CANCEL))

    def abandon_running(self) -> Run | None:
        """At a forced stop whose handler ignores cancellation: the running run gets the
        shutdown's result (its client hears its ``done``), though the handler goes on until
        the process ends. Returns that run, or None when no run was left without a result."""
        run = self.queue.current
        if run is None or not run.finish(
            RunResult(ok=False, reason=REASON_SHUTDOWN_CANCEL, cancelled=True)
        ):
            return None
        log.warning(
            "run.done",
            **run_log_fields(run),
            ok=False,
            reason=REASON_SHUTDOWN_CANCEL,
            cancelled=True,
        )
        return run

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
        finally:  # the run has its result by now, however it ended (shutdown: see _follow)
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
        """The attempt, awaited in the executor's task; the run has its result when this
        returns, or when it raises ``CancelledError``: the executor itself is cancelled (the
        shutdown's budget ran out), which ends ``run_forever`` once the run has its result."""
        overdue = None if task.soft_timeout_s is None else self._watch_soft_timeout(run, task)
        self._attempting = True
        try:
            result = await self._attempt(run, task)
        finally:
            self._attempting = False
            if overdue is not None:
                overdue.cancel()
            others = self._answer_cancels()
        _recorded(run, result, started)
        if others and result.cancelled and not result.timed_out:
            raise asyncio.CancelledError  # the executor's own end, after the run's result
        # A cancel the handler made of the task and did not wait for may still be on its way:
        # the loop turns before the next run, and _next_run lets it go by.
        self._stray_cancel = others
        return result

    def _answer_cancels(self) -> bool:
        """Take back the cancel requests made of the executor's task during an attempt, now
        that the attempt has its result: cancel_current's, and any a handler left behind (on
        Python 3.11 a task group whose child fails while it exits does not take its own back).
        True when there were more than cancel_current's: the task's owner cancelled it (the
        run ended by it: the executor ends too), or the handler did (the run ended otherwise)."""
        executor = self._task
        cancels, self._cancels = self._cancels, 0
        if executor is None:
            return False
        others = executor.cancelling() - cancels
        while executor.uncancel() > 0:
            pass
        return others > 0


def _recorded(run: Run, result: RunResult, started: float) -> RunResult:
    """``result``, with the run's duration, recorded as the run's result."""
    result.duration_ms = max(1, round((time.monotonic() - started) * 1000))
    run.finish(result)
    return result
