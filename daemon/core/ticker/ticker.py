"""The in-process ticker: interval and schedule ticks for the container's own tasks.

An interval's tick ``k`` is planned at ``start + k * interval`` on the monotonic clock, never
from when the last one fired, so the loop's latency does not add up and late slots coalesce
into one tick. A tick whose task still has a run queued or running is skipped, never piled up,
unless the task's ``on_busy`` says otherwise. Every planned time is settled once in the slot
record (``tick_slots``): a late tick stands for the latest slot that passed and settles the
ones it covers, and one past its task's ``start_deadline`` is missed.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass
from datetime import datetime

from daemon.core.runqueue import RunQueue
from daemon.core.ticker.busy import BusyPolicy, OnBusy
from daemon.core.ticker.catchup import (
    MISFIRE_COALESCE,
    catch_up_window,
    plan_catch_up,
    settle_catch_up,
)
from daemon.core.ticker.clock import TickClock
from daemon.core.ticker.slot_state import SlotState
from daemon.core.ticker.slots import RAN, Slot, SlotRecord
from daemon.core.ticker.tick_slots import TickSlots
from daemon.log.logs import get_logger
from daemon.schedules import Schedule
from daemon.schedules.occurrences import walk_through

log = get_logger("runbroker.ticker")

MAX_SLEEP_S = 60.0  # re-read the wall clock at least this often while waiting for a schedule

MIN_GAP = 0.01  # two interval ticks are never closer than this fraction of the interval
COUNT_TURN = 1024  # slots a late schedule counts between two turns of the loop
# Plans whose loops start between two turns of the event loop: each loop's first step plans
# its next time (a cron walk), so thousands at once would hold the loop for most of a second.
START_TURN = 64


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
    on_busy: OnBusy | None = None  # the task's policy when its run is pending (None: skip)
    start_deadline_s: float | None = None  # a slot not started this long after it is missed
    misfire: str = MISFIRE_COALESCE  # slots planned while the daemon was down (``catchup``)
    catchup_window_s: float | None = None

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
        clock: TickClock | None = None,
        rng: random.Random | None = None,
        slots: SlotRecord | None = None,
        busy: BusyPolicy | None = None,
        state: SlotState | None = None,
    ) -> None:
        self.queue = queue
        self.plans = plans
        self.jitter = jitter
        self.clock = clock = TickClock() if clock is None else clock
        self._rng = rng or random.Random()
        self.fired = 0
        self.skipped = 0
        self._group: asyncio.TaskGroup | None = None  # run()'s, while it runs
        self._loops: dict[int, asyncio.Task[None]] = {}  # by id() of their plan
        # Plans whose loops are still to start (and whether at start-up), by id() of the plan,
        # in order; run() starts them a turn's worth at a time.
        self._to_start: dict[int, tuple[TickPlan, bool]] = {}
        self._more_to_start = asyncio.Event()
        self._all_started = asyncio.Event()
        self._all_started.set()
        self.slots = SlotRecord() if slots is None else slots
        policy = BusyPolicy(queue, lambda _run_id, _reason: "") if busy is None else busy
        self.ticks = TickSlots(self.slots, policy, clock)
        self.state = state  # each task's last planned slot, kept across restarts
        self._fired: Slot | None = None  # the slot of the tick ``fire`` just submitted

    def offset(self, interval_s: float) -> float:
        """How far a tick moves from its planned time: ``interval * uniform(-jitter, jitter)``."""
        if not self.jitter:
            return 0.0
        return interval_s * self._rng.uniform(-self.jitter, self.jitter)

    def fire(self, plan: TickPlan, planned_at: float | None = None, note: str = "") -> bool:
        """Submit one tick of ``plan`` for its slot at ``planned_at`` (Unix seconds; None:
        now; ``note``: what the schedule did to that time, a DST gap or fold); False when its
        slot was skipped, missed or coalesced. Every tick of the loops comes through here."""
        plan.last_fired_at = time.time()
        planned = self.clock.wall_s() if planned_at is None else planned_at
        slot = self.ticks.fire(plan.task, planned, plan.on_busy, plan.start_deadline_s, note)
        if self.state is not None:
            self.state.planned(plan.task, planned)
        self._fired = slot
        if slot.outcome in ("", RAN):
            self.fired += 1
            return True
        self.skipped += 1
        return False

    def _tick(
        self, plan: TickPlan, planned_at: float, covered_from: float, covered: int, note: str = ""
    ) -> None:
        """A loop's tick, then the ``covered`` slots from ``covered_from`` on that passed while
        it was late, settled with its slot."""
        self._fired = None
        self.fire(plan, planned_at, note)
        fired = self._fired  # None when ``fire`` was replaced (a test recording the ticks)
        if fired is not None:
            self.ticks.cover(fired, covered_from, covered)

    async def run(self) -> None:
        """Tick every plan until cancelled (also when no plan is left: a reload may add one)."""
        async with asyncio.TaskGroup() as group:
            self._group = group
            self.ticks.spawn = group.create_task
            try:
                self._wait_to_start(self.plans, at_start_up=True)
                while True:
                    await self._start_waiting()
                    await self._more_to_start.wait()
            finally:
                self._group = None
                self.ticks.spawn = None

    def _wait_to_start(self, plans: list[TickPlan], *, at_start_up: bool) -> None:
        now = time.time()
        for plan in plans:
            plan.planned_at = now  # health's reference from now on, not the daemon's start
            self._to_start[id(plan)] = (plan, at_start_up)
        if self._to_start:
            self._all_started.clear()
            self._more_to_start.set()

    async def _start_waiting(self) -> None:
        """Start the loops of the plans waiting for one, ``START_TURN`` per turn of the loop."""
        self._more_to_start.clear()
        started = 0
        while self._to_start:
            plan, at_start_up = self._to_start.pop(next(iter(self._to_start)))
            self._start(plan, at_start_up=at_start_up)
            started += 1
            if started % START_TURN == 0:
                await asyncio.sleep(0)
        self._all_started.set()

    async def started(self) -> None:
        """Until every plan given so far has its loop (at once when the ticker does not run)."""
        if self._group is not None:
            await self._all_started.wait()

    def _start(self, plan: TickPlan, *, at_start_up: bool = True) -> None:
        if plan.once:
            if at_start_up:
                self.fire(plan)
            return
        last_planned = None
        if self.state is not None:
            last_planned = self._kept_slot(plan)
            if last_planned is None:  # from now on its slots are accounted for, fired or not
                self.state.planned(plan.task, self.clock.wall_s())
            elif at_start_up:
                last_planned = self._catch_up(plan, last_planned)
            else:
                last_planned = None
        loop = None
        if plan.schedule is not None:
            loop = self._schedule_loop(plan, plan.schedule)
        elif plan.interval_s is not None:
            fire_now = plan.fire_on_start and at_start_up and last_planned is None
            loop = self._interval_loop(plan, plan.interval_s, fire_now, last_planned)
        if loop is not None and self._group is not None:
            task = self._group.create_task(loop)
            self._loops[id(plan)] = task
            task.add_done_callback(lambda _task: self._loops.pop(id(plan), None))

    def _kept_slot(self, plan: TickPlan) -> float | None:
        """The task's last planned slot from the state, never past now: one that is (the
        host's clock was ahead, and set back) counts from now, else it would stand for good."""
        assert self.state is not None
        kept = self.state.last_planned.get(plan.task)
        now = self.clock.wall_s()
        if kept is not None and kept > now:
            log.warning("state.future_slot", task=plan.task, ahead_s=round(kept - now, 3))
            self.state.rewind(plan.task, now)
            return now
        return kept

    def _catch_up(self, plan: TickPlan, last_planned: float) -> float:
        """Settle the slots planned while the daemon was down, and run the one that catches up;
        the newest slot accounted for, where an interval's grid goes on from."""
        window = catch_up_window(plan.catchup_window_s, plan.start_deadline_s)
        decision = plan_catch_up(
            last_planned=last_planned,
            now=self.clock.wall_s(),
            misfire=plan.misfire,
            window_s=window.seconds,
            interval_s=plan.interval_s,
            schedule=plan.schedule,
        )
        newest = max(last_planned, decision.missed.newest_at, decision.run_at or 0.0)
        assert self.state is not None
        self.state.planned(plan.task, newest)
        self.state.write()  # before the run: a kill after it starts must not run it again
        settle_catch_up(
            self.ticks,
            plan.task,
            decision,
            misfire=plan.misfire,
            window=window,
            start_deadline_s=plan.start_deadline_s,
        )
        return newest

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
            else:  # the same timing, the policy as the file now says
                same.on_busy, same.start_deadline_s = plan.on_busy, plan.start_deadline_s
            kept.append(plan if same is None else same)
        for gone in old.values():
            self._to_start.pop(id(gone), None)
            task = self._loops.pop(id(gone), None)
            if task is not None:
                task.cancel()
        self.plans = kept
        self._wait_to_start(started, at_start_up=False)
        if not self._to_start:
            self._all_started.set()

    async def _interval_loop(
        self, plan: TickPlan, interval_s: float, fire_now: bool, anchor: float | None = None
    ) -> None:
        """Tick on a grid from now, or from ``anchor`` (a slot of the last life, Unix seconds)."""
        start = self.clock.monotonic()
        if anchor is not None:  # the grid goes on where the state left it, not from the restart
            start -= max(0.0, self.clock.wall_s() - anchor)
        if fire_now:
            self.fire(plan)
        last_fired = start  # without a tick at start, the first still waits a little
        slot = 1
        while True:
            target = start + slot * interval_s + self.offset(interval_s)
            # A large jitter never piles two ticks together (nor ticks at once at start).
            target = max(target, last_fired + MIN_GAP * interval_s)
            wait_s = target - self.clock.monotonic()
            plan.next_fire_at = time.time() + max(wait_s, 0.0)
            if wait_s > 0:
                await self.clock.sleep(wait_s)
            now = self.clock.monotonic()
            # The tick stands for the latest slot that has passed: those that passed while it
            # was late are covered by it (coalesced), not fired one after another.
            latest = max(slot, math.floor((now - start) / interval_s))
            wall_at = self.clock.wall_s() - now  # a monotonic time plus this is a wall time
            planned = start + latest * interval_s  # its slot on the grid, not the jittered time
            self._tick(plan, wall_at + planned, wall_at + start + slot * interval_s, latest - slot)
            last_fired = self.clock.monotonic()
            slot = max(latest + 1, math.floor((last_fired - start) / interval_s) + 1)

    async def _schedule_loop(self, plan: TickPlan, schedule: Schedule) -> None:
        after = self.clock.now()
        while True:
            due = schedule.next_after(after)
            if due is None:
                plan.next_fire_at = None
                return
            plan.next_fire_at = due.timestamp()
            while (remaining_s := (due - self.clock.now()).total_seconds()) > 0:
                await self.clock.sleep(min(remaining_s, MAX_SLEEP_S))
            # Slots missed while the tick was late (a suspended host) coalesce into one: the
            # tick stands for the latest of them.
            now = self.clock.now()
            passed = walk_through(schedule, due, now, walk_max=COUNT_TURN)
            covered = passed.count - 1
            while passed.stopped:
                await asyncio.sleep(0)
                passed = walk_through(schedule, passed.last, now, walk_max=COUNT_TURN)
                covered += passed.count - 1
            note = _dst_note(schedule, passed.last)
            self._tick(plan, passed.last.timestamp(), due.timestamp(), covered, note)
            after = max(passed.last, now)


def _dst_note(schedule: Schedule, planned: datetime) -> str:
    """What an offset change did to a slot's time, for its record (empty: nothing)."""
    try:
        mark = schedule.dst_mark(planned)
    except (OverflowError, StopIteration):  # at the edge of what ``datetime`` holds
        return ""
    return "" if mark is None else f"DST {mark.kind}: {mark.note}"
