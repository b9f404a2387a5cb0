"""One accepted run and its lifecycle: queued, running, done, with exactly one result.

Only the first ``finish`` counts. Listeners are called synchronously and must not block, and
one that raises is dropped, so that no listener can reach the executor.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from daemon.core.process.flow import OutputFlow
from daemon.core.runqueue.records import Event, RunRequest, RunResult, RunState
from daemon.log.logs import get_logger
from daemon.wire import protocol

_log = get_logger("runbroker.runqueue")

Listener = Callable[["Run", Event], None]
# The run's owner (the Postgres runner) hears "started" and "done" by kind alone: no Event and
# no field dict is built for it, and none at all for a run that no listener watches.
Watcher = Callable[["Run", str], None]


def run_log_fields(run: Run) -> dict[str, str]:
    """What every log line about a run carries: its id, task and trigger (and, for a
    database job, the job and the attempt)."""
    request = run.request
    fields = {"run_id": run.id, "task": request.task, "trigger": request.trigger}
    job = request.job
    if job:
        fields["job"] = job
        fields["attempt"] = "" if request.attempt is None else str(request.attempt)
    return fields


def output_log_fields(run: Run) -> dict[str, str]:
    """What a ``run.output`` log line carries of its run: ``run_log_fields`` but the trigger,
    which the run's other lines say (a chatty job's log is mostly these lines)."""
    fields = run_log_fields(run)
    del fields["trigger"]
    return fields


_id_counter = itertools.count(1)
_id_prefix = f"{os.getpid():x}{int(time.time()) & 0xFFFFFF:06x}"


def new_run_id() -> str:
    return f"r{_id_prefix}-{next(_id_counter)}"


class Run:
    """One accepted run. Only the first ``finish`` counts."""

    # Slotted: one is made per run, and its attributes are read at every event.
    __slots__ = (
        "_done",
        "_listeners",
        "_watcher",
        "flow",
        "id",
        "request",
        "result",
        "started_at",
        "started_monotonic",
        "state",
        "submitted_at",
    )

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
        self.flow: OutputFlow | None = None  # a command run's: who holds its output back

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    @property
    def listeners(self) -> list[Listener]:
        """The live list of listeners, the same list object for the run's whole life: a hot
        path keeps it and tests it, without the call ``listened`` costs, at each line."""
        return self._listeners

    @property
    def listened(self) -> bool:
        """Whether anyone hears this run's events (else the caller need not build them)."""
        return bool(self._listeners)

    def emit_fields(self, kind: str, fields: Mapping[str, Any]) -> None:
        """Tell every listener the event ``kind`` with the fields of one of ``protocol``'s
        constructors.

        A listener that raises is dropped and logged, because the executor must outlive any
        listener."""
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
        """Tell the watcher "started" and "done". Like a listener, it is dropped if it raises."""
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
        """Record the result and emit ``done``. False if the run already had one."""
        if self.result is not None:
            return False
        self.result = result
        self.state = "done"
        if self._watcher is not None:
            self._tell_watcher("done")
            self._watcher = None
        if self._listeners:
            fields = result.done_fields(self.id)
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
