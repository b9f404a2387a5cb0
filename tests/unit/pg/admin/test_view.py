"""How ``runbroker jobs`` shows a job: its schedule, whatever the row holds."""

from __future__ import annotations

import pytest

from daemon.pg.admin.view import schedule_text
from daemon.pg.store.admin_records import JobInfo


def _job(schedule: str, tz: str) -> JobInfo:
    return JobInfo(
        id=1, name="j", task="t", payload={}, schedule=schedule, tz=tz, enabled=True,
        next_run_at=None, scheduled_for=None, attempt=0, max_attempts=None, misfire="coalesce",
        depends_on=(), lease_owner=None, lease_expires_at=None, last_run_at=None,
        last_status=None, last_error=None,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("schedule", "tz", "shown"),
    [
        (
            "at 2027-01-01T08:00:00Z",
            "Europe/Berlin",
            "at 2027-01-01T09:00:00+01:00 (Europe/Berlin)",
        ),
        # a one-shot its zone cannot show (past 9999 in Tokyo, before the year 1 in New York)
        ("at 9999-12-31T20:00:00Z", "Asia/Tokyo", "at 9999-12-31T20:00:00Z (Asia/Tokyo)"),
        (
            "at 0001-01-01T02:00:00Z",
            "America/New_York",
            "at 0001-01-01T02:00:00Z (America/New_York)",
        ),
        ("every 1m", "No/Such", "every 1m (No/Such)"),
        ("at 2027-01-01T08:00:00Z", "Europe", "at 2027-01-01T08:00:00Z (Europe)"),
        ("not a schedule", "UTC", "not a schedule (UTC)"),
    ],
)
def test_a_schedule_is_shown_in_its_zone_or_as_written(schedule: str, tz: str, shown: str) -> None:
    assert schedule_text(_job(schedule, tz)) == shown
