"""The ticker's slots: every planned time of every ticking task gets exactly one outcome, over
random schedules, clocks (late wake-ups, a suspended host) and busy patterns, on the manual
clock of ``daemon.testing``; start deadlines and the tick's busy policy."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.core.busy import ON_BUSY, BusyPolicy, OnBusy
from daemon.core.runqueue import Run, RunQueue, RunRequest, RunResult
from daemon.core.slots import COALESCED, MISSED, RAN, SKIPPED, Slot, SlotRecord
from daemon.core.ticker import Ticker, TickPlan
from daemon.schedules import parse_schedule
from daemon.testing import ManualClock
from daemon.wire.reasons import REASON_MISSED, REASON_REPLACED

START = datetime(2026, 3, 27, 22, 0, tzinfo=UTC)  # Europe/Berlin springs forward on the 29th


class VirtualTime:
    """Sleepers wake in the order of their times on a ``ManualClock``; ``step`` moves the
    clock to the next wake-up, ``stall_s`` further when the host was suspended."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        return (self.clock() - START).total_seconds() + 5000.0

    async def sleep(self, seconds: float) -> None:
        future = asyncio.get_running_loop().create_future()
        wake = self.clock() + timedelta(seconds=max(seconds, 0.0))
        heapq.heappush(self._sleepers, (wake, next(self._order), future))
        await future

    async def quiet(self) -> None:
        for _ in range(30):  # every task runs until it sleeps again: nothing here does I/O
            await asyncio.sleep(0)

    async def step(self, stall_s: float) -> bool:
        await self.quiet()
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)  # a cancelled sleeper (a deadline's watch)
        if not self._sleepers:
            return False
        wake = self._sleepers[0][0]
        self.clock.set(max(wake, self.clock()) + timedelta(seconds=stall_s))
        while self._sleepers and self._sleepers[0][0] <= self.clock():
            _wake, _n, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)
        await self.quiet()
        return True

    async def until(self, when: datetime) -> None:
        """Step (no host suspended) until the clock reads ``when``."""
        while self.clock() < when:
            assert await self.step(0.0), "nothing sleeps: the clock cannot get there"


class FakeExecutor:
    """The executor's part, step by step: finish the running run, start the next waiting."""

    def __init__(self, queue: RunQueue, clock: ManualClock) -> None:
        self.queue = queue
        self.clock = clock
        self.started: dict[str, datetime] = {}
        self.runs: dict[str, Run] = {}

    async def step(self, finish: bool) -> None:
        current = self.queue.current
        if current is not None and finish:
            current.finish(RunResult(ok=True))
            self.queue.release(current)
            current = None
        if current is None and self.queue.waiting_count():
            run = await self.queue.take()
            assert run is not None
            run.mark_started()
            self.started[run.id] = self.clock()
            self.runs[run.id] = run

    def cancel_running(self, run_id: str, reason: str) -> str:
        current = self.queue.current
        if current is None or current.id != run_id:
            return ""
        current.finish(RunResult(ok=False, reason=reason, cancelled=True))
        self.queue.release(current)
        return "requested"


SPECS = [
    ("every 7m", "UTC"),
    ("cron */5 * * * *", "UTC"),
    ("cron 30 2 * * *", "Europe/Berlin"),  # 02:30 does not exist on the 29th
    ("daily 02:30", "Europe/Berlin"),
    ("cron 0 * * * *", "Australia/Lord_Howe"),
]

plan_strategy = st.tuples(
    st.one_of(
        st.sampled_from(SPECS),
        st.floats(min_value=30.0, max_value=3600.0),  # an interval, seconds
    ),
    st.sampled_from([None, *ON_BUSY]),
    st.one_of(st.none(), st.floats(min_value=1.0, max_value=1800.0)),
    st.booleans(),  # fire on start
)


def _plan(
    name: str, spec: object, on_busy: OnBusy | None, deadline: float | None, fire_on_start: bool
) -> TickPlan:
    if isinstance(spec, tuple):
        return TickPlan(
            name,
            schedule=parse_schedule(spec[0], spec[1]),
            on_busy=on_busy,
            start_deadline_s=deadline,
        )
    assert isinstance(spec, float)
    return TickPlan(
        name,
        interval_s=spec,
        fire_on_start=fire_on_start,
        on_busy=on_busy,
        start_deadline_s=deadline,
    )


def _covered(plan: TickPlan, slot: Slot, start: float) -> list[float]:
    """The planned times ``slot`` stands for: its own and the ``count - 1`` after it."""
    times = [slot.planned_at]
    for _ in range(slot.count - 1):
        if plan.schedule is not None:
            after = plan.schedule.next_after(datetime.fromtimestamp(times[-1], UTC))
            assert after is not None
            times.append(after.timestamp())
        else:
            assert plan.interval_s is not None
            times.append(times[-1] + plan.interval_s)
    return times


def _assert_one_each(plan: TickPlan, times: list[float], start: float) -> None:
    """``times`` (sorted) are the planned times of ``plan`` from ``start`` on, each once and
    none left out: a schedule's chain of ``next_after`` (``every DUR`` counts its time from a
    late tick's, so only its gaps are held), an interval's grid."""
    if not times:
        return
    if plan.schedule is not None:
        chain = [
            datetime.fromtimestamp(start, UTC),
            *(datetime.fromtimestamp(t, UTC) for t in times),
        ]
        for earlier, later in itertools.pairwise(chain):
            after = plan.schedule.next_after(earlier)
            assert after is not None
            if plan.schedule.text.startswith("every"):
                assert later >= after - timedelta(milliseconds=1), (earlier, later)
            else:
                assert abs((later - after).total_seconds()) < 1e-3, (earlier, later)
        return
    assert plan.interval_s is not None
    first = 0 if plan.fire_on_start else 1
    expected = [start + (first + k) * plan.interval_s for k in range(len(times))]
    assert max(abs(t - e) for t, e in zip(times, expected, strict=True)) < 1e-3


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plans=st.lists(plan_strategy, min_size=1, max_size=3),
    steps=st.lists(
        st.tuples(
            st.sampled_from([0.0, 0.0, 0.0, 0.5, 90.0, 1800.0, 20000.0]),  # a late wake-up
            st.booleans(),  # the running run ends at this step
            st.booleans(),  # someone triggers a long run of another task
        ),
        min_size=1,
        max_size=60,
    ),
)
async def test_every_planned_time_has_exactly_one_outcome(
    plans: list[tuple[object, OnBusy | None, float | None, bool]],
    steps: list[tuple[float, bool, bool]],
) -> None:
    clock = ManualClock(START)
    time_ = VirtualTime(clock)
    queue = RunQueue(8)
    executor = FakeExecutor(queue, clock)
    record = SlotRecord(10_000)
    settled: list[Slot] = []
    record.listeners.append(settled.append)
    ticker_plans = [_plan(f"t{i}", *spec) for i, spec in enumerate(plans)]
    ticker = Ticker(
        queue,
        ticker_plans,
        jitter=0.0,
        sleep=time_.sleep,
        now=clock,
        monotonic=time_.monotonic,
        slots=record,
        busy=BusyPolicy(queue, executor.cancel_running),
    )
    start = clock().timestamp()
    runner = asyncio.create_task(ticker.run())
    try:
        for stall_s, finish, blocker in steps:
            if blocker:
                with contextlib.suppress(Exception):
                    queue.submit(RunRequest("long"))
            await executor.step(finish)
            if not await time_.step(stall_s):
                break
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
    # What was left: the running run ends, the queued ones are cancelled (a shutdown's way).
    if queue.current is not None:
        executor.runs.setdefault(queue.current.id, queue.current)
        queue.current.finish(RunResult(ok=True))
        queue.release(queue.current)
    queue.cancel_all()
    assert record.open_slots == 0
    by_task: dict[str, list[Slot]] = {}
    for slot in settled:
        by_task.setdefault(slot.task, []).append(slot)
    for plan in ticker_plans:
        mine = by_task.get(plan.task, [])
        times = sorted(t for slot in mine for t in _covered(plan, slot, start))
        _assert_one_each(plan, times, start)  # none twice, none left out before the last
        for slot in mine:
            if slot.outcome == RAN:
                assert slot.run_id
                run = executor.runs.get(slot.run_id)
                started = executor.started.get(slot.run_id)
                if plan.start_deadline_s is not None and started is not None:
                    late_s = started.timestamp() - slot.planned_at
                    assert late_s <= plan.start_deadline_s + 1e-6, "ran past its deadline"
                assert run is None or run.result is not None
            if slot.outcome == MISSED and slot.run_id:
                assert slot.run_id not in executor.started  # missed runs never start


def _tick_queue() -> tuple[RunQueue, SlotRecord, list[Slot]]:
    record = SlotRecord()
    settled: list[Slot] = []
    record.listeners.append(settled.append)
    return RunQueue(8), record, settled


async def test_a_long_job_makes_the_next_slot_miss_its_start_deadline() -> None:
    clock = ManualClock(START)
    time_ = VirtualTime(clock)
    queue, record, settled = _tick_queue()
    plan = TickPlan("report", schedule=parse_schedule("every 10m"), start_deadline_s=60.0)
    ticker = Ticker(
        queue,
        [plan],
        jitter=0.0,
        sleep=time_.sleep,
        now=clock,
        monotonic=time_.monotonic,
        slots=record,
    )
    long_job = queue.submit(RunRequest("backup"))
    assert await queue.take() is long_job  # the executor is busy with it throughout
    runner = asyncio.create_task(ticker.run())
    try:
        await time_.until(START + timedelta(minutes=10))  # the slot is queued behind the job
        waiting = list(queue.waiting())
        assert [run.request.task for run in waiting] == ["report"]
        assert settled == []
        await time_.until(START + timedelta(minutes=11))  # its deadline
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
    assert [(s.outcome, s.run_id) for s in settled] == [(MISSED, waiting[0].id)]
    assert "start deadline" in settled[0].reason
    assert settled[0].planned_at == (START + timedelta(minutes=10)).timestamp()
    assert waiting[0].result is not None
    assert waiting[0].result.reason == REASON_MISSED
    assert waiting[0].result.wire_code == "missed"
    assert queue.waiting_count() == 0


async def test_a_slot_that_starts_in_time_ran_with_its_result() -> None:
    clock = ManualClock(START)
    time_ = VirtualTime(clock)
    queue, record, settled = _tick_queue()
    plan = TickPlan("report", schedule=parse_schedule("every 10m"), start_deadline_s=60.0)
    ticker = Ticker(
        queue,
        [plan],
        jitter=0.0,
        sleep=time_.sleep,
        now=clock,
        monotonic=time_.monotonic,
        slots=record,
    )
    runner = asyncio.create_task(ticker.run())
    try:
        await time_.until(START + timedelta(minutes=10))
        run = await queue.take()
        assert run is not None
        run.mark_started()  # its deadline's watch stops here
        await time_.until(START + timedelta(minutes=12))
        run.finish(RunResult(ok=False, reason="exit status 4", exit_code=4))
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
    assert [(s.outcome, s.run_id, s.result) for s in settled] == [(RAN, run.id, "failed")]


def test_a_tick_fired_past_its_deadline_is_missed_and_runs_nothing() -> None:
    clock = ManualClock(START)
    queue, record, settled = _tick_queue()
    plan = TickPlan("report", interval_s=600.0, start_deadline_s=30.0)
    ticker = Ticker(queue, [plan], now=clock, slots=record)
    assert not ticker.fire(plan, planned_at=clock().timestamp() - 31.0)
    assert queue.waiting_count() == 0
    assert [s.outcome for s in settled] == [MISSED]
    assert "past its start deadline of 30s" in settled[0].reason


async def test_a_late_tick_stands_for_the_slots_it_covers() -> None:
    clock = ManualClock(START)
    time_ = VirtualTime(clock)
    queue, record, settled = _tick_queue()
    plan = TickPlan("report", schedule=parse_schedule("cron */10 * * * *"))
    ticker = Ticker(
        queue,
        [plan],
        jitter=0.0,
        sleep=time_.sleep,
        now=clock,
        monotonic=time_.monotonic,
        slots=record,
    )
    runner = asyncio.create_task(ticker.run())
    try:
        # Its first wait (one minute at most) ends at 22:45, not 22:01: a suspended host.
        await time_.step(44 * 60.0)
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
    run = next(queue.waiting())
    assert [(s.outcome, s.count, s.run_id) for s in settled] == [(COALESCED, 3, run.id)]
    assert settled[0].planned_at == (START + timedelta(minutes=10)).timestamp()
    run.finish(RunResult(ok=True))  # the tick stands for 22:40, the latest passed slot
    assert settled[-1].outcome == RAN
    assert settled[-1].planned_at == (START + timedelta(minutes=40)).timestamp()


def test_a_tick_whose_run_is_pending_is_skipped_by_default() -> None:
    queue, record, settled = _tick_queue()
    plan = TickPlan("report", interval_s=60.0)
    ticker = Ticker(queue, [plan], slots=record)
    assert ticker.fire(plan)
    assert not ticker.fire(plan)
    assert [s.outcome for s in settled] == [SKIPPED]
    assert record.open_slots == 1  # the first, until its run ends


async def test_the_busy_policies_of_a_tick() -> None:
    queue, record, settled = _tick_queue()
    cancelled: list[tuple[str, str]] = []

    def cancel_running(run_id: str, reason: str) -> str:
        cancelled.append((run_id, reason))
        return "requested"

    busy = BusyPolicy(queue, cancel_running)
    plan = TickPlan("report", interval_s=60.0, on_busy="queue")
    ticker = Ticker(queue, [plan], slots=record, busy=busy)
    assert ticker.fire(plan)
    running = await queue.take()
    assert running is not None
    assert ticker.fire(plan)  # queue: one more behind the running one
    plan.on_busy = "coalesce"
    assert not ticker.fire(plan)  # joins the queued one
    queued = next(queue.waiting())
    assert settled[-1].outcome == COALESCED
    assert settled[-1].run_id == queued.id
    plan.on_busy = "replace"
    assert ticker.fire(plan)
    assert queued.result is not None
    assert queued.result.reason == REASON_REPLACED
    assert cancelled == [(running.id, REASON_REPLACED)]
    assert [run.request.task for run in queue.waiting()] == ["report"]
    plan.on_busy = "skip"
    assert not ticker.fire(plan)
    assert settled[-1].outcome == SKIPPED


def test_a_reload_keeps_the_loop_and_takes_the_new_policy() -> None:
    queue = RunQueue(4)
    old = TickPlan("report", interval_s=60.0)
    ticker = Ticker(queue, [old])
    ticker._group = object()  # type: ignore[assignment]  # as if running: plans are compared
    ticker.replace_plans(
        [TickPlan("report", interval_s=60.0, on_busy="coalesce", start_deadline_s=5.0)]
    )
    assert ticker.plans == [old]
    assert (old.on_busy, old.start_deadline_s) == ("coalesce", 5.0)


async def test_a_slot_moved_by_a_dst_gap_says_so() -> None:
    clock = ManualClock(START)
    time_ = VirtualTime(clock)
    queue, record, settled = _tick_queue()
    plan = TickPlan("nightly", schedule=parse_schedule("daily 02:30", "Europe/Berlin"))
    ticker = Ticker(
        queue,
        [plan],
        jitter=0.0,
        sleep=time_.sleep,
        now=clock,
        monotonic=time_.monotonic,
        slots=record,
    )
    runner = asyncio.create_task(ticker.run())
    try:  # the run of the 28th stays queued: the slot of the 29th is skipped, and says why
        await time_.until(datetime(2026, 3, 29, 1, 0, tzinfo=UTC))
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
    assert [(s.outcome, s.planned_at) for s in settled] == [
        (SKIPPED, datetime(2026, 3, 29, 1, 0, tzinfo=UTC).timestamp())
    ]
    assert settled[0].note.startswith("DST gap: 02:30 did not exist")
    assert record.open_slots == 1  # the 28th's, until its run ends
