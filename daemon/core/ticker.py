"""The in-process ticker: interval and schedule ticks for the container's own tasks.

An interval's tick ``k`` is planned at ``start + k * interval`` on the monotonic clock, never
from when the last one fired, so the loop's latency does not add up and late slots coalesce
into one tick. A tick whose task still has a run queued or running is skipped, never piled up.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from daemon.core.runqueue import Rejected, RunQueue, RunRequest
from daemon.log.logs import get_logger
from daemon.schedules import Schedule

log = get_logger("runbroker.ticker")

MAX_SLEEP_S = 60.0  # re-read the wall clock at least this often while waiting for a schedule

Sleep = Callable[[float], Awaitable[None]]
WallClock = Callable[[], datetime]
Monotonic = Callable[[], float]
MIN_GAP = 0.01  # two interval ticks are never closer than this fraction of the interval


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class TickPlan:
    """One ticking task: either an interval or a schedule."""

    task: str
    interval_s: float | None = None
    schedule: Schedule | None = None
    fire_on_start: bool = False
    once: bool = False
    last_fired_at: float | None = None
    next_fire_at: float | None = None
    planned_at: float | None = None  # when its loop started (Unix time): health's reference

    def key(self) -> tuple[object, ...]:
        """What makes two plans the same plan across a reload."""
        schedule = self.schedule
        timing = None if schedule is None else (schedule.text, schedule.tz)
        return (self.task, self.interval_s, timing, self.once, self.fire_on_start)


class Ticker:
    def __init__(
        self,
        queue: RunQueue,
        plans: list[TickPlan],
        *,
        jitter: float = 0.1,
        sleep: Sleep = asyncio.sleep,
        now: WallClock = _utc_now,
        monotonic: Monotonic = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.queue = queue
        self.plans = plans
        self.jitter = jitter
        self._sleep = sleep
        self._now = now
        self._monotonic = monotonic
        self._rng = rng or random.Random()
        self.fired = 0
        self.skipped = 0
        self._group: asyncio.TaskGroup | None = None  # run()'s, while it runs
        self._loops: dict[int, asyncio.Task[None]] = {}  # by id() of their plan

    def offset(self, interval_s: float) -> float:
        """How far a tick moves from its planned time: ``interval * uniform(-jitter, jitter)``."""
        if not self.jitter:
            return 0.0
        return interval_s * self._rng.uniform(-self.jitter, self.jitter)

    def fire(self, plan: TickPlan) -> bool:
        """Submit one tick of ``plan``. False when it was skipped or rejected."""
        plan.last_fired_at = time.time()
        if self.queue.is_pending(plan.task):
            self.skipped += 1
            log.info("tick.skipped", task=plan.task, reason="previous run still queued or running")
            return False
        try:
            run = self.queue.submit(RunRequest(task=plan.task, trigger="tick"))
        except Rejected as exc:
            self.skipped += 1
            log.warning("tick.skipped", task=plan.task, reason=exc.reason)
            return False
        self.fired += 1
        log.info("tick.fired", task=plan.task, run_id=run.id)
        return True

    async def run(self) -> None:
        """Tick every plan until cancelled (also when no plan is left: a reload may add one)."""
        async with asyncio.TaskGroup() as group:
            self._group = group
            try:
                for plan in self.plans:
                    self._start(plan)
                await asyncio.Event().wait()
            finally:
                self._group = None

    def _start(self, plan: TickPlan, *, at_start_up: bool = True) -> None:
        plan.planned_at = time.time()
        if plan.once:
            if at_start_up:
                self.fire(plan)
            return
        loop = None
        if plan.schedule is not None:
            loop = self._schedule_loop(plan, plan.schedule)
        elif plan.interval_s is not None:
            fire_now = plan.fire_on_start and at_start_up
            loop = self._interval_loop(plan, plan.interval_s, fire_now)
        if loop is not None and self._group is not None:
            task = self._group.create_task(loop)
            self._loops[id(plan)] = task
            task.add_done_callback(lambda _task: self._loops.pop(id(plan), None))

    @property
    def loops_running(self) -> int:
        return len(self._loops)

    def replace_plans(self, plans: list[TickPlan]) -> None:
        """Tick ``plans`` from now on: unchanged plans (``TickPlan.key``) go on as they were,
        the others stop or start. Before ``run`` it only replaces the plans."""
        if self._group is None:
            self.plans = list(plans)
            return
        old = {plan.key(): plan for plan in self.plans}
        kept: list[TickPlan] = []
        started: list[TickPlan] = []
        for plan in plans:
            same = old.pop(plan.key(), None)
            if same is None:
                started.append(plan)
            kept.append(plan if same is None else same)
        for gone in old.values():
            task = self._loops.pop(id(gone), None)
            if task is not None:
                task.cancel()
        self.plans = kept
        for plan in started:
            self._start(plan, at_start_up=False)

    async def _interval_loop(self, plan: TickPlan, interval_s: float, fire_now: bool) -> None:
        start = self._monotonic()
        if fire_now:
            self.fire(plan)
        last_fired = start  # without a tick at start, the first still waits a little
        slot = 1
        while True:
            target = start + slot * interval_s + self.offset(interval_s)
            # A large jitter never piles two ticks together (nor ticks at once at start).
            target = max(target, last_fired + MIN_GAP * interval_s)
            wait_s = target - self._monotonic()
            plan.next_fire_at = time.time() + max(wait_s, 0.0)
            if wait_s > 0:
                await self._sleep(wait_s)
            self.fire(plan)
            last_fired = self._monotonic()
            # The next slot still ahead of the clock: slots that passed while this tick was
            # late are covered by it (coalesced), not fired one after another.
            slot = max(slot + 1, math.floor((last_fired - start) / interval_s) + 1)

    async def _schedule_loop(self, plan: TickPlan, schedule: Schedule) -> None:
        after = self._now()
        while True:
            due = schedule.next_after(after)
            if due is None:
                plan.next_fire_at = None
                return
            plan.next_fire_at = due.timestamp()
            while (remaining_s := (due - self._now()).total_seconds()) > 0:
                await self._sleep(min(remaining_s, MAX_SLEEP_S))
            self.fire(plan)
            after = max(due, self._now())  # missed slots (a suspended host) coalesce into one
