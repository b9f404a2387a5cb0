"""The ticker at start with a state directory: the slots planned while the daemon was down are
settled once (the newest in the window caught up, older ones coalesced or missed), an interval's
grid goes on where it was, and every slot planned is written down for the next start."""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.core.runqueue import RunQueue, RunRequest, RunResult
from daemon.core.ticker.catchup import MISFIRE_COALESCE, MISFIRE_SKIP
from daemon.core.ticker.clock import TickClock
from daemon.core.ticker.slot_state import SlotState
from daemon.core.ticker.slots import CAUGHT_UP, COALESCED, MISSED, Slot, SlotRecord
from daemon.core.ticker.state_file import LAST_PLANNED_MAX_S, LAST_PLANNED_MIN_S
from daemon.core.ticker.ticker import Ticker, TickPlan
from daemon.schedules import parse_schedule
from daemon.testing import ManualClock, VirtualTime
from daemon.wire.reasons import REASON_MISSED

NOW = datetime(2026, 6, 8, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


async def _never(_seconds: float) -> None:
    await asyncio.Event().wait()  # the loops wait; this test looks at what start-up did


@asynccontextmanager
async def _started(
    tmp_path: Path, plan: TickPlan, last_planned: datetime | None, now: datetime = NOW
) -> AsyncIterator[tuple[Ticker, RunQueue, SlotRecord, SlotState]]:
    """A ticker of ``plan`` started at ``now`` over the state in ``tmp_path``, where
    ``last_planned`` (if any) is written first as the task's last planned slot."""
    earlier = SlotState(tmp_path)
    earlier.open()
    if last_planned is not None:
        earlier.planned(plan.task, last_planned.timestamp())
    earlier.close()
    state = SlotState(tmp_path)
    state.open()
    queue = RunQueue(4)
    record = SlotRecord()
    clock = ManualClock(now)
    ticker = Ticker(
        queue,
        [plan],
        jitter=0.0,
        slots=record,
        state=state,
        clock=TickClock(sleep=_never, now=clock),
    )
    running = asyncio.create_task(ticker.run())
    for _ in range(5):
        await asyncio.sleep(0)
    try:
        yield ticker, queue, record, state
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        state.close()


def _daily(**options: object) -> TickPlan:
    return TickPlan("nightly", schedule=parse_schedule("daily 02:30", "UTC"), **options)  # type: ignore[arg-type]


async def test_a_week_down_runs_the_newest_slot_once_and_accounts_for_the_rest(
    tmp_path: Path,
) -> None:
    plan = _daily(catchup_window_s=3 * 86400.0)
    async with _started(tmp_path, plan, NOW - 7 * DAY) as (_ticker, queue, record, state):
        assert queue.waiting_count() == 1  # one run, not seven
        on_disk = json.loads((tmp_path / "slots.json").read_text())  # written before the run:
        assert (
            on_disk["tasks"]["nightly"]["last_planned"]
            == NOW.replace(hour=2, minute=30).timestamp()
        )
        run = await queue.take()
        assert run is not None
        assert run.request.task == "nightly"
        assert run.request.trigger == "tick"
        run.mark_started()
        run.finish(RunResult(ok=True))
        queue.release(run)
        outcomes = {slot.outcome: slot for slot in record.last("nightly")}
        assert outcomes[MISSED].count == 4  # the 2nd to the 5th: beyond the window
        assert "catchup_window" in outcomes[MISSED].reason
        assert outcomes[COALESCED].count == 2  # the 6th and the 7th, covered by the run
        assert outcomes[COALESCED].run_id == run.id
        caught_up = outcomes[CAUGHT_UP]
        assert caught_up.planned_at == datetime(2026, 6, 8, 2, 30, tzinfo=UTC).timestamp()
        assert caught_up.run_id == run.id
        assert caught_up.result == "succeeded"
        assert state.last_planned["nightly"] == caught_up.planned_at


async def test_skip_runs_nothing_and_records_the_gap_missed(tmp_path: Path) -> None:
    plan = _daily(misfire=MISFIRE_SKIP)
    async with _started(tmp_path, plan, NOW - 3 * DAY) as (_ticker, queue, record, state):
        assert queue.waiting_count() == 0
        (missed,) = record.last("nightly")
        assert (missed.outcome, missed.count) == (MISSED, 3)
        assert "misfire: skip" in missed.reason
        assert state.last_planned["nightly"] == datetime(2026, 6, 8, 2, 30, tzinfo=UTC).timestamp()


async def test_a_restart_between_two_slots_runs_nothing_at_start(tmp_path: Path) -> None:
    last = datetime(2026, 6, 8, 2, 30, tzinfo=UTC)
    async with _started(tmp_path, _daily(), last) as (_ticker, queue, record, _state):
        assert queue.waiting_count() == 0
        assert record.last("nightly") == []


async def test_without_state_for_the_task_nothing_is_caught_up(tmp_path: Path) -> None:
    async with _started(tmp_path, _daily(), None) as (_ticker, queue, record, _state):
        assert queue.waiting_count() == 0
        assert record.last("nightly") == []


async def test_an_interval_goes_on_on_its_grid_instead_of_firing_at_start(tmp_path: Path) -> None:
    plan = TickPlan("hourly", interval_s=3600.0, fire_on_start=True, misfire=MISFIRE_COALESCE)
    last = NOW - timedelta(minutes=20)
    async with _started(tmp_path, plan, last) as (_ticker, queue, record, _state):
        assert queue.waiting_count() == 0  # the state says the next slot is 40 minutes away
        assert record.last("hourly") == []
        assert plan.next_fire_at is not None
        waits_s = plan.next_fire_at - time.time()  # the ticker says it on the host's clock
        assert abs(waits_s - 40 * 60) < 5.0


async def test_a_task_is_accounted_for_from_its_first_start_not_its_first_slot(
    tmp_path: Path,
) -> None:
    """Started at noon, stopped before its 02:30 slot, back two days later: both slots missed
    while down are settled (the newer caught up), though none had fired before."""
    async with _started(tmp_path, _daily(), None) as (_ticker, queue, record, state):
        assert queue.waiting_count() == 0
        assert state.last_planned["nightly"] == NOW.timestamp()
    later = NOW + 2 * DAY
    async with _started(tmp_path, _daily(), None, later) as (_ticker, queue, record, _state):
        assert queue.waiting_count() == 1
        (coalesced,) = record.last("nightly")  # the caught-up slot settles when its run ends
        assert (coalesced.outcome, coalesced.count) == (COALESCED, 1)


async def test_a_slot_kept_a_day_ahead_counts_from_now_and_the_next_restart_catches_up(
    tmp_path: Path, logs: list[MutableMapping[str, Any]]
) -> None:
    """The host's clock was a day ahead when the last life wrote its slot, and was set back:
    the slot past now counts from now, so a restart 15 hours on still catches up."""
    async with _started(tmp_path, _daily(), NOW + DAY) as (_ticker, queue, record, state):
        assert queue.waiting_count() == 0
        assert record.last("nightly") == []
        assert state.last_planned["nightly"] == NOW.timestamp()
    (future,) = [line for line in logs if line["event"] == "state.future_slot"]
    assert (future["task"], future["ahead_s"]) == ("nightly", DAY.total_seconds())
    later = NOW + timedelta(hours=15)  # past the 02:30 slot of the next day
    async with _started(tmp_path, _daily(), None, later) as (_ticker, queue, _record, state):
        assert queue.waiting_count() == 1  # the slot planned while down is caught up
        run = await queue.take()
        assert run is not None
        assert state.last_planned["nightly"] == datetime(2026, 6, 9, 2, 30, tzinfo=UTC).timestamp()


async def test_a_slot_older_than_its_start_deadline_is_missed_not_caught_up(
    tmp_path: Path,
) -> None:
    plan = _daily(start_deadline_s=600.0, catchup_window_s=3 * 86400.0)
    async with _started(tmp_path, plan, NOW - 3 * DAY) as (_ticker, queue, record, _state):
        assert queue.waiting_count() == 0  # 02:30 is 9.5 hours ago: past its 10 minutes
        (missed,) = record.last("nightly")
        assert (missed.outcome, missed.count) == (MISSED, 3)
        assert missed.reason == "the daemon was down; older than its start_deadline of 600s"


async def test_a_slot_within_its_start_deadline_is_caught_up(tmp_path: Path) -> None:
    plan = _daily(start_deadline_s=600.0)
    now = datetime(2026, 6, 8, 2, 35, tzinfo=UTC)  # five minutes after the slot
    async with _started(tmp_path, plan, NOW - 3 * DAY, now) as (_ticker, queue, record, _state):
        assert queue.waiting_count() == 1
        (missed,) = record.last("nightly")  # the two before: too late
        assert (missed.outcome, missed.count) == (MISSED, 2)
        assert "start_deadline" in missed.reason


async def test_a_catch_up_run_still_queued_at_its_start_deadline_leaves_the_queue(
    tmp_path: Path,
) -> None:
    """The executor is busy with a long job at start: the caught-up slot's run waits, and at
    its deadline leaves the queue, its slot missed, as a tick's run does in a running daemon."""
    restart = datetime(2026, 6, 8, 2, 35, tzinfo=UTC)
    earlier = SlotState(tmp_path)
    earlier.open()
    earlier.planned("nightly", (restart - DAY).timestamp())
    earlier.close()
    state = SlotState(tmp_path)
    state.open()
    queue, record = RunQueue(4), SlotRecord()
    settled: list[Slot] = []
    record.listeners.add(settled.append)
    long_job = queue.submit(RunRequest("backup"))
    assert await queue.take() is long_job
    clock = ManualClock(restart)
    time_ = VirtualTime(clock)
    ticker = Ticker(
        queue,
        [_daily(start_deadline_s=600.0)],
        jitter=0.0,
        slots=record,
        state=state,
        clock=TickClock(sleep=time_.sleep, now=clock, monotonic=time_.monotonic),
    )
    running = asyncio.create_task(ticker.run())
    try:
        await time_.advance_to(restart + timedelta(minutes=1))
        (waiting,) = queue.waiting()
        assert settled == []
        await time_.advance_to(restart + timedelta(minutes=6))  # 02:40: the slot's deadline
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        state.close()
    assert [(slot.outcome, slot.run_id) for slot in settled] == [(MISSED, waiting.id)]
    assert waiting.result is not None
    assert waiting.result.reason == REASON_MISSED
    assert queue.waiting_count() == 0


@settings(max_examples=60, deadline=None)
@given(
    timing=st.sampled_from(
        [
            {"schedule": parse_schedule("cron 0 0 1 1 *", "Europe/Berlin")},
            {"schedule": parse_schedule("every 1h")},
            {"interval_s": 0.05},
            {"interval_s": 86400.0 * 365},
        ]
    ),
    last_planned=st.floats(min_value=LAST_PLANNED_MIN_S, max_value=LAST_PLANNED_MAX_S),
    misfire=st.sampled_from([MISFIRE_COALESCE, MISFIRE_SKIP]),
)
async def test_any_slot_the_state_file_may_hold_is_caught_up_without_an_error(
    timing: dict[str, Any], last_planned: float, misfire: str
) -> None:
    """Every value the file's model lets through, at the edges of the years too: the start
    settles the gap, and the state then holds a slot that is not past now."""
    with tempfile.TemporaryDirectory() as directory:
        state = SlotState(Path(directory))
        state.open()
        state.planned("job", last_planned)  # as if read from the file
        ticker = Ticker(
            RunQueue(4),
            [TickPlan("job", misfire=misfire, **timing)],
            jitter=0.0,
            state=state,
            clock=TickClock(sleep=_never, now=ManualClock(NOW)),
        )
        running = asyncio.create_task(ticker.run())
        for _ in range(5):
            await asyncio.sleep(0)
        running.cancel()
        (ended,) = await asyncio.gather(running, return_exceptions=True)
        state.close()
    assert isinstance(ended, asyncio.CancelledError)  # cancelled here, not ended by an error
    kept = state.last_planned["job"]
    assert min(last_planned, NOW.timestamp()) <= kept <= max(last_planned, NOW.timestamp())
    assert kept <= NOW.timestamp()
