"""``next_after``, the one question every schedule form answers (daemon/schedules/base.py): aware
times in, UTC out, nothing past the end; ``every`` counts elapsed time and ``at`` fires once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from daemon.schedules import parse_schedule
from tests.unit.schedules.zones import BERLIN, NEW_YORK, utc


def test_next_after_rejects_naive_datetimes() -> None:
    for spec in ("every 1m", "daily 02:30", "cron @hourly", "at 2026-05-01T09:00:00Z"):
        with pytest.raises(ValueError, match="aware"):
            parse_schedule(spec).next_after(datetime(2026, 5, 1, 8, 0))


def test_every_is_fixed_elapsed_time_from_t() -> None:
    schedule = parse_schedule("every 90s", BERLIN)
    t = utc(2026, 3, 29, 0, 59, 30, 123456)
    assert schedule.next_after(t) == t + timedelta(seconds=90)
    sub_second = parse_schedule("every 250ms")
    assert sub_second.next_after(t) == t + timedelta(milliseconds=250)


@pytest.mark.parametrize(
    ("spec", "t", "expected"),
    [
        ("daily 02:30", utc(2026, 5, 1, 1, 0), utc(2026, 5, 1, 2, 30)),
        ("daily 02:30", utc(2026, 5, 1, 2, 30), utc(2026, 5, 2, 2, 30)),  # strictly after
        ("daily 02:30", utc(2026, 5, 1, 2, 29, 59, 999999), utc(2026, 5, 1, 2, 30)),
        ("daily 02:30", utc(2026, 5, 1, 2, 30, 0, 1), utc(2026, 5, 2, 2, 30)),
        ("weekly mon 09:00", utc(2026, 5, 1, 0, 0), utc(2026, 5, 4, 9, 0)),  # a Friday
        ("weekly fri 09:00", utc(2026, 5, 1, 9, 0), utc(2026, 5, 8, 9, 0)),
        ("cron */15 * * * *", utc(2026, 5, 1, 10, 7), utc(2026, 5, 1, 10, 15)),
        ("cron @hourly", utc(2026, 5, 1, 10, 0), utc(2026, 5, 1, 11, 0)),
        ("cron @daily", utc(2026, 5, 1, 10, 0), utc(2026, 5, 2, 0, 0)),
        ("cron @weekly", utc(2026, 5, 1, 10, 0), utc(2026, 5, 3, 0, 0)),  # Sunday
        ("cron @monthly", utc(2026, 5, 1, 10, 0), utc(2026, 6, 1, 0, 0)),
        ("cron @yearly", utc(2026, 5, 1, 10, 0), utc(2027, 1, 1, 0, 0)),
        ("cron 0 9 * * mon-fri", utc(2026, 5, 1, 9, 0), utc(2026, 5, 4, 9, 0)),
        ("cron 0 0 29 2 *", utc(2026, 5, 1), utc(2028, 2, 29)),
    ],
)
def test_next_after_in_utc(spec: str, t: datetime, expected: datetime) -> None:
    found = parse_schedule(spec).next_after(t)
    assert found == expected
    assert found is not None
    assert found.utcoffset() == timedelta(0)


def test_next_after_accepts_other_aware_zones_and_returns_utc() -> None:
    schedule = parse_schedule("daily 09:00", NEW_YORK)
    t = datetime(2026, 5, 1, 8, 0, tzinfo=timezone(timedelta(hours=-4)))  # 08:00 EDT
    found = schedule.next_after(t)
    assert found == utc(2026, 5, 1, 13, 0)
    assert found is not None
    assert found.tzinfo is UTC


def test_at_is_a_one_shot() -> None:
    schedule = parse_schedule("at 2026-05-01T09:00:00+02:00")
    moment = utc(2026, 5, 1, 7, 0)
    assert schedule.next_after(moment - timedelta(microseconds=1)) == moment
    assert schedule.next_after(moment) is None
    assert schedule.next_after(moment + timedelta(days=1)) is None


def test_at_without_offset_is_in_the_zone() -> None:
    assert parse_schedule("at 2026-07-01T09:00:00", BERLIN).text == "at 2026-07-01T07:00:00Z"
    assert parse_schedule("at 2026-01-01T09:00:00", NEW_YORK).text == "at 2026-01-01T14:00:00Z"
    assert parse_schedule("at 2026-01-01T09:00:00Z", NEW_YORK).text == "at 2026-01-01T09:00:00Z"


def test_far_future_has_no_next_occurrence() -> None:
    end = datetime(9999, 12, 31, 23, 59, tzinfo=UTC)
    assert parse_schedule("every 1h").next_after(end) is None
    assert parse_schedule("daily 02:30").next_after(end) is None
    assert parse_schedule("cron @yearly").next_after(end) is None
