"""A task's busy policy: what a tick or a trigger does when the task already has a run queued
or running (its ``on_busy`` in the tasks file).

``queue`` queues one more run (a trigger's way when the task sets nothing); ``skip`` submits
nothing (a trigger is refused with ``CODE_SKIPPED``; a tick's slot is skipped, which is also a
tick's way when the task sets nothing); ``coalesce`` joins the task's queued run of the same
request (the same args and env: a run with other ones would not do what was asked), if there
is one (a trigger hears that run's events, its output and its result), else queues one;
``replace`` cancels the task's queued and running runs (``REASON_REPLACED``) and
queues the new one. Only a task that sets a policy pays for the check, one look through the
waiting runs (at most ``RUNBROKER_QUEUE_CAPACITY``); a task without one is submitted as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from daemon.core.runqueue import Event, Listener, Rejected, Run, RunQueue, RunRequest, Watcher
from daemon.log.logs import get_logger
from daemon.wire import protocol
from daemon.wire.reasons import CODE_SKIPPED, REASON_REPLACED, busy_skipped_reason

log = get_logger("runbroker.busy")

OnBusy = Literal["queue", "skip", "coalesce", "replace"]
ON_BUSY: tuple[OnBusy, ...] = ("queue", "skip", "coalesce", "replace")

CancelRunning = Callable[[str, str], str]  # Executor.cancel_current(run_id, reason)


class Skipped(Rejected):
    """Not submitted: the task is busy and its policy is ``skip``."""

    def __init__(self, task: str) -> None:
        super().__init__(busy_skipped_reason(task), CODE_SKIPPED)


@dataclass(frozen=True, slots=True)
class Admitted:
    """What a busy-aware submission came to: ``run`` is the new run, or with ``joined`` the
    task's queued run that the request joined (``coalesce``)."""

    run: Run
    joined: bool = False


class BusyPolicy:
    """Submissions under a task's ``on_busy``; ``cancel_running`` stops the running run."""

    def __init__(self, queue: RunQueue, cancel_running: CancelRunning) -> None:
        self.queue = queue
        self.cancel_running = cancel_running

    def submit(
        self,
        request: RunRequest,
        on_busy: OnBusy,
        listener: Listener | None = None,
        watcher: Watcher | None = None,
    ) -> Admitted:
        """Submit ``request`` as ``on_busy`` says; raises ``Rejected`` (``Skipped``: the
        policy skipped it; else the queue refused it)."""
        queue = self.queue
        if on_busy == "queue" or not queue.is_pending(request.task):
            return Admitted(queue.submit(request, listener, watcher))
        if on_busy == "skip":
            raise Skipped(request.task)
        if on_busy == "coalesce":
            queued = self.queued_run(request)
            if queued is None:  # none of this request waits: the one queued now covers it
                return Admitted(queue.submit(request, listener, watcher))
            if listener is not None:
                _join(queued, listener, self.position(queued))
            log.info("run.joined", run_id=queued.id, task=request.task, trigger=request.trigger)
            return Admitted(queued, joined=True)
        return Admitted(self._replace(request, listener, watcher))

    def queued_run(self, request: RunRequest) -> Run | None:
        """The last queued run of the same request: its task, args and env (None: none)."""
        found = None
        for run in self.queue.waiting():
            if _same_request(run.request, request):
                found = run
        return found

    def position(self, run: Run) -> int:
        for position, waiting in enumerate(self.queue.waiting(), start=1):
            if waiting is run:
                return position
        return 0

    def _replace(
        self, request: RunRequest, listener: Listener | None, watcher: Watcher | None
    ) -> Run:
        """The task's queued runs cancelled, the new one queued, then the running one stopped:
        it runs after the running one has ended, in its turn."""
        queue = self.queue
        task = request.task
        for run in queue.waiting():
            if run.request.task == task:
                queue.cancel_waiting(run.id, REASON_REPLACED)
        run = queue.submit(request, listener, watcher)
        current = queue.current
        if current is not None and current.request.task == task and not current.is_done:
            log.info("run.replacing", run_id=current.id, task=task, by=run.id)
            self.cancel_running(current.id, REASON_REPLACED)
        return run


def _same_request(queued: RunRequest, request: RunRequest) -> bool:
    """Whether a run of ``queued`` does what ``request`` asks (the trigger kind aside)."""
    return (
        queued.task == request.task
        and queued.args == request.args
        and dict(queued.env) == dict(request.env)
    )


def _join(run: Run, listener: Listener, position: int) -> None:
    """``listener`` hears ``run``'s events from now on, starting with its ``queued``."""
    run.subscribe(listener)
    fields = protocol.queued_event(run.id, position, run.request.task)
    listener(run, Event(protocol.EVENT_QUEUED, fields))
