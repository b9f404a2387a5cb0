"""Which run a ``logs`` request means: a run's log in the journal, a queued run, or why there is
none (an unknown id or task, a Python handler's task or run, a run that ended before it started:
said from the broker's recent results, ``Journal.recent``)."""

from __future__ import annotations

from dataclasses import dataclass

from daemon.core.journal import Journal, RunLog
from daemon.core.runqueue import Run, RunQueue
from daemon.core.tasks import TaskRegistry
from daemon.wire.logs_answers import RUN_ID_FORM, looks_like_a_short_run_id
from daemon.wire.protocol import LogsRequest, clip


@dataclass(frozen=True)
class FirstRun:
    """Following a task with no run yet (``task`` empty: any run while there is none): wait
    for the first run of it to be queued, then follow that one."""

    task: str


def select(
    journal: Journal, queue: RunQueue, tasks: TaskRegistry, request: LogsRequest
) -> RunLog | Run | FirstRun | str:
    """The run ``request`` names (its log, or a queued ``Run``), or why there is none.

    A run id names that run, wherever it is. A task names its running run, else its latest
    finished one, else its first queued one, else, when following, its first run to come.
    Neither names the running run, else the latest finished one, and when following, else the
    first queued one, else the first run to come."""
    kept = (
        f"the journal keeps the running run and the last {journal.history_runs_max} finished"
        " command runs; a Python handler's runs have no output lines"
    )
    if request.id:
        log = journal.find(request.id)
        if log is not None:
            return log
        run = queue.find(request.id)
        if run is not None:
            return (
                _handler_refusal(journal, tasks, run.request.task, f"run {run.id} is of task")
                or run
            )
        ended = next((run for run in journal.recent if run.id == request.id), None)
        if ended is None:
            return f"no run {clip(request.id)!r} ({kept})"
        return _ended_refusal(journal, tasks, ended) or f"no run {clip(request.id)!r} ({kept})"
    task = request.task
    refusal = _handler_refusal(journal, tasks, task, "task") if task else ""
    if refusal:
        return refusal
    log = journal.latest(task or None)
    if log is not None:
        return log
    queued = next((run for run in queue.waiting() if not task or run.request.task == task), None)
    if not task:
        if request.follow:
            return queued or FirstRun("")
        return "no run yet"
    if queued is not None:
        return queued
    if tasks.get(task) is None:
        return _unknown_task(tasks, task)
    if request.follow:
        return FirstRun(task)
    return f"no run of task {clip(task)!r} yet ({kept})"


def _unknown_task(tasks: TaskRegistry, task: str) -> str:
    hint = ""
    if looks_like_a_short_run_id(task):
        hint = f" (nor a run id, which is {RUN_ID_FORM})"
    return f"unknown task {clip(task)!r}{hint}: this container defines {tasks.listing()}"


def _result_text(run: Run) -> str:
    result = run.result
    if result is None:
        return "running"
    if result.ok:
        return f"succeeded in {result.duration_ms} ms"
    return f"{result.outcome}: {clip(result.reason)}" if result.reason else result.outcome


def _handler_refusal(journal: Journal, tasks: TaskRegistry, task: str, what: str) -> str:
    """Why ``logs`` has nothing for a Python handler's task (``""`` for a command's), with
    its last result when the broker still has it."""
    defined = tasks.get(task)
    if defined is None or defined.handler is None:
        return ""
    text = f"{what} {clip(task)!r}, which runs a Python handler: it has no output lines"
    last = next((run for run in journal.recent if run.request.task == task), None)
    return text if last is None else f"{text}; its last result: {_result_text(last)}"


def _ended_refusal(journal: Journal, tasks: TaskRegistry, run: Run) -> str:
    """What ``logs`` says of a run the broker knows ended but the journal does not keep."""
    if run.started_at is None:  # cancelled while queued, or refused at its start
        return f"run {run.id} ended before it started: {_result_text(run)}"
    return _handler_refusal(journal, tasks, run.request.task, f"run {run.id} is of task")
