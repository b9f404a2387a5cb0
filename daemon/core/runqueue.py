"""Bounded FIFO run queue and the run lifecycle: every accepted run gets exactly one result.

Submitting never blocks: a closed queue rejects first (``scheduler is shutting down``), then a
full one (``run queue is full``). Capacity counts waiting runs only; the running one is not
counted, and an idle queue (nothing waiting or running) always takes a run, since that run
starts at once: capacity 0 means "run now or reject", never "reject everything". Listeners are
plain callables invoked synchronously and must not block: the socket server buffers for its
clients, so a slow client never stalls the executor.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from daemon.observe.logs import get_logger, log_enabled
from daemon.wire import protocol

_log = get_logger("runbroker.runqueue")

Trigger = Literal["tick", "external", "schedule", "once"]
RunState = Literal["queued", "running", "done"]

# The reasons are wire vocabulary: protocol.py holds them; they are named here too because the
# queue is where they arise.
REASON_FULL = protocol.REASON_FULL
REASON_CLOSED = protocol.REASON_CLOSED
REASON_SHUTDOWN_CANCEL = protocol.REASON_SHUTDOWN_CANCEL
REASON_USER_CANCEL = protocol.REASON_USER_CANCEL


class Rejected(Exception):
    """A submission the queue did not accept; ``reason`` is the wire reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# The per-run records are slotted and treated as immutable by convention (none is hashed or
# used as a key): a frozen dataclass sets each field through object.__setattr__, 1.5-2 us a
# record, and a run makes two to four of them.
@dataclass(slots=True)
class RunRequest:
    """What a submitter asks for. ``context`` becomes extra ``RUNBROKER_*`` variables."""

    task: str = "default"
    trigger: Trigger = "external"
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    payload: Any = None
    context: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class RunResult:
    ok: bool
    reason: str = ""
    exit_code: int | None = None
    duration_ms: int = 0
    output: dict[str, Any] | None = None
    cancelled: bool = False

    @property
    def cancelled_by_request(self) -> bool:
        """Cancelled by ``runbroker cancel`` (not by a shutdown or the runner itself): a
        database job records such a run and does not retry it."""
        return self.cancelled and self.reason == REASON_USER_CANCEL


@dataclass(slots=True)
class Event:
    """One lifecycle event of a run, as the wire protocol sends it."""

    kind: str
    fields: Mapping[str, Any] = field(default_factory=dict)


Listener = Callable[["Run", Event], None]
# The run's owner (the Postgres runner) hears "started" and "done" by kind alone: no Event and
# no field dict is built for it, and none at all for a run that no listener watches.
Watcher = Callable[["Run", str], None]


def run_log_fields(run: Run) -> dict[str, str]:
    """What every log line about a run carries: its id, task and trigger (and, for a
    database job, the job and the attempt)."""
    request = run.request
    fields = {"run_id": run.id, "task": request.task, "trigger": request.trigger}
    job = request.context.get("JOB")
    if job:
        fields["job"] = job
        fields["attempt"] = request.context.get("ATTEMPT", "")
    return fields


_id_counter = itertools.count(1)
_id_prefix = f"{os.getpid():x}{int(time.time()) & 0xFFFFFF:06x}"


def new_run_id() -> str:
    return f"r{_id_prefix}-{next(_id_counter)}"


class Run:
    """One accepted run. ``finish`` may be called any number of times; only the first counts."""

    def __init__(
        self, request: RunRequest, run_id: str | None = None, watcher: Watcher | None = None
    ) -> None:
        self.id = run_id or new_run_id()
        self.request = request
        self.state: RunState = "queued"
        self.submitted_at = time.time()
        self.started_monotonic: float | None = None
        self.started_at: float | None = None
        self.result: RunResult | None = None
        self._done: asyncio.Event | None = None  # made by the first wait(): most runs have none
        self._listeners: list[Listener] = []
        self._watcher = watcher

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    @property
    def listened(self) -> bool:
        """Whether anyone hears this run's events (else the caller need not build them)."""
        return bool(self._listeners)

    def emit_fields(self, kind: str, fields: Mapping[str, Any]) -> None:
        """Tell every listener the event ``kind`` with the fields of one of ``protocol``'s
        event constructors; a listener that raises is dropped (and logged), never lets the
        exception reach the run's owner (the executor must outlive any listener)."""
        if not self._listeners:
            return
        event = Event(kind, fields)
        for listener in list(self._listeners):
            try:
                listener(self, event)
            except Exception as exc:
                self._listeners.remove(listener)
                _log.error(
                    "run.listener_failed", run_id=self.id, event_kind=kind, error=type(exc).__name__
                )

    def _tell_watcher(self, kind: str) -> None:
        """The watcher hears "started" and "done"; like a listener, it is dropped if it raises."""
        watcher = self._watcher
        if watcher is None:
            return
        try:
            watcher(self, kind)
        except Exception as exc:
            self._watcher = None
            _log.error(
                "run.listener_failed", run_id=self.id, event_kind=kind, error=type(exc).__name__
            )

    def mark_started(self) -> None:
        self.state = "running"
        self.started_monotonic = time.monotonic()
        self.started_at = time.time()
        if self._watcher is not None:
            self._tell_watcher("started")
        if self._listeners:
            self.emit_fields(
                protocol.EVENT_STARTED, protocol.started_event(self.id, self.request.task)
            )

    def elapsed_s(self) -> float:
        if self.started_monotonic is None:
            return 0.0
        return time.monotonic() - self.started_monotonic

    def finish(self, result: RunResult) -> bool:
        """Record the result and emit ``done``; returns False if the run already had one."""
        if self.result is not None:
            return False
        self.result = result
        self.state = "done"
        if self._watcher is not None:
            self._tell_watcher("done")
            self._watcher = None
        if self._listeners:
            fields = protocol.done_event(
                self.id,
                result.ok,
                result.reason,
                result.duration_ms,
                result.exit_code,
                result.output,
            )
            self.emit_fields(protocol.EVENT_DONE, fields)
            self._listeners.clear()
        if self._done is not None:
            self._done.set()
        return True

    async def wait(self) -> RunResult:
        if self.result is None:
            if self._done is None:
                self._done = asyncio.Event()
            await self._done.wait()
        assert self.result is not None
        return self.result

    @property
    def is_done(self) -> bool:
        return self.result is not None


@dataclass(frozen=True)
class QueueStats:
    capacity: int
    waiting: int
    running: str | None
    accepted: int
    rejected_full: int
    rejected_closed: int
    finished: int
    closed: bool


class RunQueue:
    """Bounded FIFO of waiting runs plus the one the executor holds."""

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError("queue capacity must be >= 0")
        self.capacity = capacity
        self._waiting: collections.OrderedDict[str, Run] = collections.OrderedDict()
        self._taker: asyncio.Future[None] | None = None  # take() waiting for a run
        self._loop: asyncio.AbstractEventLoop | None = None  # the taker's, once it waits
        self._closed = False
        self.current: Run | None = None
        self._accepted = 0
        self._rejected_full = 0
        self._rejected_closed = 0
        self._finished = 0
        self._on_finish: list[Callable[[Run], None]] = []
        # run.queued lines (info) are not even built when LOG_LEVEL drops them.
        self.log_runs = log_enabled(logging.INFO)

    # -- submitters -------------------------------------------------------------------------
    def submit(
        self,
        request: RunRequest,
        listener: Listener | None = None,
        watcher: Watcher | None = None,
    ) -> Run:
        """Accept a run or raise ``Rejected``; never blocks. ``watcher`` hears the run's
        "started" and "done" by kind (see ``Watcher``)."""
        if self._closed:
            self._rejected_closed += 1
            raise Rejected(REASON_CLOSED)
        idle = self.current is None and not self._waiting
        if len(self._waiting) >= self.capacity and not idle:
            self._rejected_full += 1
            raise Rejected(REASON_FULL)
        run = Run(request, watcher=watcher)
        self._waiting[run.id] = run
        self._accepted += 1
        if self._taker is not None:
            self._wake_taker()
        if self.log_runs:
            _log.info("run.queued", **run_log_fields(run))
        if listener is not None:
            run._listeners.append(listener)
            run.emit_fields(
                protocol.EVENT_QUEUED,
                protocol.queued_event(run.id, len(self._waiting), request.task),
            )
        return run

    def room(self) -> int:
        """How many more runs would be accepted now."""
        if self._closed:
            return 0
        idle = self.current is None and not self._waiting
        return max(self.capacity - len(self._waiting), 1 if idle else 0)

    # -- the executor -----------------------------------------------------------------------
    async def take(self) -> Run | None:
        """Next waiting run in arrival order, or None once the queue is closed and drained."""
        while True:
            if self._waiting:
                _, run = self._waiting.popitem(last=False)
                self.current = run
                return run
            if self._closed:
                return None
            loop = self._loop
            if loop is None:  # looked up once: on CPython 3.11 each lookup is a getpid()
                loop = self._loop = asyncio.get_running_loop()
            self._taker = loop.create_future()
            try:
                await self._taker
            finally:
                self._taker = None

    def _wake_taker(self) -> None:
        taker = self._taker
        if taker is not None and not taker.done():
            taker.set_result(None)

    def release(self, run: Run) -> None:
        """The executor is done with ``run`` (which must have a result by now)."""
        if self.current is run:
            self.current = None
        self._finished += 1
        for callback in list(self._on_finish):
            callback(run)

    def on_finish(self, callback: Callable[[Run], None]) -> None:
        self._on_finish.append(callback)

    # -- control ----------------------------------------------------------------------------
    def cancel_waiting(self, run_id: str, reason: str = REASON_USER_CANCEL) -> Run | None:
        """Remove a waiting run and give it a cancelled result; None if it is not waiting."""
        run = self._waiting.pop(run_id, None)
        if run is None:
            return None
        run.finish(RunResult(ok=False, reason=reason, cancelled=True))
        _log.warning("run.done", **run_log_fields(run), ok=False, reason=reason, cancelled=True)
        self._finished += 1
        for callback in list(self._on_finish):
            callback(run)
        return run

    def close(self) -> None:
        """Stop accepting. Waiting runs stay until ``cancel_all`` or until taken."""
        self._closed = True
        self._wake_taker()

    def cancel_all(self, reason: str = REASON_SHUTDOWN_CANCEL) -> int:
        ids = list(self._waiting)
        for run_id in ids:
            self.cancel_waiting(run_id, reason)
        self._wake_taker()
        return len(ids)

    @property
    def closed(self) -> bool:
        return self._closed

    def waiting_count(self) -> int:
        return len(self._waiting)

    def waiting(self) -> Iterator[Run]:
        return iter(list(self._waiting.values()))

    def find(self, run_id: str) -> Run | None:
        if self.current is not None and self.current.id == run_id:
            return self.current
        return self._waiting.get(run_id)

    def is_pending(self, task: str) -> bool:
        """True when a run of ``task`` is waiting or running (the ticker's overlap check)."""
        if self.current is not None and self.current.request.task == task:
            return True
        return any(run.request.task == task for run in self._waiting.values())

    def statistics(self) -> QueueStats:
        return QueueStats(
            capacity=self.capacity,
            waiting=len(self._waiting),
            running=self.current.id if self.current else None,
            accepted=self._accepted,
            rejected_full=self._rejected_full,
            rejected_closed=self._rejected_closed,
            finished=self._finished,
            closed=self._closed,
        )
