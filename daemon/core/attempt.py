"""One attempt of a run: under its task's deadline, a Python handler awaited or a command run
to its end, and the result it comes to.

Every attempt comes to one result: success, failure (exit status or handler exception),
timeout, or cancellation. A handler's crash never takes the executor down.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
from collections.abc import Mapping

from daemon.core.jobenv import container_environment, shared_environment, with_run
from daemon.core.journal import Journal
from daemon.core.own_context import awaited_in
from daemon.core.process import ChildSupervisor, CommandOutcome, SpawnError
from daemon.core.process.flow import OutputFlow
from daemon.core.runqueue import (
    Run,
    RunResult,
    is_json_output,
    job_context,
    output_log_fields,
    run_log_fields,
)
from daemon.core.tasks import Task, handler_context
from daemon.log.logs import get_logger
from daemon.log.output_log import LineWriter, OutputLog, OutputLogMode
from daemon.wire import protocol
from daemon.wire.reasons import (
    REASON_NOT_A_DICT,
    REASON_NOT_JSON,
    REASON_SHUTDOWN_CANCEL,
    crash_reason,
    exit_reason,
    overdue_reason,
    timed_out_reason,
)

log = get_logger("runbroker.executor")

OUTPUT_LOG_DEFAULT: OutputLogMode = "json"  # RUNBROKER_OUTPUT_LOG's default
OUTPUT_HOLD_DEFAULT_S = 5.0  # RUNBROKER_OUTPUT_HOLD's default


class AttemptRunner:
    """How the executor carries out its runs' attempts, one at a time: it owns one and tells it
    of each cancel, so why an attempt is stopped lives here, next to what reads it."""

    def __init__(
        self,
        children: ChildSupervisor,
        journal: Journal,
        *,
        default_grace_s: float,
        base_env: Mapping[str, str] | None,
        output_log_mode: OutputLogMode | None,
        output_hold_s: float,
    ) -> None:
        self.children = children
        self.journal = journal  # every run's output lines (the executor begins and ends each)
        self.default_grace_s = default_grace_s
        self._shared_env = (
            container_environment() if base_env is None else shared_environment(base_env)
        )
        # None: a job's lines are not in the daemon's log (``runbroker once``, daemon.testing).
        self.output_log = OutputLog(output_log_mode) if output_log_mode is not None else None
        self.output_hold_s = output_hold_s  # how long a reader may hold a job's output back
        self._cancel_reason = ""  # why the running attempt is being cancelled ("": it is not)
        self._stopping = False  # the executor is being stopped (a cancel that is neither)
        self._grace_cap_s: float | None = None  # the most grace a shutdown leaves the attempt
        self._deadline: asyncio.Timeout | None = None  # the running attempt's, if its task has one
        self._handler_context: contextvars.Context | None = None  # the running handler's
        self._terminated: CommandOutcome | None = None  # how a command stopped by a cancel ended

    @property
    def stopping(self) -> bool:
        """The executor is being stopped: a cancel of the runs' task is its own."""
        return self._stopping

    def stop(self) -> None:
        """The executor is being stopped: the cancel that follows ends the running attempt with
        the shutdown's result, unless a cancel has a reason of its own."""
        self._stopping = True

    def note_cancel(self, reason: str) -> None:
        """The running attempt is being cancelled for ``reason`` (the cancel follows): the
        result says it, the latest one told when there were several."""
        self._cancel_reason = reason

    def cap_grace(self, grace_cap_s: float) -> None:
        """At shutdown: a command the cancel stops gets at most ``grace_cap_s`` of grace."""
        self._grace_cap_s = grace_cap_s

    def grace_s(self, task: Task) -> float:
        """How long ``task``'s attempt has to end once asked to stop (a shutdown's cap applied)."""
        grace_s = task.grace_s if task.grace_s is not None else self.default_grace_s
        cap_s = self._grace_cap_s
        return grace_s if cap_s is None else min(grace_s, cap_s)

    def given_up(self, task: Task) -> RunResult:
        """The result of ``task``'s attempt when the executor stops waiting for it (its handler
        ignored the cancellation): what it was stopped for, its cancel's reason or its timeout."""
        if self._cancel_reason or self._stopping:
            reason = self._cancel_reason or REASON_SHUTDOWN_CANCEL
            return RunResult(ok=False, reason=reason, cancelled=True)
        return self._timed_out_result(task)

    def successor(self) -> AttemptRunner:
        """The runner of the attempts after one the executor gave up on: that one keeps this
        runner, whose state is its own until it ends; the next ones share its settings and
        the shutdown's state, nothing of the attempt."""
        runner = copy.copy(self)
        runner._cancel_reason = ""
        runner._deadline = runner._handler_context = runner._terminated = None
        return runner

    def timed_out(self) -> bool:
        """The running attempt's timeout has fired (its cancel is on its way, or being
        answered: a command in its grace, a handler in its clean-up)."""
        return self._deadline is not None and self._deadline.expired()

    def watch_soft_timeout(self, run: Run, task: Task) -> asyncio.TimerHandle | None:
        """Tell ``run``'s listeners and the log once it runs past its task's soft timeout."""
        if task.soft_timeout_s is None:
            return None
        soft_s = task.soft_timeout_s

        def overdue() -> None:
            if not run.is_done:
                reason = overdue_reason(soft_s)
                run.emit_fields(protocol.EVENT_OVERDUE, protocol.overdue_event(run.id, reason))
                log.warning("run.overdue", **run_log_fields(run), soft_timeout_s=soft_s)

        return asyncio.get_running_loop().call_later(soft_s, overdue)

    async def run(self, run: Run, task: Task) -> RunResult:
        """``run``'s one attempt, under its task's deadline. Every way it ends is a result."""
        self._cancel_reason = ""
        self._deadline = deadline = None
        self._terminated = None
        try:
            if task.timeout_s is None:
                return await self._invoke(run, task)
            async with asyncio.timeout(task.timeout_s) as deadline:
                self._deadline = deadline
                return await self._invoke(run, task)
        except asyncio.CancelledError as exc:
            if self._cancel_reason or self._stopping:
                # Not ok, whatever the job exited with: it did not come to its own end. Its
                # real exit status is told with the reason it was stopped.
                reason = self._cancel_reason or REASON_SHUTDOWN_CANCEL
                return RunResult(
                    ok=False, reason=reason, cancelled=True, exit_code=self._terminated_code()
                )
            if deadline is not None and deadline.expired():
                # The timeout's cancel came out as itself: a cancel a handler left on the task
                # was taken along with it.
                return self._timed_out_result(task)
            # Nobody cancelled this run: the handler raised CancelledError itself (or cancelled
            # its task, which is the executor's: its own run fails, not the executor).
            return self._crashed(run, exc)
        except BaseException as exc:
            # A crashing handler fails its run, never the executor: not sys.exit(), not
            # KeyboardInterrupt, not GeneratorExit or a BaseException of its own.
            if isinstance(exc, TimeoutError) and deadline is not None and deadline.expired():
                return self._timed_out_result(task)
            return self._crashed(run, exc)
        finally:
            self._deadline = self._handler_context = None

    def _timed_out_result(self, task: Task) -> RunResult:
        reason = timed_out_reason(task.timeout_s or 0.0)
        return RunResult(ok=False, reason=reason, timed_out=True, exit_code=self._terminated_code())

    def _note_terminated(self, outcome: CommandOutcome) -> None:
        self._terminated = outcome

    def _terminated_code(self) -> int | None:
        """The exit status of the command the cancel stopped (None: a handler's run)."""
        return None if self._terminated is None else self._terminated.exit_code

    def _crashed(self, run: Run, exc: BaseException) -> RunResult:
        fields = {**run_log_fields(run), "error_type": type(exc).__name__, "exc_info": exc}
        # Logged in the handler's own context: what it bound there (structlog's context
        # variables) is on the line.
        context = self._handler_context
        if context is None:
            log.warning("run.crashed", **fields)
        else:
            context.run(log.warning, "run.crashed", **fields)
        return RunResult(ok=False, reason=crash_reason(exc))

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
            self._handler_context = own = contextvars.copy_context()
            output = await awaited_in(task.handler(context), own)
            if output is not None and not isinstance(output, dict):
                return RunResult(ok=False, reason=REASON_NOT_A_DICT)
            if output is not None and not is_json_output(output):
                return RunResult(ok=False, reason=REASON_NOT_JSON)
            return RunResult(ok=True, output=output)

        def grace_s() -> float:
            return self.grace_s(task)

        journal_log = self.journal.current
        keep = journal_log.add_lines if journal_log is not None else None
        listeners = run.listeners  # tested at each read, without a call (see Run.listeners)
        run.flow = flow = OutputFlow(self.output_hold_s)
        if journal_log is not None:
            journal_log.flow = flow
        output_log = self.output_log
        write_log: LineWriter | None = None  # made at the first read: most runs print nothing

        def sink(stream: str, lines: list[str]) -> None:
            nonlocal output_log, write_log
            if keep is not None:
                keep(stream, lines)
            if listeners:
                run.emit_fields(
                    protocol.EVENT_OUTPUT, protocol.output_lines_event(run.id, stream, lines)
                )
            if output_log is not None:
                write_log, output_log = output_log.writer(output_log_fields(run)), None
            if write_log is not None:
                write_log(stream, lines)

        try:
            outcome = await self.children.run_command(
                (*task.command, *run.request.args),
                with_run(self._shared_env, run),
                sink,
                grace_s=grace_s,
                valve=flow,
                terminated=self._note_terminated,
                key=run.id,
            )
        except SpawnError as exc:
            return RunResult(ok=False, reason=str(exc))
        if outcome.exit_code == 0:
            return RunResult(ok=True, exit_code=0)
        reason = exit_reason(outcome.exit_code, outcome.signal_name)
        return RunResult(ok=False, reason=reason, exit_code=outcome.exit_code)
