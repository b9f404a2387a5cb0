"""Times as text: RFC 3339 in UTC with a ``Z``, milliseconds only when there are some."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from daemon.core.rfc3339 import rfc3339_utc, rfc3339_utc_at


def test_a_time_is_written_in_utc_with_milliseconds_only_when_there_are_some() -> None:
    berlin = timezone(timedelta(hours=2))
    assert rfc3339_utc(datetime(2026, 3, 29, 3, 30, tzinfo=berlin)) == "2026-03-29T01:30:00Z"
    assert rfc3339_utc(datetime(2026, 3, 29, 1, 30, 0, 250_000, UTC)) == "2026-03-29T01:30:00.250Z"


def test_a_unix_time_is_written_as_its_utc_datetime_is() -> None:
    assert rfc3339_utc_at(0) == "1970-01-01T00:00:00Z"
    at = datetime(2026, 12, 7, 18, 0, 0, 500_000, UTC)
    assert rfc3339_utc_at(at.timestamp()) == rfc3339_utc(at) == "2026-12-07T18:00:00.500Z"
