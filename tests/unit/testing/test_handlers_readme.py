"""docs/testing.md's example of ``daemon.testing``, kept word for word (tests/static checks)."""

from datetime import UTC, datetime, timedelta
from typing import Any

from daemon.testing import JobBoard, ManualClock, RunContext, run_handler


async def nightly(run: RunContext) -> dict[str, Any]:  # the handler under test
    if run.payload.get("region") is None:
        raise ValueError("no region")
    return {"region": run.payload["region"], "attempt": run.context.get("ATTEMPT")}


async def test_nightly_reports_its_region() -> None:
    result = await run_handler(nightly, payload={"region": "eu"}, timeout_s=5)
    assert result.ok, result.reason
    assert result.output == {"region": "eu", "attempt": None}


async def test_nightly_without_a_region_fails() -> None:
    result = await run_handler(nightly, payload={})
    assert not result.ok
    assert result.reason == "ValueError: no region"


async def test_nightly_runs_once_on_the_spring_forward_day_and_retries() -> None:
    board = JobBoard(ManualClock(datetime(2026, 3, 28, 12, tzinfo=UTC)), backoff_s=60)
    board.add("nightly", "nightly", daily="02:30", tz="Europe/Berlin", payload={})
    # 02:30 does not exist in Berlin on 2026-03-29: the run is at 03:00 CEST (01:00Z)
    (firing,) = await board.advance_to(datetime(2026, 3, 29, 1, 0, tzinfo=UTC))
    outcome = await board.run(firing, nightly)  # fails: the payload has no region
    assert outcome.retry
    (retry,) = await board.advance(timedelta(minutes=1))
    assert (retry.attempt, retry.scheduled_for) == (2, firing.scheduled_for)
    outcome = await board.succeed(retry)
    assert outcome.next_run_at == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)  # 02:30 CEST
