"""The next run of a wildcard cron job in a zone with offset changes.

Debian cron runs such jobs by the clock as it is: a skipped wall time does not run, a repeated
one runs twice. Within a stretch of constant offset wall time and UTC move together, so the
walk goes from one offset change to the next.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim

_SECOND = timedelta(seconds=1)
_PROBE_STEP = timedelta(days=1)  # offset changes of one zone lie more than a day apart
_MAX_STRETCHES = 1_000  # 50 years of two changes a year, with room to spare


def next_wildcard(expr: str, zone: ZoneInfo, after: datetime) -> datetime | None:
    """The first instant after the UTC ``after`` whose wall time in ``zone`` matches ``expr``.

    None past what ``datetime`` holds or cronsim's horizon."""
    start, inclusive = after, False
    try:
        for _ in range(_MAX_STRETCHES):
            offset = _offset(start, zone)
            wall = (start + offset).replace(tzinfo=None)
            # CronSim yields matches strictly after its start (to the whole second).
            match: datetime = next(CronSim(expr, wall - _SECOND if inclusive else wall))
            candidate = (match - offset).replace(tzinfo=UTC)
            change = _first_change(zone, start, candidate, offset)
            if change is None:
                return candidate
            start, inclusive = change, True
    except (StopIteration, OverflowError):
        return None
    raise RuntimeError(f"no occurrence of {expr!r} after {after.isoformat()}")


def _offset(t: datetime, zone: ZoneInfo) -> timedelta:
    offset = t.astimezone(zone).utcoffset()
    assert offset is not None  # a ZoneInfo always has one
    return offset


def _first_change(
    zone: ZoneInfo, start: datetime, end: datetime, offset: timedelta
) -> datetime | None:
    """The first instant in (start, end] whose offset is not ``offset``, else None."""
    low = start
    while low < end:
        high = min(low + _PROBE_STEP, end)
        if _offset(high, zone) != offset:
            return _bisect(zone, low, high, offset)
        low = high
    return None


def _bisect(zone: ZoneInfo, low: datetime, high: datetime, offset: timedelta) -> datetime:
    """The change between ``low`` (at ``offset``) and ``high`` (not), to the whole second
    (the zone database's changes are at whole seconds)."""
    low = low.replace(microsecond=0)
    if high.microsecond:
        high = high.replace(microsecond=0) + _SECOND
    while high - low > _SECOND:
        middle = low + (high - low) // 2
        middle = middle.replace(microsecond=0)
        if _offset(middle, zone) == offset:
            low = middle
        else:
            high = middle
    return high
