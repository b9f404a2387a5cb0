"""A tick's start deadline, its busy policy, the slots a late tick covers and a DST note, on
the virtual clock."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

from daemon.core.runqueue import RunQueue, RunRequest, RunResult
from daemon.core.ticker.busy import BusyPolicy
from daemon.core.ticker.clock import TickClock
from daemon.core.ticker.slots import COALESCED, MISSED, RAN, SKIPPED, Slot, SlotRecord
from daemon.core.ticker.ticker import Ticker, TickPlan
from daemon.schedules import parse_schedule
from daemon.testing import ManualClock, VirtualTime
from daemon.wire.reasons import REASON_MISSED, REASON_REPLACED

START = datetime(2026, 3, 27, 22, 0, tzinfo=UTC)  # Europe/Berlin springs forward on the 29th


@contextlib.asynccontextmanager
async def _ticking(
    plan: TickPlan, queue: RunQueue, record: SlotRecord
) -> AsyncIterator[VirtualTime]:
    """``plan`` ticking from ``START`` on the virtual clock for the length of the block."""
    clock = ManualClock(START)
    time_ = VirtualTime(clock)
    ticker = Ticker(
        queue,
        [plan],
        jitter=0.0,
        slots=record,
        clock=TickClock(sleep=time_.sleep, now=clock, monotonic=time_.monotonic),
    )
    runner = asyncio.create_task(ticker.run())
    try:
        yield time_
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner


def _tick_queue() -> tuple[RunQueue, SlotRecord, list[Slot]]:
    record = SlotRecord()
    settled: list[Slot] = []
    record.listeners.add(settled.append)
    return RunQueue(8), record, settled


async def test_a_long_job_makes_the_next_slot_miss_its_start_deadline() -> None:
    queue, record, settled = _tick_queue()
    plan = TickPlan("report", schedule=parse_schedule("every 10m"), start_deadline_s=60.0)
    long_job = queue.submit(RunRequest("backup"))
    assert await queue.take() is long_job  # the executor is busy with it throughout
    async with _ticking(plan, queue, record) as time_:
        await time_.advance_to(START + timedelta(minutes=10))  # the slot is queued behind the job
        waiting = list(queue.waiting())
        assert [run.request.task for run in waiting] == ["report"]
        assert settled == []
        await time_.advance_to(START + timedelta(minutes=11))  # its deadline
    assert [(s.outcome, s.run_id) for s in settled] == [(MISSED, waiting[0].id)]
    assert "start deadline" in settled[0].reason
    assert settled[0].planned_at == (START + timedelta(minutes=10)).timestamp()
    assert waiting[0].result is not None
    assert waiting[0].result.reason == REASON_MISSED
    assert waiting[0].result.wire_code == "missed"
    assert queue.waiting_count() == 0


async def test_a_slot_that_starts_in_time_ran_with_its_result() -> None:
    queue, record, settled = _tick_queue()
    plan = TickPlan("report", schedule=parse_schedule("every 10m"), start_deadline_s=60.0)
    async with _ticking(plan, queue, record) as time_:
        await time_.advance_to(START + timedelta(minutes=10))
        run = await queue.take()
        assert run is not None
        run.mark_started()  # its deadline's watch stops here
        await time_.advance_to(START + timedelta(minutes=12))
        run.finish(RunResult(ok=False, reason="exit status 4", exit_code=4))
    assert [(s.outcome, s.run_id, s.result) for s in settled] == [(RAN, run.id, "failed")]


def test_a_tick_fired_past_its_deadline_is_missed_and_runs_nothing() -> None:
    clock = ManualClock(START)
    queue, record, settled = _tick_queue()
    plan = TickPlan("report", interval_s=600.0, start_deadline_s=30.0)
    ticker = Ticker(queue, [plan], slots=record, clock=TickClock(now=clock))
    assert not ticker.fire(plan, planned_at=clock().timestamp() - 31.0)
    assert queue.waiting_count() == 0
    assert [s.outcome for s in settled] == [MISSED]
    assert "past its start deadline of 30s" in settled[0].reason


async def test_a_late_tick_stands_for_the_slots_it_covers() -> None:
    queue, record, settled = _tick_queue()
    plan = TickPlan("report", schedule=parse_schedule("cron */10 * * * *"))
    async with _ticking(plan, queue, record) as time_:
        # Its first wait (one minute at most) ends at 22:45, not 22:01: a suspended host.
        await time_.step(44 * 60.0)
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
    queue, record, settled = _tick_queue()
    plan = TickPlan("nightly", schedule=parse_schedule("daily 02:30", "Europe/Berlin"))
    # the run of the 28th stays queued: the slot of the 29th is skipped, and says why
    async with _ticking(plan, queue, record) as time_:
        await time_.advance_to(datetime(2026, 3, 29, 1, 0, tzinfo=UTC))
    assert [(s.outcome, s.planned_at) for s in settled] == [
        (SKIPPED, datetime(2026, 3, 29, 1, 0, tzinfo=UTC).timestamp())
    ]
    assert settled[0].note.startswith("DST gap: 02:30 did not exist")
    assert record.open_slots == 1  # the 28th's, until its run ends
