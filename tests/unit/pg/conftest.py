"""What the Postgres runner's tests share: the time of the wall clock, as the store compares
it, and a due job row made to measure."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from daemon.pg.store.base import DueJob

T0 = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
# A fresh occurrence of a job due at T0: every field a claim reads, the plain case's values.
PLAIN_DUE_JOB = DueJob(
    id=1,
    name="j",
    task="default",
    payload={},
    schedule="every 1m",
    tz="UTC",
    next_run_at=T0,
    scheduled_for=None,
    attempt=0,
    max_attempts=None,
    misfire="coalesce",
    depends_on=(),
    needs_schedule=False,
    lease_owner=None,
    current_run_id=None,
)


def now() -> datetime:
    return datetime.now(UTC)


def due_job(**changes: Any) -> DueJob:
    """A due job row: the plain one with ``changes``."""
    return dataclasses.replace(PLAIN_DUE_JOB, **changes)
