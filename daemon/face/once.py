"""``runbroker once [TASK] [--skip]``: run a task once in this process, for external schedulers.

Concurrent callers are coalesced through ``coord.Exclusive``: a caller that finds a run in
flight records a rerun and exits 0 at once, since that run covers it; with ``--skip`` it exits
3, as a ``trigger`` its ``on_busy`` skipped does. Host cron mails whatever a job prints, so
``once`` prints the job's output and its own errors, and its log lines only at the
``RUNBROKER_LOG_LEVEL`` one sets.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from typing import NoReturn

from daemon.broker.engine import Engine
from daemon.coord.exclusive import Exclusive
from daemon.coord.outcome import Outcome
from daemon.core.runqueue import Event, Run, RunRequest, RunResult
from daemon.core.tasks import TaskRegistry
from daemon.exits import (
    EXIT_BROKEN_PIPE,
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SKIPPED,
    EXIT_TEMPFAIL,
)
from daemon.log.logs import configure_logging, get_logger
from daemon.settings import Settings, SettingsError, load_settings
from daemon.taskfile import TaskConfigError, build_registry
from daemon.wire.protocol import EVENT_OUTPUT
from daemon.wire.reasons import REASON_INTERRUPTED

log = get_logger("runbroker.once")

QUIET_LOG_LEVEL = "error"  # without RUNBROKER_LOG_LEVEL: what a failed run says is its own line


class _Interrupts:
    """SIGTERM and SIGINT only set a flag here: the gate reads it between reruns."""

    def __init__(self) -> None:
        self.received = False

    def handle(self, _signum: int, _frame: object) -> None:
        self.received = True

    def open(self) -> bool:
        return not self.received


class _Output:
    """Shows the job's output lines as they come. Once our own output is closed (``runbroker
    once | head -1``) it stops printing, quietly: the run goes on and this call exits 141."""

    def __init__(self) -> None:
        self.closed = False

    def __call__(self, _run: Run, event: Event) -> None:
        if event.kind != EVENT_OUTPUT or self.closed:
            return
        stream = sys.stderr if event.fields.get("stream") == "stderr" else sys.stdout
        try:
            stream.write("\n".join(event.fields["lines"]) + "\n")
            stream.flush()
        except BrokenPipeError:
            self.closed = True


async def run_single(
    tasks: TaskRegistry,
    request: RunRequest,
    settings: Settings,
    interrupts: _Interrupts,
    output: _Output | None = None,
) -> RunResult:
    """One run through the same executor the daemon uses, in this process."""
    engine = Engine.for_once(settings, tasks)
    queue, executor = engine.queue, engine.executor
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    if interrupts.received:
        stop.set()
    run = queue.submit(request, output or _Output())
    queue.close()

    async def cancel_on_signal() -> None:
        await stop.wait()
        interrupts.received = True
        executor.cancel_current(None, REASON_INTERRUPTED)

    watcher = asyncio.create_task(cancel_on_signal())
    forever = asyncio.create_task(executor.run_forever())
    try:
        result = await run.wait()
        # A handler given up on (a stray) may never end: it is waited for within the shutdown
        # budget, as the daemon's exit waits for it, and then left behind with the process.
        ended, _ = await asyncio.wait({forever}, timeout=settings.shutdown_timeout_s)
        if not ended:
            _exit_without_strays(request.task, result, settings.shutdown_timeout_s)
        forever.result()
    finally:
        forever.cancel()  # nothing to cancel once it has ended; else what ended this call
        watcher.cancel()
        await asyncio.gather(watcher, forever, return_exceptions=True)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
            signal.signal(signum, interrupts.handle)  # for the time between reruns
    return result


def _exit_without_strays(task: str, result: RunResult, budget_s: float) -> NoReturn:
    """End the process now: the event loop's own end would wait for the stray for good."""
    print(f"runbroker: failed: {result.reason}", file=sys.stderr)
    print(
        f"runbroker: a handler of {task!r} given up on still runs {budget_s:g}s later "
        "(RUNBROKER_SHUTDOWN_TIMEOUT); exiting without it",
        file=sys.stderr,
    )
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(EXIT_FAILED if not result.ok else EXIT_OK)


def main(task: str, *, skip: bool = False) -> int:
    interrupts = _Interrupts()
    signal.signal(signal.SIGTERM, interrupts.handle)
    signal.signal(signal.SIGINT, interrupts.handle)
    try:
        settings = load_settings()
        tasks = build_registry(
            settings.default_command(),
            settings.tasks_file,
            file_required=settings.tasks_file_required,
        )
    except (SettingsError, TaskConfigError, ValueError) as exc:
        print(f"runbroker: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    asked = "log_level" in settings.model_fields_set  # RUNBROKER_LOG_LEVEL is set
    level = settings.log_level if asked else QUIET_LOG_LEVEL
    configure_logging(settings.log_format, level, stream=sys.stderr)
    refusal = tasks.refusal(RunRequest(task=task))
    if refusal is not None:
        print(f"runbroker: {refusal}", file=sys.stderr)
        return EXIT_CONFIG

    import uvloop

    output = _Output()

    def job() -> bool:
        request = RunRequest(task=task, trigger="once")
        result = uvloop.run(run_single(tasks, request, settings, interrupts, output))
        if not result.ok:
            print(f"runbroker: failed: {result.reason}", file=sys.stderr)
        return result.ok

    exclusive = Exclusive(settings.lock_directory / f"once-{task}", gate=interrupts.open)
    result = exclusive.run_or_skip(job) if skip else exclusive.run(job)
    log.info("once.done", task=task, outcome=str(result.outcome), runs=result.runs)
    if output.closed:
        return EXIT_BROKEN_PIPE
    if result.outcome in (Outcome.RAN, Outcome.RAN_QUEUED):
        return EXIT_OK if result.last_ok else EXIT_FAILED
    print(f"runbroker: {_NOT_RUN[result.outcome].format(task=task)}", file=sys.stderr)
    if result.outcome == Outcome.GATED:
        return EXIT_TEMPFAIL
    if result.outcome == Outcome.SKIPPED:
        return EXIT_SKIPPED
    return EXIT_OK  # queued or discarded: the rerun after the run in flight covers this call


# What a caller that did not run the task was told, in words (the JSON log line has the rest).
_NOT_RUN = {
    Outcome.QUEUED: "a run of {task!r} is in flight; queued a rerun to start after it",
    Outcome.DISCARDED: (
        "a run of {task!r} is in flight and a rerun is already queued; that rerun covers this call"
    ),
    Outcome.SKIPPED: "skipped: a run of {task!r} is in flight (--skip)",
    Outcome.GATED: "not run: a signal arrived before the run of {task!r} could start",
}
