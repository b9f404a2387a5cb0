"""The in-process ticker, driven by a fake clock and a fake sleep: nothing here waits."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable, MutableMapping
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.core.runqueue import Run, RunQueue, RunRequest, RunResult
from daemon.core.ticker.clock import TickClock
from daemon.core.ticker.ticker import MAX_SLEEP_S, Ticker, TickPlan
from daemon.schedules import parse_schedule
from tests.support.eventually import eventually_async
from tests.support.looping import looping

START = datetime(2026, 3, 2, 8, 55, tzinfo=UTC)
Logs = list[MutableMapping[str, Any]]


class FakeTime:
    """A wall clock that moves only when the ticker sleeps. Each sleep first records the runs
    fired since the previous one (and clears them, so the next tick is not skipped), and parks
    for good once ``limit`` sleeps were asked for."""

    def __init__(self, queue: RunQueue, limit: int, *, clear: bool = True) -> None:
        self.queue = queue
        self.limit = limit
        self.clear = clear
        self.now = START
        self.sleeps: list[float] = []
        self.fired: list[tuple[datetime, str]] = []
        self.parked = asyncio.Event()
        self.on_sleep: Callable[[FakeTime], timedelta] = lambda _fake: timedelta(0)
        self._seen: list[Run] = []

    def clock(self) -> datetime:
        return self.now

    def monotonic(self) -> float:
        return (self.now - START).total_seconds() + 1000.0

    def _collect(self) -> None:
        for run in self.queue.waiting():
            if not any(seen is run for seen in self._seen):
                self._seen.append(run)
                self.fired.append((self.now, run.request.task))
            if self.clear:
                self.queue.cancel_waiting(run.id)

    async def sleep(self, seconds: float) -> None:
        self._collect()
        if len(self.sleeps) >= self.limit:
            self.parked.set()
            await asyncio.Event().wait()
        self.sleeps.append(seconds)
        self.now += timedelta(seconds=seconds) + self.on_sleep(self)


async def _run_until_parked(ticker: Ticker, fake: FakeTime) -> None:
    async with looping(ticker.run()), asyncio.timeout(10):
        await fake.parked.wait()


def _ticker(queue: RunQueue, fake: FakeTime, *plans: TickPlan, jitter: float = 0.0) -> Ticker:
    return Ticker(
        queue,
        list(plans),
        jitter=jitter,
        clock=TickClock(sleep=fake.sleep, now=fake.clock, monotonic=fake.monotonic),
    )


async def test_interval_fires_on_start_then_every_interval() -> None:
    queue = RunQueue(4)
    fake = FakeTime(queue, limit=3)
    plan = TickPlan("default", interval_s=10.0, fire_on_start=True)
    ticker = _ticker(queue, fake, plan)
    await _run_until_parked(ticker, fake)
    assert fake.sleeps == [10.0, 10.0, 10.0]
    offsets = [(at - START).total_seconds() for at, _task in fake.fired]
    assert offsets == [0.0, 10.0, 20.0, 30.0]
    assert ticker.fired == 4
    assert plan.last_fired_at is not None
    assert plan.next_fire_at is not None


async def test_without_fire_on_start_the_first_tick_waits_an_interval() -> None:
    queue = RunQueue(4)
    fake = FakeTime(queue, limit=2)
    ticker = _ticker(queue, fake, TickPlan("default", interval_s=10.0, fire_on_start=False))
    await _run_until_parked(ticker, fake)
    offsets = [(at - START).total_seconds() for at, _task in fake.fired]
    assert offsets == [10.0, 20.0]


async def test_a_tick_is_skipped_while_the_previous_run_is_queued_or_running(logs: Logs) -> None:
    queue = RunQueue(4)
    plan = TickPlan("default", interval_s=10.0)
    other = TickPlan("other", interval_s=10.0)
    ticker = Ticker(queue, [plan, other], jitter=0.0)
    assert ticker.fire(plan)
    assert not ticker.fire(plan)  # still queued
    assert ticker.fire(other)  # another task is not held back
    run = await queue.take()
    assert run is not None
    assert run.request.task == "default"
    assert run.request.trigger == "tick"
    assert not ticker.fire(plan)  # now running
    run.finish(RunResult(ok=True))
    queue.release(run)
    assert ticker.fire(plan)
    assert (ticker.fired, ticker.skipped) == (3, 2)
    skips = [entry for entry in logs if entry["event"] == "tick.skipped"]
    assert [entry["reason"] for entry in skips] == ["previous run still queued or running"] * 2
    assert {entry["task"] for entry in skips} == {"default"}


async def test_the_loop_does_not_pile_up_ticks_behind_a_long_run() -> None:
    queue = RunQueue(16)
    fake = FakeTime(queue, limit=5, clear=False)  # the first run stays queued throughout
    ticker = _ticker(queue, fake, TickPlan("default", interval_s=10.0, fire_on_start=True))
    await _run_until_parked(ticker, fake)
    assert queue.statistics().waiting == 1
    assert (ticker.fired, ticker.skipped) == (1, 5)


async def test_a_rejected_tick_is_logged_and_skipped(logs: Logs) -> None:
    queue = RunQueue(1)
    queue.submit(RunRequest(task="someone-else"))  # the queue is now full
    plan = TickPlan("default", interval_s=10.0)
    ticker = Ticker(queue, [plan], jitter=0.0)
    assert not ticker.fire(plan)
    queue.close()
    assert not ticker.fire(plan)
    assert (ticker.fired, ticker.skipped) == (0, 2)
    assert queue.statistics().accepted == 1
    warnings = [entry for entry in logs if entry["event"] == "tick.skipped"]
    assert [(entry["log_level"], entry["reason"]) for entry in warnings] == [
        ("warning", "run queue is full"),
        ("warning", "scheduler is shutting down"),
    ]


async def test_the_loop_goes_on_after_a_rejection() -> None:
    queue = RunQueue(1)
    blocker = queue.submit(RunRequest(task="someone-else"))
    fake = FakeTime(queue, limit=1, clear=False)

    def unblock(_fake: FakeTime) -> timedelta:
        queue.cancel_waiting(blocker.id)
        return timedelta(0)

    fake.on_sleep = unblock
    ticker = _ticker(queue, fake, TickPlan("default", interval_s=10.0, fire_on_start=True))
    await _run_until_parked(ticker, fake)
    assert ticker.skipped == 1  # the tick on start found the queue full
    assert [task for _at, task in fake.fired] == ["someone-else", "default"]


async def _run_until(ticker: Ticker, done: Callable[[], bool]) -> None:
    """Run ``ticker`` until ``done()`` holds (it never returns by itself: a reload may add
    plans), then cancel it."""
    async with looping(ticker.run()):
        await eventually_async(done, "the ticker to get there", timeout_s=10, every_s=0.001)


async def test_a_once_plan_fires_once() -> None:
    queue = RunQueue(4)
    ticker = Ticker(queue, [TickPlan("default", once=True)])
    await _run_until(ticker, lambda: ticker.fired > 0)
    assert [run.request.task for run in queue.waiting()] == ["default"]
    assert ticker.fired == 1
    assert ticker.loops_running == 0


@settings(max_examples=300, deadline=None)
@given(
    interval_s=st.floats(min_value=0.001, max_value=1e7),
    jitter=st.floats(min_value=0.0, max_value=1.0),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_jitter_stays_within_its_bounds(interval_s: float, jitter: float, seed: int) -> None:
    ticker = Ticker(RunQueue(1), [], jitter=jitter, rng=random.Random(seed))
    for _ in range(20):
        offset_s = ticker.offset(interval_s)
        assert -interval_s * jitter <= offset_s <= interval_s * jitter


def test_jitter_actually_spreads_the_ticks() -> None:
    ticker = Ticker(RunQueue(1), [], jitter=0.5, rng=random.Random(7))
    offsets = [ticker.offset(100.0) for _ in range(200)]
    assert min(offsets) < -20.0
    assert max(offsets) > 20.0
    assert Ticker(RunQueue(1), [], jitter=0.0).offset(100.0) == 0.0


class LateClock:
    """A monotonic clock that moves only in the ticker's sleeps, each of which wakes up
    ``latency_s`` late (plus whatever ``stall`` adds); records when each tick fired (the clock
    at the next sleep) and parks once ``ticks`` were seen."""

    def __init__(self, queue: RunQueue, ticks: int, latency_s: float) -> None:
        self.queue = queue
        self.ticks = ticks
        self.latency_s = latency_s
        self.t = 0.0
        self.fired: list[float] = []
        self.parked = asyncio.Event()
        self.stall: Callable[[LateClock], float] = lambda _clock: 0.0

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        for run in self.queue.waiting():
            self.fired.append(self.t)
            self.queue.cancel_waiting(run.id)
        if len(self.fired) >= self.ticks:
            self.parked.set()
            await asyncio.Event().wait()
        self.t += seconds + self.latency_s + self.stall(self)


async def _tick_late(
    clock: LateClock,
    interval_s: float,
    jitter: float,
    *,
    fire_on_start: bool = True,
    seed: int = 11,
) -> None:
    plan = TickPlan("default", interval_s=interval_s, fire_on_start=fire_on_start)
    ticker = Ticker(
        clock.queue,
        [plan],
        jitter=jitter,
        rng=random.Random(seed),
        clock=TickClock(sleep=clock.sleep, monotonic=clock.monotonic),
    )
    async with looping(ticker.run()), asyncio.timeout(60):
        await clock.parked.wait()


async def test_a_day_of_ticks_does_not_drift(logs: Logs) -> None:
    # Each wake-up is 1 ms late, as measured on a real loop: tick k must still fire at
    # k * 2 s (+ that one late wake-up), not at k * 2.001 s.
    clock = LateClock(RunQueue(4), ticks=43_201, latency_s=0.001)
    await _tick_late(clock, interval_s=2.0, jitter=0.0)
    assert clock.fired[0] == 0.0
    errors = [at - k * 2.0 for k, at in enumerate(clock.fired)]
    assert max(abs(error) for error in errors) <= 0.001 + 1e-6
    assert abs(clock.fired[-1] - 86_400.0) <= 0.001 + 1e-6


async def test_jittered_ticks_stay_around_the_grid(logs: Logs) -> None:
    clock = LateClock(RunQueue(4), ticks=20_001, latency_s=0.001)
    await _tick_late(clock, interval_s=2.0, jitter=0.1)
    errors = [at - k * 2.0 for k, at in enumerate(clock.fired)]
    assert max(abs(error) for error in errors) <= 0.2 + 0.001 + 1e-6
    assert abs(sum(errors) / len(errors)) < 0.01  # spread around the grid, not behind it
    assert abs(clock.fired[-1] - 40_000.0) <= 0.2 + 0.001 + 1e-6
    gaps = [later - earlier for earlier, later in itertools.pairwise(clock.fired)]
    assert min(gaps) >= 2.0 * 0.8 - 1e-6


async def test_a_late_tick_coalesces_the_slots_it_missed(logs: Logs) -> None:
    clock = LateClock(RunQueue(4), ticks=8, latency_s=0.0)

    def suspend_once(clock: LateClock) -> float:
        # During the wait for the tick at 30 s the loop is blocked for 35 s more.
        return 35.0 if len(clock.fired) == 3 else 0.0

    clock.stall = suspend_once
    await _tick_late(clock, interval_s=10.0, jitter=0.0)
    # 0, 10, 20, then the 30 s tick fires late at 65 s and stands for 40, 50 and 60 too:
    # the next one is the first slot still ahead, 70 s, not a burst at 65 s.
    assert clock.fired == [0.0, 10.0, 20.0, 65.0, 70.0, 80.0, 90.0, 100.0]


async def test_a_schedule_fires_at_its_times() -> None:
    queue = RunQueue(4)
    fake = FakeTime(queue, limit=26)
    plan = TickPlan("report", schedule=parse_schedule("cron */10 * * * *"))
    ticker = _ticker(queue, fake, plan)
    await _run_until_parked(ticker, fake)
    times = [at.strftime("%H:%M:%S") for at, _task in fake.fired]
    assert times == ["09:00:00", "09:10:00", "09:20:00"]
    assert max(fake.sleeps) <= MAX_SLEEP_S
    assert {task for _at, task in fake.fired} == {"report"}
    assert plan.next_fire_at == datetime(2026, 3, 2, 9, 30, tzinfo=UTC).timestamp()


async def test_missed_slots_coalesce_into_one_run() -> None:
    queue = RunQueue(4)
    fake = FakeTime(queue, limit=10)

    def suspend_once(fake: FakeTime) -> timedelta:
        # The host is suspended for 35 minutes during the wait after 09:00.
        if fake.now == datetime(2026, 3, 2, 9, 1, tzinfo=UTC):
            return timedelta(minutes=35)
        return timedelta(0)

    fake.on_sleep = suspend_once
    ticker = _ticker(queue, fake, TickPlan("report", schedule=parse_schedule("cron */10 * * * *")))
    await _run_until_parked(ticker, fake)
    times = [at.strftime("%H:%M") for at, _task in fake.fired]
    assert times == ["09:00", "09:37", "09:40"]  # not 09:10, 09:20 and 09:30 one after another


async def test_a_one_shot_schedule_that_has_passed_stops_its_loop() -> None:
    queue = RunQueue(4)
    fake = FakeTime(queue, limit=5)
    plan = TickPlan("once", schedule=parse_schedule("at 2026-03-02T08:56:00Z"))
    ticker = _ticker(queue, fake, plan)
    await _run_until(ticker, lambda: ticker.fired > 0 and ticker.loops_running == 0)
    assert fake.sleeps == [60.0]
    assert [run.request.task for run in queue.waiting()] == ["once"]
    assert plan.next_fire_at is None
    assert ticker.fired == 1


async def test_even_full_jitter_never_fires_two_ticks_together(logs: Logs) -> None:
    clock = LateClock(RunQueue(4), ticks=2_000, latency_s=0.0)
    await _tick_late(clock, 10.0, 1.0, fire_on_start=False, seed=5)
    assert clock.fired[0] >= 0.1  # not at once at start without fire_on_start
    gaps = [later - earlier for earlier, later in itertools.pairwise(clock.fired)]
    assert min(gaps) >= 0.1 - 1e-9
    assert abs(clock.fired[-1] - 2_000 * 10.0) <= 10.0 + 1e-6  # and still on the grid
