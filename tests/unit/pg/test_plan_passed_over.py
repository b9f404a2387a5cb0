"""The occurrences a claim passes over, as the planner says them: coalesced into the run it
makes, or missed with misfire = skip; none for a claim that passes over nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from daemon.pg.missed import COUNT_WALK_MAX
from daemon.pg.plan import plan_claim
from daemon.pg.store.base import ClaimPlan, DueJob, PassedOver
from tests.unit.pg.conftest import T0, due_job


def plan(job: DueJob, now: datetime) -> ClaimPlan:
    return plan_claim(job, now, default_max_attempts=3, misfire_grace_s=60.0)


@pytest.mark.parametrize(
    ("misfire", "run", "when", "passed_over"),
    [
        # coalesce counts the occurrences before the one it runs, which is its scheduled time
        (
            "coalesce",
            True,
            ("scheduled_for", T0 + timedelta(minutes=30)),
            PassedOver(
                "coalesced",
                T0,
                30,
                "30 occurrences from 2024-06-01T12:00:00Z run once as 2024-06-01T12:30:00Z",
            ),
        ),
        # skip counts every occurrence it does not run, and goes on at the next one
        (
            "skip",
            False,
            ("next_run_at", T0 + timedelta(minutes=31)),
            PassedOver(
                "missed",
                T0,
                31,
                "31 occurrences from 2024-06-01T12:00:00Z to 2024-06-01T12:30:00Z not run",
            ),
        ),
    ],
)
def test_a_late_claim_counts_the_occurrences_it_passes_over(
    misfire: str, run: bool, when: tuple[str, datetime], passed_over: PassedOver
) -> None:
    p = plan(due_job(misfire=misfire), T0 + timedelta(minutes=30, seconds=5))
    field, at = when
    assert (p.run, getattr(p, field)) == (run, at)
    assert p.passed_over == passed_over


def test_skip_of_one_occurrence_too_late_counts_it() -> None:
    p = plan(due_job(misfire="skip", schedule="daily 12:00"), T0 + timedelta(hours=2))
    assert p.run is False
    assert p.passed_over is not None
    assert (p.passed_over.status, p.passed_over.count) == ("missed", 1)
    assert p.passed_over.note.startswith("1 occurrence from")


def test_claims_that_pass_over_nothing_record_nothing() -> None:
    merely_late = plan(due_job(misfire="skip"), T0 + timedelta(seconds=30))
    plain = plan(due_job(), T0 + timedelta(seconds=1))
    retry = plan(
        due_job(scheduled_for=T0, attempt=1, next_run_at=T0 + timedelta(minutes=30)),
        T0 + timedelta(minutes=31),
    )
    expired = plan(
        due_job(scheduled_for=T0, attempt=1, lease_owner="dead", current_run_id=7),
        T0 + timedelta(minutes=30),
    )
    hand_written = plan(due_job(needs_schedule=True), T0 + timedelta(minutes=30))
    for p in (merely_late, plain, retry, expired, hand_written):
        assert p.passed_over is None


def test_a_row_years_behind_is_counted_in_bounded_work_and_said_at_least() -> None:
    now = datetime(2036, 6, 1, 12, 0, 30, tzinfo=UTC)
    behind = now - timedelta(days=3653)
    p = plan(due_job(schedule="cron * * * * *", next_run_at=behind), now)
    assert (p.run, p.scheduled_for) == (True, now.replace(second=0))
    assert p.passed_over is not None
    assert p.passed_over.count == COUNT_WALK_MAX
    assert p.passed_over.note.startswith(f"at least {COUNT_WALK_MAX} occurrences from")
