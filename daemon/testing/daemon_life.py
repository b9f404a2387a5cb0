"""One life of a simulated daemon, from its start to its clean stop: the daemon's own ticker,
busy policy, slot record and state directory, composed as ``broker/app.py`` composes them, on
virtual time, with virtual jobs; and the ``Recorder`` of what every life settled.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from daemon.core.runqueue import Rejected, Run, RunQueue, RunRequest
from daemon.core.tasks import Task
from daemon.core.ticker.busy import BusyPolicy
from daemon.core.ticker.clock import TickClock
from daemon.core.ticker.slot_state import SlotState
from daemon.core.ticker.slots import Slot, SlotRecord
from daemon.core.ticker.ticker import Ticker, TickPlan
from daemon.testing.clock import ManualClock
from daemon.testing.slot_results import (
    NextPlanned,
    SettledSlot,
    SimulatedRun,
    SlotSimulation,
    TriggerAnswer,
)
from daemon.testing.virtual_runs import RunDuration, VirtualExecutor
from daemon.testing.virtual_time import VirtualTime
from daemon.wire.reasons import CODE_SKIPPED, REASON_SHUTDOWN_CANCEL

KEPT_PER_TASK = 1  # the record's memory; the recorder hears every slot


def _utc(unix_s: float) -> datetime:
    return datetime.fromtimestamp(unix_s, UTC)


class Recorder:
    """What every life settled and ran, in virtual time; only what was planned or queued by
    ``until`` goes into the ``SlotSimulation``."""

    def __init__(self, clock: ManualClock, until: datetime) -> None:
        self.clock = clock
        self.until = until
        self.slots: list[SettledSlot] = []
        self.runs: list[SimulatedRun] = []
        self.triggers: list[TriggerAnswer] = []
        self.queued_at: dict[str, datetime] = {}
        self.started_at: dict[str, datetime] = {}
        self.started: dict[str, int] = {}  # task: how many of its runs started

    def settled(self, slot: Slot) -> None:
        self.slots.append(
            SettledSlot(
                slot.task,
                _utc(slot.planned_at),
                slot.outcome,
                slot.reason,
                slot.count,
                slot.note,
                slot.run_id,
                slot.result,
                _utc(slot.settled_at),
            )
        )

    def queued(self, run: Run) -> None:
        self.queued_at[run.id] = self.clock()

    def ended(self, run: Run) -> None:
        result = run.result
        if result is None:  # the queue tells a run's end after its result: never here
            return
        request = run.request
        self.runs.append(
            SimulatedRun(
                run.id,
                request.task,
                request.trigger,
                self.queued_at[run.id],
                self.started_at.get(run.id),
                self.clock(),
                result.outcome,
                result.reason,
            )
        )

    def simulation(self, next_planned: NextPlanned) -> SlotSimulation:
        until = self.until
        slots = [slot for slot in self.slots if slot.planned_at <= until]
        runs = [run for run in self.runs if run.queued_at <= until]
        return SlotSimulation(slots, runs, list(self.triggers), next_planned)


class DaemonLife:
    """The daemon's parts for ticking ``plans`` of ``tasks`` from ``start`` to ``stop``."""

    def __init__(
        self,
        tasks: Mapping[str, Task],
        plans: list[TickPlan],
        time: VirtualTime,
        recorder: Recorder,
        *,
        run_s: RunDuration,
        queue_capacity: int,
        state_path: Path | None,
        jitter: float,
        rng: random.Random,
    ) -> None:
        self.tasks = tasks
        self.time = time
        self.recorder = recorder
        self.queue = queue = RunQueue(queue_capacity)
        timeouts_s = {name: task.timeout_s for name, task in tasks.items()}
        self.executor = VirtualExecutor(
            queue, time, run_s, timeouts_s, recorder.started_at, recorder.started
        )
        self.busy = BusyPolicy(queue, self.executor.cancel_running)
        record = SlotRecord(KEPT_PER_TASK, clock=lambda: time.clock().timestamp())
        record.listeners.add(recorder.settled)
        queue.on_submit(recorder.queued)
        queue.on_finish(recorder.ended)
        self.state = None if state_path is None else SlotState(state_path)
        self.ticker = Ticker(
            queue,
            plans,
            jitter=jitter,
            rng=rng,
            slots=record,
            busy=self.busy,
            state=self.state,
            clock=TickClock(sleep=time.sleep, now=time.clock, monotonic=time.monotonic),
        )
        self._ticking: asyncio.Task[None] | None = None
        self._executing: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Open the state directory (its catch-up happens as the ticker starts), then tick."""
        if self.state is not None:
            loaded = self.state.open()
            if loaded.problem:
                raise RuntimeError(loaded.problem)
            self.state.forget({plan.task for plan in self.ticker.plans})
        loop = asyncio.get_running_loop()
        self._executing = loop.create_task(self.executor.run_forever())
        self._ticking = loop.create_task(self.ticker.run())
        await self.time.quiet()

    def trigger(self, name: str) -> None:
        """``runbroker trigger NAME``, submitted as the socket server submits it."""
        recorder = self.recorder
        at = self.time.clock()
        on_busy = self.tasks[name].on_busy
        request = RunRequest(task=name, trigger="external")
        pending = self.queue.is_pending(name)
        try:
            if on_busy is None:
                run, joined = self.queue.submit(request), False
            else:
                admitted = self.busy.submit(request, on_busy)
                run, joined = admitted.run, admitted.joined
        except Rejected as exc:
            answer = "skipped" if exc.code == CODE_SKIPPED else "refused"
            recorder.triggers.append(TriggerAnswer(at, name, answer, reason=exc.reason))
            return
        answer = "queued"
        if joined:
            answer = "joined"
        elif on_busy == "replace" and pending:
            answer = "replaced"
        recorder.triggers.append(TriggerAnswer(at, name, answer, run.id))

    async def drain(self) -> None:
        """Go on (ticking, without triggers) until every run queued by now has ended."""
        ended: set[str] = set()
        owed = {run.id for run in self.queue.waiting()}
        if self.queue.current is not None:
            owed.add(self.queue.current.id)
        self.queue.on_finish(lambda run: ended.add(run.id))
        executing = self._executing
        while owed - ended and executing is not None and not executing.done():
            if not await self.time.step():
                return  # a ``run_s`` that raised ended the executor: ``stop`` raises it

    async def stop(self) -> None:
        """A clean stop, in the shutdown's order: no new runs, the ticker stopped, the queued
        runs cancelled, the running one stopped; then the state written and unlocked."""
        queue = self.queue
        queue.close()
        if self._ticking is not None:
            self._ticking.cancel()
        queue.cancel_all(REASON_SHUTDOWN_CANCEL)
        if queue.current is not None:
            self.executor.cancel_running(queue.current.id, REASON_SHUTDOWN_CANCEL)
        for task in (self._ticking, self._executing):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.state is not None:
            self.state.close()
