"""``Ticker.replace_plans`` (a reload): an unchanged plan keeps its next fire time (no double
fire, no skip), a removed plan stops, a new or changed one starts as at start-up. Driven by a
manual clock: a sleeping loop parks until the test moves time past its wake-up; nothing waits
on real time."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

from daemon.core.runqueue import RunQueue
from daemon.core.ticker.clock import TickClock
from daemon.core.ticker.ticker import START_TURN, Ticker, TickPlan
from daemon.schedules import parse_schedule
from tests.support.looping import looping

START = datetime(2026, 3, 2, 8, 55, tzinfo=UTC)


class ManualTime:
    """Time moves only by ``advance``, from one sleeper's wake-up to the next; each wake-up
    waits until every loop has parked again, and then records (and clears) the ticks fired."""

    def __init__(self, queue: RunQueue) -> None:
        self.queue = queue
        self.now_s = 0.0
        self.sleepers: list[tuple[float, asyncio.Future[None]]] = []
        self.parked = asyncio.Event()
        self.fired: list[tuple[float, str]] = []

    def monotonic(self) -> float:
        return 1000.0 + self.now_s

    def clock(self) -> datetime:
        return START + timedelta(seconds=self.now_s)

    async def sleep(self, seconds: float) -> None:
        wake = asyncio.get_running_loop().create_future()
        self.sleepers.append((self.now_s + seconds, wake))
        self.parked.set()
        await wake

    def _waiting(self) -> list[tuple[float, asyncio.Future[None]]]:
        return [sleeper for sleeper in self.sleepers if not sleeper[1].done()]

    async def settle(self, loops: int) -> None:
        """Until ``loops`` loops sleep; then collect what fired."""
        async with asyncio.timeout(5):
            while len(self._waiting()) < loops:
                self.parked.clear()
                await self.parked.wait()
        for run in self.queue.waiting():
            self.fired.append((self.now_s, run.request.task))
            self.queue.cancel_waiting(run.id)

    async def advance(self, seconds: float, loops: int) -> None:
        target = self.now_s + seconds
        while due := sorted((s for s in self._waiting() if s[0] <= target), key=lambda s: s[0]):
            self.now_s = due[0][0]
            due[0][1].set_result(None)
            self.sleepers.remove(due[0])
            await self.settle(loops)
        self.now_s = target

    def times(self, task: str) -> list[float]:
        return [at for at, name in self.fired if name == task]


@contextlib.asynccontextmanager
async def ticking(*plans: TickPlan) -> AsyncIterator[tuple[Ticker, ManualTime]]:
    queue = RunQueue(16)
    time = ManualTime(queue)
    ticker = Ticker(
        queue,
        list(plans),
        jitter=0.0,
        clock=TickClock(sleep=time.sleep, now=time.clock, monotonic=time.monotonic),
    )
    async with looping(ticker.run()):
        await asyncio.sleep(0)  # one turn: run() starts every plan's loop
        yield ticker, time


async def test_an_unchanged_plan_keeps_its_grid_and_a_new_one_starts() -> None:
    original = TickPlan("a", interval_s=10.0)
    async with ticking(original) as (ticker, time):
        await time.settle(1)
        await time.advance(15, loops=1)
        ticker.replace_plans([TickPlan("a", interval_s=10.0), TickPlan("b", interval_s=10.0)])
        await time.settle(2)
        await time.advance(20, loops=2)
        assert time.times("a") == [10.0, 20.0, 30.0]  # no double fire at the reload, no skip
        assert time.times("b") == [25.0, 35.0]  # from the reload on, as at start-up
        assert ticker.plans[0] is original
        assert ticker.loops_running == 2


async def test_a_removed_plan_stops() -> None:
    async with ticking(TickPlan("a", interval_s=10.0), TickPlan("b", interval_s=10.0)) as (
        ticker,
        time,
    ):
        await time.settle(2)
        await time.advance(10, loops=2)
        ticker.replace_plans([TickPlan("b", interval_s=10.0)])
        await time.advance(30, loops=1)
        assert time.times("a") == [10.0]
        assert time.times("b") == [10.0, 20.0, 30.0, 40.0]
        assert [plan.task for plan in ticker.plans] == ["b"]


async def test_a_changed_interval_starts_over_from_the_reload() -> None:
    async with ticking(TickPlan("a", interval_s=10.0)) as (ticker, time):
        await time.settle(1)
        await time.advance(12, loops=1)
        ticker.replace_plans([TickPlan("a", interval_s=4.0)])
        await time.settle(1)  # the old loop's sleep was cancelled with it
        await time.advance(9, loops=1)
        assert time.times("a") == [10.0, 16.0, 20.0]  # 12 + 4, 12 + 8; not the old 20 twice


async def test_an_unchanged_schedule_keeps_its_next_fire() -> None:
    plan = TickPlan("nightly", schedule=parse_schedule("cron */5 * * * *"))
    async with ticking(plan) as (ticker, time):
        await time.settle(1)
        due = plan.next_fire_at
        await time.advance(60, loops=1)
        ticker.replace_plans([TickPlan("nightly", schedule=parse_schedule("cron */5 * * * *"))])
        assert ticker.plans == [plan]
        assert plan.next_fire_at == due
        await time.advance(240, loops=1)
        assert time.times("nightly") == [300.0]  # 09:00, once


async def test_a_once_plan_that_is_kept_does_not_fire_again() -> None:
    async with ticking(TickPlan("default", once=True)) as (ticker, time):
        await time.settle(0)
        ticker.replace_plans([TickPlan("default", once=True)])
        await time.settle(0)
        assert time.times("default") == [0.0]
        assert ticker.fired == 1


async def test_a_plan_a_reload_starts_waits_its_interval_without_the_start_up_fire() -> None:
    async with ticking(TickPlan("a", interval_s=10.0, fire_on_start=True)) as (ticker, time):
        await time.settle(1)
        assert time.times("a") == [0.0]  # RUNBROKER_FIRE_ON_START: at start-up
        await time.advance(12, loops=1)
        ticker.replace_plans(
            [
                TickPlan("a", interval_s=4.0, fire_on_start=True),  # changed
                TickPlan("b", interval_s=5.0, fire_on_start=True),  # new
            ]
        )
        await time.settle(2)
        assert time.times("a") == [0.0, 10.0]  # nothing at 12: no double fire
        assert time.times("b") == []
        await time.advance(5, loops=2)
        assert time.times("a") == [0.0, 10.0, 16.0]
        assert time.times("b") == [17.0]


async def test_a_once_plan_a_reload_adds_does_not_fire() -> None:
    async with ticking() as (ticker, time):
        ticker.replace_plans([TickPlan("default", once=True)])
        await time.settle(0)
        assert ticker.fired == 0


async def test_an_unchanged_interval_plan_keeps_its_loop_and_next_fire() -> None:
    original = TickPlan("a", interval_s=10.0)
    async with ticking(original) as (ticker, time):
        await time.settle(1)
        await time.advance(15, loops=1)
        loop_task = ticker._loops[id(original)]
        due = original.next_fire_at
        ticker.replace_plans([TickPlan("a", interval_s=10.0)])
        assert ticker._loops[id(original)] is loop_task  # the same loop, not a new one
        assert not loop_task.done()
        assert original.next_fire_at == due
        await time.advance(5, loops=1)
        assert time.times("a") == [10.0, 20.0]


async def test_an_unchanged_schedule_keeps_its_loop_task() -> None:
    plan = TickPlan("nightly", schedule=parse_schedule("cron */5 * * * *"))
    async with ticking(plan) as (ticker, time):
        await time.settle(1)
        loop_task = ticker._loops[id(plan)]
        ticker.replace_plans([TickPlan("nightly", schedule=parse_schedule("cron */5 * * * *"))])
        assert ticker._loops[id(plan)] is loop_task


async def test_thousands_of_new_plans_start_a_turn_s_worth_at_a_time() -> None:
    """Each loop's first step plans its next time: thousands at once would hold the event
    loop. ``started`` waits until every one has its loop; a plan removed by a later reload
    before its loop started never gets one."""
    count = 3 * START_TURN + 1
    async with ticking() as (ticker, time):
        plans = [TickPlan(f"t{n}", interval_s=60.0) for n in range(count)]
        ticker.replace_plans(plans)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert 0 < ticker.loops_running < count  # not all in the same turn
        ticker.replace_plans(plans[:-1])  # the last one, not started yet, is gone
        async with asyncio.timeout(5):
            await ticker.started()
        await time.settle(count - 1)
        assert ticker.loops_running == count - 1
        assert id(plans[-1]) not in ticker._loops


async def test_started_returns_at_once_when_the_ticker_does_not_run() -> None:
    queue = RunQueue(16)
    ticker = Ticker(queue, [])
    ticker.replace_plans([TickPlan("a", interval_s=60.0)])
    await ticker.started()
    assert ticker.plans[0].task == "a"


async def test_a_plan_waiting_for_its_loop_counts_from_the_reload() -> None:
    """Health's stall check measures a plan that has not fired from ``planned_at``: a plan a
    reload added is planned from the reload, even before its loop has started."""
    async with ticking() as (ticker, _time):
        plans = [TickPlan(f"t{n}", interval_s=60.0) for n in range(2 * START_TURN)]
        ticker.replace_plans(plans)
        assert all(plan.planned_at is not None for plan in plans)
        async with asyncio.timeout(5):
            await ticker.started()
