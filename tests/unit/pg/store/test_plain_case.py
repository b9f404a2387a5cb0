"""The claim's plain case in Python: which rows it takes, and that each of its conditions reads
a field the due row has (a column named wrong would fail every claim of a fresh occurrence)."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta

import pytest

from daemon.pg.plan import plan_claim
from daemon.pg.store.base import DueJob
from daemon.pg.store.plain_case import PLAIN_CASE, AnyOf, Condition, is_plain
from tests.unit.pg.conftest import T0, due_job

NOW = T0 + timedelta(seconds=30)
GRACE_S = 60.0
FRESH = due_job(schedule="every 1h", misfire="skip")


def _plain(job: DueJob, following: datetime = T0 + timedelta(hours=1)) -> bool:
    return is_plain(job, NOW, GRACE_S, lambda: following)


def test_a_fresh_occurrence_on_time_is_plain_and_runs_as_attempt_one() -> None:
    assert _plain(FRESH)
    p = plan_claim(FRESH, NOW, default_max_attempts=3, misfire_grace_s=GRACE_S)
    assert (p.run, p.scheduled_for, p.attempt) == (True, T0, 1)


@pytest.mark.parametrize(
    "changed",
    [
        {"lease_owner": "dead"},
        {"needs_schedule": True},
        {"scheduled_for": T0, "attempt": 1},
        {"next_run_at": datetime(1, 1, 1, tzinfo=UTC)},
        {"next_run_at": NOW - timedelta(seconds=GRACE_S + 1)},  # misfire skip, too late
    ],
)
def test_a_row_that_breaks_one_condition_is_not_plain(changed: dict[str, object]) -> None:
    assert not _plain(replace(FRESH, **changed))  # type: ignore[arg-type]


def test_a_missed_occurrence_is_not_plain_and_late_coalesce_is() -> None:
    assert not _plain(FRESH, following=NOW)  # the next one is due too: one was missed
    late = replace(FRESH, misfire="coalesce", next_run_at=NOW - timedelta(minutes=30))
    assert _plain(late)


def _leaves(conditions: tuple[Condition, ...]) -> list[Condition]:
    found: list[Condition] = []
    for c in conditions:
        found += _leaves(c.conditions) if isinstance(c, AnyOf) else [c]
    return found


def test_every_condition_reads_a_column_the_due_row_has() -> None:
    due_fields = {f.name for f in fields(DueJob)}
    columns = [getattr(c, "column", None) for c in _leaves(PLAIN_CASE)]
    named = [column for column in columns if column is not None]
    assert len(named) >= 5
    for column in named:
        assert column in due_fields
