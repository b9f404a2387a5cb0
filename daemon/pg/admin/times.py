"""A row's time as ``runbroker jobs`` shows it: NULL as none, the ends of the range by name.

The admin queries clamp a time Python's datetime cannot hold (a date BC or after 9999, or
+-infinity, written by hand) to the first or last instant of the years 1-9999, so those two
instants stand for ``-infinity`` and ``infinity`` in the tables and in ``--json`` alike: a
script must not read a hand-written ``infinity`` as the year 9999. A time near an end that
its job's zone cannot show (9999-12-31 in Tokyo) is shown in UTC rather than failing the list.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from daemon.core.rfc3339 import rfc3339_utc

FIRST = datetime.min.replace(tzinfo=UTC)  # the clamp of -infinity and every date before it
LAST = datetime.max.replace(tzinfo=UTC)  # the clamp of infinity and every date after 9999


def end_name(value: datetime) -> str | None:
    """``-infinity`` or ``infinity`` for a clamped end, None for a time within the range."""
    if value == FIRST:
        return "-infinity"
    if value == LAST:
        return "infinity"
    return None


def json_time(value: datetime | None) -> str | None:
    """The ``--json`` form: RFC 3339 in UTC, an end by name, None for NULL."""
    if value is None:
        return None
    return end_name(value) or rfc3339_utc(value)


def zone_of(tz: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(tz)
    except (ValueError, KeyError, OSError):  # a zone written by hand: none, or a directory
        return None


def local_time(value: datetime | None, tz: str) -> str:
    """``value`` as a wall time in the zone ``tz`` with its UTC offset, for the tables.

    ``2027-01-01 09:00:00+01:00``, UTC as ``...Z``, an end by name, and ``-`` for none."""
    if value is None:
        return "-"
    name = end_name(value)
    if name is not None:
        return name
    zone = zone_of(tz)
    if zone is not None and tz != "UTC":
        try:
            return value.astimezone(zone).isoformat(sep=" ", timespec="seconds")
        except OverflowError:  # the zone's wall time is past the year 1 or 9999
            pass
    return value.astimezone(UTC).isoformat(sep=" ", timespec="seconds")[:-6] + "Z"


def duration_ms(started: datetime | None, finished: datetime | None) -> int | None:
    """Milliseconds from start to finish; None unless both are known times (not an end)."""
    if started is None or finished is None or end_name(started) or end_name(finished):
        return None
    return round((finished - started).total_seconds() * 1000)
