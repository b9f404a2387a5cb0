"""The single consumer of the run queue: one run at a time, in arrival order.

Each run gets exactly one result: success, failure (exit status or handler exception), timeout,
cancellation, or shutdown. A handler's crash never takes the executor down, and neither does one
that ignores its cancellation: once its grace is over, its run has its result, the task it holds
is a stray (``daemon.core.strays``), and the runs go on in a task of their own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

from daemon.core.attempt import OUTPUT_HOLD_DEFAULT_S, OUTPUT_LOG_DEFAULT, AttemptRunner
from daemon.core.journal import Journal
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import Run, RunQueue, RunResult, run_log_fields
from daemon.core.strays import Strays
from daemon.core.tasks import Task, TaskRefused, TaskRegistry
from daemon.log.logs import get_logger, log_enabled
from daemon.log.output_log import OutputLogMode
from daemon.wire.reasons import REASON_SHUTDOWN_CANCEL, REASON_USER_CANCEL

log = get_logger("runbroker.executor")

# What cancel_current tells: the running run was asked to stop (it has not stopped yet).
CANCEL_REQUESTED = "requested"
CANCEL_ALREADY_REQUESTED = "already requested"
TURN_S = 0.002  # the longest the executor keeps the loop to itself while runs are waiting
# Past its grace, a handler asked to stop has this long to answer before it is a stray: the loop
# turns that tell it its cancellation and take its answer back.
STRAY_MARGIN_S = 0.1


class Executor:
    def __init__(
        self,
        queue: RunQueue,
        tasks: TaskRegistry,
        children: ChildSupervisor,
        *,
        default_grace_s: float,
        base_env: Mapping[str, str] | None = None,
        output_log_mode: OutputLogMode | None = OUTPUT_LOG_DEFAULT,
        output_hold_s: float = OUTPUT_HOLD_DEFAULT_S,
        journal: Journal | None = None,
    ) -> None:
        self.journal = Journal() if journal is None else journal  # every run's output lines
        self.attempts = AttemptRunner(
            children,
            self.journal,
            default_grace_s=default_grace_s,
            base_env=base_env,
            output_log_mode=output_log_mode,
            output_hold_s=output_hold_s,
        )
        self.queue = queue
        self.tasks = tasks
        # Per-run info lines (LOG_LEVEL=warning drops them) are not even built when dropped.
        self._verbose = log_enabled(logging.INFO)
        self._task: asyncio.Task[None] | None = None  # where the runs execute (run_forever's)
        self._attempting = False  # suspended inside a run's attempt: a cancel reaches the run
        self._cancels = 0  # cancels cancel_current asked of the executor's task for this run
        self._stray_cancel = False  # the last attempt left a cancel of the task behind
        self._handler: Task | None = None  # the running attempt's task, when it is a handler's
        self._give_up: asyncio.TimerHandle | None = None  # when to stop waiting for the handler
        self._moved: asyncio.Future[None] | None = None  # run_forever's, told the runs moved on
        self.strays = Strays()  # the handlers given up on that still run

    async def run_forever(self) -> None:
        """Take runs until the queue is closed and drained, or when cancelled, until the running run
        has its result; then wait for the strays.

        Each attempt is awaited in place, and the next waiting run starts in the same step, up to
        ``TURN_S``, so that quick handlers cost no loop turn. Handlers share that task, so the
        caller's cancel reaches it only as ``stop()``. A handler given up on keeps that task,
        and the runs go on in a new one."""
        self._start_runs()
        try:
            runs = await self._runs_ended()
            await self.strays.wait()
        except asyncio.CancelledError:
            self.attempts.stop()
            if self._task is not None:
                self._task.cancel()  # a cancel of the waits above leaves the runs' task alone
            self.strays.cancel()
            await self._runs_ended()
            await self.strays.wait()
            raise
        if runs is not None:
            runs.result()  # what ended it, raised here

    def _start_runs(self) -> None:
        """The runs' task, at the start or after a give-up (none once the executor stops)."""
        stopping = self.attempts.stopping
        loop = asyncio.get_running_loop()
        self._task = None if stopping else loop.create_task(self._execute_runs())
        moved = self._moved
        if moved is not None and not moved.done():
            moved.set_result(None)

    async def _runs_ended(self) -> asyncio.Task[None] | None:
        """The runs' task once it has ended, followed from task to task across give-ups."""
        loop = asyncio.get_running_loop()
        while True:
            runs = self._task
            if runs is None or runs.done():
                return runs
            self._moved = moved = loop.create_future()
            try:
                await asyncio.wait({runs, moved}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                self._moved = None

    async def _execute_runs(self) -> None:
        me = asyncio.current_task()
        turn_ends = time.monotonic() + TURN_S
        turn = False
        while True:
            run = None if turn else self.queue.take_waiting()
            if run is None:  # a loop turn first, or no run waits: a new turn starts after it
                run = await self._next_run(turn)
                if run is None:
                    return
                turn_ends = time.monotonic() + TURN_S
            self._stray_cancel = False
            try:
                await self.execute(run)
            finally:
                stray = self._task is not me
                if not stray:
                    self.queue.release(run)
            if stray:
                return  # given up on: the run had its result then, and a new task took over
            turn = self._stray_cancel or (
                bool(self.queue.waiting_count()) and time.monotonic() >= turn_ends
            )

    @property
    def idle(self) -> bool:
        """No run is being executed."""
        return self.queue.current is None

    async def _next_run(self, turn: bool) -> Run | None:
        """The next run (None once the queue is closed and drained), after one turn of the
        loop when ``turn``. A cancellation that reaches the runs' task here, unless the
        executor is stopping, is one a handler made of it and left behind: the run it came
        from has its result, and the executor goes on."""
        while True:
            try:
                if turn:
                    await asyncio.sleep(0)
                return await self.queue.take()
            except asyncio.CancelledError:
                if self.attempts.stopping:
                    raise
                self._take_back_cancels()
                turn = False

    def cancel_current(self, run_id: str | None = None, reason: str = REASON_USER_CANCEL) -> str:
        """Terminate the running run (if ``run_id`` matches), whose result then says ``reason``.

        Returns ``CANCEL_REQUESTED``, ``CANCEL_ALREADY_REQUESTED`` (still being terminated) or
        ``""`` (no such run). The cancel is asked only while the executor's task waits inside the
        attempt, so it reaches the handler or the command where it waits."""
        current = self.queue.current
        task = self._task
        if current is None or task is None or not self._attempting:
            return ""
        if run_id is not None and current.id != run_id:
            return ""
        self.attempts.note_cancel(reason)
        if self._handler is not None:
            self._give_up_after(current, self.attempts.grace_s(self._handler))
        if self._cancels or self.attempts.timed_out():
            # A second cancel (or one after the task's timeout has fired) must not cut the
            # first one's grace, or the handler's clean-up, short.
            return CANCEL_ALREADY_REQUESTED
        self._cancels += 1
        task.cancel()
        return CANCEL_REQUESTED

    def shutdown_running(self, grace_cap_s: float) -> bool:
        """At shutdown: terminate the running job with at most ``grace_cap_s`` of grace."""
        self.attempts.cap_grace(grace_cap_s)
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
            result = RunResult(ok=False, reason=refused.reason, code=refused.code)
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
        started = run.started_monotonic or time.monotonic()  # set by mark_started
        try:
            followed = await self._follow(run, task, started)
        finally:  # the run has its result by now, however it ended (shutdown: see _follow)
            if journal_log is not None:
                shutdown = RunResult(ok=False, reason=REASON_SHUTDOWN_CANCEL, cancelled=True)
                self.journal.end(journal_log, run.result or shutdown)
        if followed is None:  # a stray's end: its run's result was told when it was given up on
            assert run.result is not None
            return run.result
        if verbose or not followed.ok:  # a success's line is an info line
            _log_done(run, followed, verbose)
        return followed

    async def _follow(self, run: Run, task: Task, started: float) -> RunResult | None:
        """The attempt, awaited in the runs' task: the run has its result when this returns.

        ``CancelledError`` means the shutdown's budget ran out, which ends the runs once this one
        has its result. None: the executor gave up on the attempt, which has now ended."""
        overdue = (
            None if task.soft_timeout_s is None else self.attempts.watch_soft_timeout(run, task)
        )
        if task.handler is not None:
            self._handler = task
            if task.timeout_s is not None:
                self._give_up_after(run, task.timeout_s + self.attempts.grace_s(task))
        self._attempting = True
        try:
            result = await self.attempts.run(run, task)
        finally:
            if overdue is not None:
                overdue.cancel()
            if run is self.queue.current:  # else given up on, and the executor has moved on
                self._attempt_over()
                # What the handler left on the task is taken back. A cancel it made and did not
                # wait for may still be on its way: the loop turns before the next run, and
                # _next_run lets it go by.
                self._stray_cancel = self._take_back_cancels()
        if run is not self.queue.current:
            return None
        _recorded(run, result, started)
        if self.attempts.stopping:
            raise asyncio.CancelledError  # the executor's own end, after the run's result
        return result

    def _give_up_after(self, run: Run, grace_s: float) -> None:
        """Stop waiting for ``run``'s handler ``grace_s`` (and the margin) from now, unless it
        ends first or an earlier give-up is set."""
        loop = asyncio.get_running_loop()
        when = loop.time() + grace_s + STRAY_MARGIN_S
        armed = self._give_up
        if armed is not None:
            if armed.when() <= when:
                return
            armed.cancel()
        self._give_up = loop.call_at(when, self._gave_up_on, run, grace_s)

    def _attempt_over(self) -> None:
        """The executor is no longer inside an attempt: its cancels and give-up go with it."""
        self._attempting = False
        self._cancels = 0
        self._handler = None
        if self._give_up is not None:
            self._give_up.cancel()
            self._give_up = None

    def _gave_up_on(self, run: Run, grace_s: float) -> None:
        """``run``'s handler did not end within its grace once asked to stop: the run gets the
        result it was stopped for, its task goes on as a stray, and the runs in a new task."""
        self._give_up = None
        runs, handler = self._task, self._handler
        if run is not self.queue.current or runs is None or handler is None or run.is_done:
            return
        started = run.started_monotonic or time.monotonic()
        _log_done(run, _recorded(run, self.attempts.given_up(handler), started), stray=True)
        self.strays.adopt(runs, run, grace_s)
        self._attempt_over()
        self.attempts = self.attempts.successor()  # the stray keeps the one it runs in
        self.queue.release(run)
        self._start_runs()

    def _take_back_cancels(self) -> bool:
        """Take back every cancel request made of the runs' task, and return whether there were any.

        Besides cancel_current's, a handler may leave one behind: on Python 3.11 a task group
        whose child fails while it exits does not take its own back."""
        executor = self._task
        if executor is None or not executor.cancelling():
            return False
        while executor.uncancel() > 0:
            pass
        return True


def _recorded(run: Run, result: RunResult, started: float) -> RunResult:
    """``result``, with the run's duration, recorded as the run's result."""
    result.duration_ms = max(1, round((time.monotonic() - started) * 1000))
    run.finish(result)
    return result


def _log_done(run: Run, result: RunResult, verbose: bool = True, **extra: object) -> None:
    """The ``run.done`` line of a run the executor ran: a warning when it failed, and a
    success only when ``verbose``."""
    if result.ok:
        if verbose:
            log.info("run.done", **run_log_fields(run), ok=True, duration_ms=result.duration_ms)
        return
    log.warning(
        "run.done",
        **run_log_fields(run),
        ok=False,
        reason=result.reason,
        exit_code=result.exit_code,
        duration_ms=result.duration_ms,
        **extra,
    )
