"""What the Postgres runner's tests share: the time of the wall clock, as the store compares it."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)
