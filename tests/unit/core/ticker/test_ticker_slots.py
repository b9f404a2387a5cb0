"""The ticker's slots: every planned time of every ticking task gets exactly one outcome, over
random schedules, clocks (late wake-ups, a suspended host) and busy patterns, on the manual
clock of ``daemon.testing``."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.core.runqueue import Run, RunQueue, RunRequest
from daemon.core.ticker.busy import ON_BUSY, BusyPolicy, OnBusy
from daemon.core.ticker.clock import TickClock
from daemon.core.ticker.slots import MISSED, RAN, Slot, SlotRecord
from daemon.core.ticker.ticker import Ticker, TickPlan
from daemon.schedules import parse_schedule
from daemon.testing import ManualClock, VirtualTime
from daemon.testing.virtual_runs import VirtualExecutor

START = datetime(2026, 3, 27, 22, 0, tzinfo=UTC)  # Europe/Berlin springs forward on the 29th


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
            st.booleans(),  # someone triggers a long run of another task
        ),
        min_size=1,
        max_size=60,
    ),
    durations_s=st.lists(
        st.sampled_from([0.0, 30.0, 400.0, 3600.0, 20000.0]), min_size=1, max_size=6
    ),
)
async def test_every_planned_time_has_exactly_one_outcome(
    plans: list[tuple[object, OnBusy | None, float | None, bool]],
    steps: list[tuple[float, bool]],
    durations_s: list[float],
) -> None:
    clock = ManualClock(START)
    time_ = VirtualTime(clock)
    queue = RunQueue(8)
    runs: dict[str, Run] = {}
    queue.on_submit(lambda run: runs.update({run.id: run}))
    lengths = itertools.cycle(durations_s)  # each run lasts the next of these
    executor = VirtualExecutor(queue, time_, lambda _start: next(lengths), {})
    record = SlotRecord(10_000)
    settled: list[Slot] = []
    record.listeners.add(settled.append)
    ticker_plans = [_plan(f"t{i}", *spec) for i, spec in enumerate(plans)]
    ticker = Ticker(
        queue,
        ticker_plans,
        jitter=0.0,
        slots=record,
        busy=BusyPolicy(queue, executor.cancel_running),
        clock=TickClock(sleep=time_.sleep, now=clock, monotonic=time_.monotonic),
    )
    start = clock().timestamp()
    executing = asyncio.create_task(executor.run_forever())
    runner = asyncio.create_task(ticker.run())
    try:
        for stall_s, blocker in steps:
            if blocker:
                with contextlib.suppress(Exception):
                    queue.submit(RunRequest("long"))
            if not await time_.step(stall_s):
                break
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        # What was left: the queued runs are cancelled, the running one stopped (a shutdown's).
        queue.close()
        queue.cancel_all()
        if queue.current is not None:
            executor.cancel_running(queue.current.id, "shutting down")
        await executing
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
                started = executor.started_at.get(slot.run_id)
                if plan.start_deadline_s is not None and started is not None:
                    late_s = started.timestamp() - slot.planned_at
                    assert late_s <= plan.start_deadline_s + 1e-6, "ran past its deadline"
                assert runs[slot.run_id].result is not None
            if slot.outcome == MISSED and slot.run_id:
                assert slot.run_id not in executor.started_at  # missed runs never start
