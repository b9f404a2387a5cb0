"""A tick, settled as a slot: the ticker's submissions under the task's busy policy and start
deadline, each slot given its one outcome in the ``SlotRecord``.

A tick is late past its ``start_deadline`` when it fires (a blocked loop, a suspended host):
its slot is missed and nothing runs. A tick's run that is still queued at its deadline (the
queue was busy with a long job) leaves the queue with ``REASON_MISSED`` and its slot is missed;
one that starts in time settles its slot as ``ran`` with its result. A deadline is watched by a
task of the ticker's own (with the ticker's sleep, so a test's clock moves it), stopped when
the run starts. The slots a late tick stands for (``cover``) take its outcome: coalesced into
its run, or skipped or missed as it was.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from daemon.core.runqueue import Rejected, Run, RunRequest
from daemon.core.ticker.busy import BusyPolicy, OnBusy
from daemon.core.ticker.clock import TickClock
from daemon.core.ticker.slots import COALESCED, MISSED, RAN, SKIPPED, Slot, SlotRecord
from daemon.log.logs import get_logger
from daemon.wire.reasons import REASON_MISSED

log = get_logger("runbroker.ticker")

TICK_ON_BUSY: OnBusy = "skip"  # a tick's way when its task sets no ``on_busy``
REASON_PENDING = "previous run still queued or running"

Spawn = Callable[[Coroutine[Any, Any, None]], "asyncio.Task[None] | None"]


def late_reason(late_s: float, deadline_s: float) -> str:
    return f"fired {late_s:g}s after its planned time, past its start deadline of {deadline_s:g}s"


def queued_too_long_reason(deadline_s: float) -> str:
    return f"still queued {deadline_s:g}s after its planned time (its start deadline)"


class TickSlots:
    """Submits ticks and settles their slots; ``spawn`` starts a deadline's watch (None when
    the ticker is not running: then only a tick that fires late is missed)."""

    def __init__(self, record: SlotRecord, busy: BusyPolicy, clock: TickClock) -> None:
        self.record = record
        self.busy = busy  # its queue is the one ticks go into
        self.clock = clock
        self.spawn: Spawn | None = None

    def fire(
        self,
        task: str,
        planned_at: float,
        on_busy: OnBusy | None = None,
        start_deadline_s: float | None = None,
        note: str = "",
        outcome: str = RAN,
    ) -> Slot:
        """One tick of ``task`` planned at ``planned_at`` (Unix seconds; ``note``: what the
        schedule did to that time): its slot, settled, or left open for its run's result
        (``outcome``: ``caught_up`` for the run a restart catches up with)."""
        record = self.record
        slot = record.open(task, planned_at, note)
        if start_deadline_s is not None:
            late_s = self.clock.wall_s() - planned_at
            if late_s > start_deadline_s:
                record.settle(slot, MISSED, reason=late_reason(late_s, start_deadline_s))
                return slot
        policy = on_busy or TICK_ON_BUSY
        if policy == "skip" and self.busy.queue.is_pending(task):
            log.info("tick.skipped", task=task, reason=REASON_PENDING)
            record.settle(slot, SKIPPED, reason=REASON_PENDING)
            return slot
        watch: list[asyncio.Task[None] | None] = [None]

        def started() -> None:
            if watch[0] is not None:
                watch[0].cancel()

        watcher = record.follow(slot, outcome, on_start=started)
        try:
            admitted = self.busy.submit(
                RunRequest(task=task, trigger="tick"), policy, None, watcher
            )
        except Rejected as exc:
            log.warning("tick.skipped", task=task, reason=exc.reason)
            record.settle(slot, SKIPPED, reason=exc.reason)
            return slot
        run = admitted.run
        if admitted.joined:
            record.settle(slot, COALESCED, run_id=run.id, reason="joined the task's queued run")
            return slot
        log.info("tick.fired", task=task, run_id=run.id)
        slot.run_id = run.id
        if start_deadline_s is not None and self.spawn is not None and not run.is_done:
            wait_s = planned_at + start_deadline_s - self.clock.wall_s()
            watch[0] = self.spawn(self._deadline(slot, run, wait_s, start_deadline_s))
        return slot

    async def _deadline(self, slot: Slot, run: Run, wait_s: float, deadline_s: float) -> None:
        """At the deadline: the run, if still queued, leaves the queue and its slot is missed."""
        if wait_s > 0:
            await self.clock.sleep(wait_s)
        if run.state != "queued":
            return
        reason = queued_too_long_reason(deadline_s)
        try:
            self.record.settle(slot, MISSED, run_id=run.id, reason=reason)
            self.busy.queue.cancel_waiting(run.id, REASON_MISSED)
        except Exception as exc:  # a listener's bug must not end the ticker's task group
            log.error("slot.deadline_failed", task=slot.task, error=type(exc).__name__)

    def cover(
        self,
        fired: Slot,
        first_planned_at: float,
        count: int,
        reason: str = "a late tick stood for it",
    ) -> None:
        """``count`` slots from ``first_planned_at`` on, passed while a tick was late (or the
        daemon down), stand with the tick's slot ``fired``: coalesced into its run for
        ``reason``, or as it was (skipped, missed)."""
        if count < 1:
            return
        slot = self.record.open(fired.task, first_planned_at, count=count)
        if fired.outcome in (SKIPPED, MISSED):
            self.record.settle(slot, fired.outcome, reason=fired.reason)
            return
        self.record.settle(slot, COALESCED, run_id=fired.run_id, reason=reason)
