"""``JobBoard`` (daemon/testing/jobs.py) as a user's tests would use it: jobs fire on the manual
clock, DST nights as cron runs them, retries with backoff, the job context, the add forms."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from daemon.testing import (
    JobBoard,
    ManualClock,
    RunContext,
    fixtures,
)

# what ``pytest_plugins = ["daemon.testing.fixtures"]`` in a user's conftest.py gives
manual_clock = fixtures.manual_clock
job_board = fixtures.job_board

BERLIN = ZoneInfo("Europe/Berlin")


async def test_an_every_job_fires_on_its_interval(job_board: JobBoard) -> None:
    start = job_board.clock()
    assert job_board.add("sync", "sync", every="5m") == start + timedelta(minutes=5)
    assert await job_board.advance(minutes=4, seconds=59) == []
    (firing,) = await job_board.advance(1)
    assert (firing.name, firing.task, firing.attempt) == ("sync", "sync", 1)
    assert firing.scheduled_for == start + timedelta(minutes=5)
    outcome = await job_board.succeed(firing)
    assert outcome.status == "succeeded"
    assert not outcome.retry
    assert outcome.next_run_at == start + timedelta(minutes=10)


async def test_a_firing_is_not_due_again_until_recorded(job_board: JobBoard) -> None:
    job_board.add("sync", every="1m")
    (firing,) = await job_board.advance(60)
    assert await job_board.due() == []
    await job_board.succeed(firing)
    with pytest.raises(ValueError, match="already recorded"):
        await job_board.succeed(firing)


async def test_a_daily_job_in_the_spring_gap_runs_once_that_day() -> None:
    # Europe/Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST, so 02:30 does not exist.
    board = JobBoard(ManualClock(datetime(2026, 3, 28, 12, 0, tzinfo=BERLIN)))
    first = board.add("nightly", "report", daily="02:30", tz="Europe/Berlin")
    assert first == datetime(2026, 3, 29, 3, 0, tzinfo=BERLIN)  # the gap's end, as cron does
    assert await board.advance_to(datetime(2026, 3, 29, 0, 59, tzinfo=UTC)) == []  # 01:59 CET
    (firing,) = await board.advance(minutes=1)
    assert firing.scheduled_for == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    outcome = await board.succeed(firing)
    assert outcome.next_run_at == datetime(2026, 3, 30, 2, 30, tzinfo=BERLIN)
    assert outcome.next_run_at == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)  # 02:30 CEST


async def test_a_daily_job_in_the_repeated_autumn_hour_runs_once() -> None:
    # Europe/Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET, so 02:30 happens twice.
    board = JobBoard(ManualClock(datetime(2026, 10, 24, 12, 0, tzinfo=UTC)))
    board.add("nightly", daily="02:30", tz="Europe/Berlin")
    (firing,) = await board.advance_to(datetime(2026, 10, 25, 0, 30, tzinfo=UTC))  # 02:30 CEST
    outcome = await board.succeed(firing)
    assert await board.advance_to(datetime(2026, 10, 25, 1, 30, tzinfo=UTC)) == []  # 02:30 CET
    assert outcome.next_run_at == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)  # 02:30 CET


async def test_a_failed_run_is_retried_with_backoff_then_the_job_moves_on() -> None:
    board = JobBoard(max_attempts=3, backoff_s=60)
    start = board.clock()
    board.add("sync", every="1h")
    (first,) = await board.advance(hours=1)
    failed = await board.fail(first, "upstream down")
    assert failed.status == "failed"
    assert failed.retry
    assert failed.next_run_at is not None
    # the first retry waits 30-60 s (60 s backoff, jitter), the second 60-120 s
    assert timedelta(seconds=30) <= failed.next_run_at - board.clock() <= timedelta(seconds=60)
    assert await board.advance_to(failed.next_run_at - timedelta(seconds=1)) == []
    (second,) = await board.advance(1)
    assert (second.attempt, second.scheduled_for) == (2, first.scheduled_for)
    failed_again = await board.fail(second)
    assert failed_again.next_run_at is not None
    waited = failed_again.next_run_at - board.clock()
    assert timedelta(seconds=60) <= waited <= timedelta(seconds=120)
    (third,) = await board.advance_to(failed_again.next_run_at)
    assert third.attempt == 3
    last = await board.fail(third, "still down")
    assert last.status == "failed"
    assert not last.retry  # 3 of 3 attempts used
    assert last.next_run_at == start + timedelta(hours=2)
    (next_hour,) = await board.advance_to(start + timedelta(hours=2))
    assert next_hour.attempt == 1


async def test_a_job_runs_its_handler_with_the_job_context(job_board: JobBoard) -> None:
    seen: list[dict[str, str]] = []

    async def handler(ctx: RunContext) -> dict[str, Any]:
        seen.append(dict(ctx.context))
        if ctx.context["ATTEMPT"] == "1":
            raise RuntimeError("flaky")
        return {"payload": ctx.payload}

    job_board.add("flaky", "work", every="10m", payload={"full": True})
    (first,) = await job_board.advance(minutes=10)
    assert (await job_board.run(first, handler)).retry
    (retry,) = await job_board.advance(minutes=1)
    done = await job_board.run(retry, handler)
    assert done.status == "succeeded"
    occurrence = "2026-01-01T00:10:00Z"
    assert seen == [
        {"JOB": "flaky", "SCHEDULED_FOR": occurrence, "ATTEMPT": "1"},
        {"JOB": "flaky", "SCHEDULED_FOR": occurrence, "ATTEMPT": "2"},
    ]


async def test_the_jobs_add_forms_and_their_first_runs(job_board: JobBoard) -> None:
    # 2026-01-01 is a Thursday.
    assert job_board.add("w", weekly=("sun", "04:00")) == datetime(2026, 1, 4, 4, tzinfo=UTC)
    assert job_board.add("c", cron="0 6 1 */3 *") == datetime(2026, 1, 1, 6, tzinfo=UTC)
    at = job_board.add("once", at="2026-01-02T08:00:00+01:00")
    assert at == datetime(2026, 1, 2, 7, tzinfo=UTC)
    (firing,) = await job_board.advance_to(datetime(2026, 1, 1, 6, tzinfo=UTC))
    assert firing.name == "c"
    await job_board.succeed(firing)
    (once,) = await job_board.advance_to(datetime(2026, 1, 2, 7, tzinfo=UTC))
    assert (await job_board.succeed(once)).next_run_at is None  # a one-shot is over
    assert job_board.next_run_at("once") is None


def test_a_schedule_is_taken_as_cron_users_write_it(job_board: JobBoard) -> None:
    assert job_board.add("b", schedule="0 6 1 */3 *") == datetime(2026, 1, 1, 6, tzinfo=UTC)
    assert job_board.add("e", schedule="@every 5m") == datetime(2026, 1, 1, 0, 5, tzinfo=UTC)


def test_a_bad_schedule_is_refused(job_board: JobBoard) -> None:
    with pytest.raises(ValueError, match="HH:MM"):
        job_board.add("bad", daily="25:00")
    with pytest.raises(ValueError, match="unknown time zone"):
        job_board.add("zone", daily="02:30", tz="Mars/Olympus")
    with pytest.raises(ValueError, match="exactly one"):
        job_board.add("two", every="5m", daily="02:30")
