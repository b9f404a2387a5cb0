"""An executor of virtual runs: it takes the queue's runs one at a time, as the daemon's does,
and each lasts the virtual time a test says, so slots and busy policies can be seen without
running a job.

A run lasts ``run_s`` (seconds, a ``timedelta``, or a callable given each ``RunStart``); past
its task's ``timeout`` it ends ``timed_out`` there, as the daemon would end it. A cancel
(``on_busy = "replace"``, a shutdown) ends the running run at once with its reason: a job's
grace is not simulated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from daemon.core.runqueue import Run, RunQueue, RunResult
from daemon.testing.virtual_time import VirtualTime
from daemon.wire.reasons import timed_out_reason


@dataclass(frozen=True)
class RunStart:
    """A run as it starts: what a ``run_s`` callable is given to say how long it lasts."""

    task: str
    trigger: str  # "tick" (a slot's run, a catch-up's too) or "external" (a trigger)
    started_at: datetime  # UTC
    index: int  # 1 for its task's first run in the simulation, 2 for the next...


Duration = float | timedelta
RunDuration = Duration | Callable[[RunStart], Duration]


def _seconds(duration: Duration) -> float:
    seconds = duration.total_seconds() if isinstance(duration, timedelta) else float(duration)
    if seconds < 0:
        raise ValueError(f"a run cannot last less than nothing: {duration!r}")
    return seconds


class VirtualExecutor:
    """Runs of ``queue`` one at a time, each ``run_s`` of ``time`` long; ``timeouts_s`` holds
    each task's ``timeout`` (absent or None: none), ``started_at`` when each run started,
    ``started`` how many runs of each task started (shared across a simulation's lives).
    ``cancel_running`` is the daemon executor's ``cancel_current`` for a ``BusyPolicy``."""

    def __init__(
        self,
        queue: RunQueue,
        time: VirtualTime,
        run_s: RunDuration,
        timeouts_s: Mapping[str, float | None],
        started_at: dict[str, datetime] | None = None,
        started: dict[str, int] | None = None,
    ) -> None:
        self.queue = queue
        self.time = time
        self.run_s = run_s
        self.timeouts_s = timeouts_s
        self.started = {} if started is None else started  # task: how many runs started
        self.started_at = {} if started_at is None else started_at  # run id: when it started
        self._attempt: asyncio.Task[None] | None = None  # the running run's virtual sleep
        self._cancel_reason = ""

    def _duration_s(self, run: Run) -> float:
        task = run.request.task
        self.started[task] = index = self.started.get(task, 0) + 1
        run_s = self.run_s
        if callable(run_s):
            start = RunStart(task, run.request.trigger, self.time.clock(), index)
            return _seconds(run_s(start))
        return _seconds(run_s)

    async def run_forever(self) -> None:
        """Take runs until the queue is closed and drained."""
        while (run := await self.queue.take()) is not None:
            try:
                await self._execute(run)
            finally:
                self.queue.release(run)

    async def _execute(self, run: Run) -> None:
        run.mark_started()
        self.started_at[run.id] = self.time.clock()
        duration_s = self._duration_s(run)
        timeout_s = self.timeouts_s.get(run.request.task)
        timed_out = timeout_s is not None and duration_s > timeout_s
        if timeout_s is not None and timed_out:
            duration_s = timeout_s
        self._cancel_reason = ""
        self._attempt = attempt = asyncio.get_running_loop().create_task(
            self.time.sleep(duration_s)
        )
        try:
            await attempt
        except asyncio.CancelledError:
            if not self._cancel_reason:
                raise  # the simulation's own end
            run.finish(RunResult(ok=False, reason=self._cancel_reason, cancelled=True))
            return
        finally:
            self._attempt = None
        if timed_out:
            reason = timed_out_reason(timeout_s or 0.0)
            run.finish(RunResult(ok=False, reason=reason, timed_out=True))
        else:
            run.finish(RunResult(ok=True))

    def cancel_running(self, run_id: str, reason: str) -> str:
        """End the running run ``run_id`` with ``reason``: "requested", or "" (not running)."""
        current = self.queue.current
        attempt = self._attempt
        if current is None or current.id != run_id or attempt is None or attempt.done():
            return ""
        self._cancel_reason = reason
        attempt.cancel()
        return "requested"
