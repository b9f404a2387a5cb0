"""Pure runner decisions (claim plans, finishes, backoff) and DST nights at the runner level."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from daemon.pg.plan import (
    backoff_s,
    plan_claim,
    plan_finish,
)
from daemon.pg.store.base import Claimed, DueJob
from daemon.pg.store.memory import MemoryStore
from tests.support.pgfakes import running
from tests.unit.pg.conftest import T0, due_job


def plan(job: DueJob, now: datetime = T0 + timedelta(seconds=1)):  # type: ignore[no-untyped-def]
    return plan_claim(job, now, default_max_attempts=3, misfire_grace_s=60.0)


def test_fresh_occurrence_runs_its_scheduled_time_as_attempt_one() -> None:
    p = plan(due_job())
    assert (p.run, p.scheduled_for, p.attempt) == (True, T0, 1)


def test_retry_keeps_the_occurrence_and_counts_the_attempt() -> None:
    p = plan(due_job(scheduled_for=T0 - timedelta(minutes=5), attempt=2))
    assert (p.run, p.scheduled_for, p.attempt) == (True, T0 - timedelta(minutes=5), 3)


def test_expired_lease_is_abandoned_and_retried_while_attempts_remain() -> None:
    p = plan(due_job(scheduled_for=T0, attempt=1, lease_owner="dead", current_run_id=7))
    assert (p.run, p.attempt, p.scheduled_for) == (True, 2, T0)
    assert p.abandon_error is not None
    assert "dead" in p.abandon_error


def test_expired_lease_with_no_attempts_left_fails_and_moves_on() -> None:
    p = plan(due_job(scheduled_for=T0, attempt=3, lease_owner="dead"))
    assert p.run is False
    assert p.last_status == "failed"
    assert p.next_run_at == T0 + timedelta(minutes=1)
    assert p.abandon_error is not None


def test_hand_written_row_gets_its_first_occurrence_and_does_not_run() -> None:
    now = T0 + timedelta(seconds=1)
    p = plan(due_job(schedule="daily 03:00", needs_schedule=True), now)
    assert p.run is False
    assert p.next_run_at == datetime(2024, 6, 2, 3, 0, tzinfo=UTC)


def test_invalid_schedule_disables_the_job_with_a_clear_error() -> None:
    p = plan(due_job(schedule="daily 25:00"))
    assert (p.run, p.enabled, p.last_status) == (False, False, "failed")
    assert p.last_error is not None
    assert "invalid schedule 'daily 25:00'" in p.last_error


def test_invalid_zone_disables_the_job() -> None:
    p = plan(due_job(tz="Mars/Olympus"))
    assert p.enabled is False
    assert "Mars/Olympus" in (p.last_error or "")


def test_coalesce_runs_the_latest_missed_occurrence_once() -> None:
    now = T0 + timedelta(minutes=30, seconds=5)
    p = plan(due_job(), now)
    assert (p.run, p.scheduled_for) == (True, T0 + timedelta(minutes=30))


def test_skip_drops_missed_occurrences_but_runs_one_that_is_merely_late() -> None:
    late = plan(due_job(misfire="skip"), T0 + timedelta(seconds=30))
    assert (late.run, late.scheduled_for) == (True, T0)
    missed = plan(due_job(misfire="skip", schedule="daily 12:00"), T0 + timedelta(hours=2))
    assert missed.run is False
    assert missed.next_run_at == T0 + timedelta(days=1)


@pytest.mark.parametrize(
    "year_one", [datetime.min.replace(tzinfo=UTC), datetime(1, 1, 1, 23, tzinfo=UTC)]
)
def test_a_next_run_at_out_of_range_is_rescheduled_from_now_not_run(year_one: datetime) -> None:
    # the claim reads BC and '-infinity' as the year 1; no zone's wall clock holds its first day
    p = plan(due_job(next_run_at=year_one, schedule="daily 12:00", tz="America/New_York"))
    assert (p.run, p.next_run_at, p.enabled) == (False, T0 + timedelta(hours=4), True)
    assert p.unusable is not None
    assert "out of range" in p.unusable
    assert p.last_error is not None


@pytest.mark.parametrize(
    "held_for", [datetime.min.replace(tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC)]
)
def test_a_retry_or_expired_lease_of_a_time_out_of_range_is_rescheduled_not_run(
    held_for: datetime,
) -> None:
    retry = plan(due_job(scheduled_for=held_for, attempt=1))
    assert (retry.run, retry.next_run_at, retry.unusable is not None) == (
        False,
        T0 + timedelta(minutes=1, seconds=1),
        True,
    )
    lease = plan(due_job(scheduled_for=held_for, attempt=1, lease_owner="dead", current_run_id=7))
    assert (lease.run, lease.abandon_error is not None) == (False, True)
    assert lease.unusable is not None
    assert "scheduled_for" in lease.unusable


@pytest.mark.parametrize(("attempt", "low", "high"), [(1, 30, 60), (2, 60, 120), (4, 240, 480)])
def test_backoff_grows_exponentially_with_jitter(attempt: int, low: float, high: float) -> None:
    rng = random.Random(7)
    delays = [backoff_s(attempt, 60.0, rng) for _ in range(200)]
    assert low <= min(delays)
    assert max(delays) <= high
    assert max(delays) - min(delays) > (high - low) / 4  # jittered, not constant


def test_backoff_is_capped() -> None:
    assert backoff_s(40, 60.0) <= 3600.0
    assert backoff_s(3, 0.0) == 0.0


def test_failed_attempt_with_budget_left_is_a_retry() -> None:
    claimed = Claimed(due_job(), 5, T0, 1)
    f = plan_finish(
        claimed,
        ok=False,
        cancelled=False,
        error="boom",
        output=None,
        started_at=T0,
        finished_at=T0,
        default_max_attempts=3,
        backoff_base_s=10.0,
    )
    assert (f.status, f.scheduled_for, f.attempt, f.next_run_at) == ("failed", T0, 1, None)
    assert f.retry_in_s is not None
    assert 5.0 <= f.retry_in_s <= 10.0


def test_success_advances_from_the_scheduled_time_not_from_now() -> None:
    claimed = Claimed(due_job(schedule="every 1h"), 5, T0, 2)
    f = plan_finish(
        claimed,
        ok=True,
        cancelled=False,
        error="",
        output={"rows": 3},
        started_at=T0 + timedelta(minutes=20),
        finished_at=T0 + timedelta(minutes=50),
        default_max_attempts=3,
        backoff_base_s=10.0,
    )
    assert (f.status, f.next_run_at, f.attempt, f.error) == (
        "succeeded",
        T0 + timedelta(hours=1),
        0,
        None,
    )


# -- DST at the runner level: the in-memory store's clock is moved occurrence by occurrence --


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("spec", "tz", "first", "expected"),
    [
        # autumn: 02:30 happens twice in Berlin; it must run once (the first one)
        (
            "daily 02:30",
            "Europe/Berlin",
            "2024-10-26T00:30",
            ["2024-10-26T00:30", "2024-10-27T00:30", "2024-10-28T01:30", "2024-10-29T01:30"],
        ),
        # spring: 02:30 does not exist in Berlin; it runs right after the gap
        (
            "daily 02:30",
            "Europe/Berlin",
            "2024-03-30T01:30",
            ["2024-03-30T01:30", "2024-03-31T01:00", "2024-04-01T00:30", "2024-04-02T00:30"],
        ),
        (
            "daily 01:30",
            "America/New_York",
            "2024-11-02T05:30",
            ["2024-11-02T05:30", "2024-11-03T05:30", "2024-11-04T06:30", "2024-11-05T06:30"],
        ),
        (
            "daily 02:30",
            "America/New_York",
            "2024-03-09T07:30",
            ["2024-03-09T07:30", "2024-03-10T07:00", "2024-03-11T06:30", "2024-03-12T06:30"],
        ),
    ],
)
async def test_dst_nights_run_each_occurrence_once(
    spec: str, tz: str, first: str, expected: list[str]
) -> None:
    clock = [_utc(first) + timedelta(seconds=1)]
    store = MemoryStore(clock=lambda: clock[0])
    store.add("dst", "default", spec, _utc(first), tz=tz)
    async with running(store, poll_interval_s=3600.0):
        for count in range(1, len(expected) + 1):
            await store.wait_for(
                lambda n=count: (
                    len(store.runs_of("dst")) == n  # type: ignore[misc]
                    and store.job("dst").lease_owner is None
                )
            )
            next_run = store.job("dst").next_run_at
            assert next_run is not None
            if count < len(expected):
                assert next_run == _utc(expected[count])
                clock[0] = next_run + timedelta(seconds=1)  # the night moves on
                store.notify()
    ran = sorted(r.scheduled_for for r in store.runs_of("dst"))
    assert ran == [_utc(t) for t in expected]


def test_a_schedule_that_fails_to_compute_disables_that_job_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Broken:
        def next_after(self, _t: datetime) -> datetime | None:
            raise RuntimeError("no occurrence of '0 0 30 2 *' after 2024-06-01")

    monkeypatch.setattr("daemon.pg.plan.schedule_for", lambda _spec, _tz: Broken())
    p = plan(due_job())
    assert (p.run, p.enabled, p.last_status) == (False, False, "failed")
    assert "RuntimeError: no occurrence" in (p.last_error or "")
    # an expired lease's run is abandoned on the way
    p = plan(due_job(lease_owner="dead", current_run_id=7, scheduled_for=T0, attempt=3))
    assert p.enabled is False
    assert p.abandon_error is not None
    # and a finish of a claimed run ends the job rather than raising into the executor
    claimed = Claimed(due_job(), run_id=1, scheduled_for=T0, attempt=3)
    f = plan_finish(
        claimed, ok=True, cancelled=False, error=None, output=None, started_at=T0,
        finished_at=T0, default_max_attempts=3, backoff_base_s=1.0,
    )  # fmt: skip
    assert (f.status, f.next_run_at) == ("succeeded", None)


def test_a_retry_past_its_budget_written_by_hand_is_not_run() -> None:
    p = plan(due_job(scheduled_for=T0, attempt=2_147_483_647))
    assert (p.run, p.last_status) == (False, "failed")
    assert p.next_run_at == T0 + timedelta(minutes=1)
