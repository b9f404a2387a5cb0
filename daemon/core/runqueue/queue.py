"""The bounded FIFO run queue: every accepted run gets exactly one result.

Submitting never blocks. Capacity counts waiting runs only, so that capacity 0 means "run now
or reject", never "reject everything". Listeners are called synchronously and must not block,
so that a slow client never stalls the executor, and one that raises never reaches it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from daemon.core.runqueue.records import RunRequest, RunResult
from daemon.core.runqueue.run import Listener, Run, Watcher, run_log_fields
from daemon.core.subscribers import Subscribers
from daemon.log.logs import get_logger, log_enabled
from daemon.wire import protocol
from daemon.wire.reasons import (
    CODE_QUEUE_FULL,
    CODE_SHUTTING_DOWN,
    REASON_CLOSED,
    REASON_FULL,
    REASON_SHUTDOWN_CANCEL,
    REASON_USER_CANCEL,
)

_log = get_logger("runbroker.runqueue")


class Rejected(Exception):
    """A submission the queue did not accept (``TaskRefused``: its task did not).

    ``reason`` is the wire reason, ``code`` the code beside it."""

    def __init__(self, reason: str, code: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


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
        self._on_finish: Subscribers[Run] = Subscribers("run.finished")
        self._on_submit: Subscribers[Run] = Subscribers("run.submitted")
        # run.queued lines (info) are not even built when LOG_LEVEL drops them.
        self.log_runs = log_enabled(logging.INFO)

    # -- submitters -------------------------------------------------------------------------
    def submit(
        self,
        request: RunRequest,
        listener: Listener | None = None,
        watcher: Watcher | None = None,
    ) -> Run:
        """Accept a run or raise ``Rejected``, never blocking.

        ``watcher`` hears the run's "started" and "done" by kind (see ``Watcher``)."""
        if self._closed:
            self._rejected_closed += 1
            raise Rejected(REASON_CLOSED, CODE_SHUTTING_DOWN)
        idle = self.current is None and not self._waiting
        if len(self._waiting) >= self.capacity and not idle:
            self._rejected_full += 1
            raise Rejected(REASON_FULL, CODE_QUEUE_FULL)
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
        self._on_submit.tell(run)
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
            run = self.take_waiting()
            if run is not None:
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

    def take_waiting(self) -> Run | None:
        """The next waiting run, without waiting for one (None: none waits): the executor's
        runs that follow one another in a turn cost no coroutine each."""
        if not self._waiting:
            return None
        _, run = self._waiting.popitem(last=False)
        self.current = run
        return run

    def _wake_taker(self) -> None:
        taker = self._taker
        if taker is not None and not taker.done():
            taker.set_result(None)

    def release(self, run: Run) -> None:
        """The executor is done with ``run`` (which must have a result by now)."""
        if self.current is run:
            self.current = None
        self._finished += 1
        self._on_finish.tell(run)

    def on_finish(self, callback: Callable[[Run], None]) -> None:
        """``callback`` hears every run the queue is done with (its result told); one that
        raises is logged once, and never reaches the executor."""
        self._on_finish.add(callback)

    def on_submit(self, callback: Callable[[Run], None]) -> None:
        """``callback`` hears every run accepted from now on (``logs -f`` waiting for a
        task's first run), until ``off_submit``."""
        self._on_submit.add(callback)

    def off_submit(self, callback: Callable[[Run], None]) -> None:
        self._on_submit.remove(callback)

    # -- control ----------------------------------------------------------------------------
    def cancel_waiting(self, run_id: str, reason: str = REASON_USER_CANCEL) -> Run | None:
        """Remove a waiting run and give it a cancelled result. None if it is not waiting."""
        run = self._waiting.pop(run_id, None)
        if run is None:
            return None
        run.finish(RunResult(ok=False, reason=reason, cancelled=True))
        _log.warning("run.done", **run_log_fields(run), ok=False, reason=reason, cancelled=True)
        self._finished += 1
        self._on_finish.tell(run)
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
