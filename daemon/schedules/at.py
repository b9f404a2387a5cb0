"""``at RFC3339``: one run at a given instant, or without an offset a wall time in the zone."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from daemon.schedules.base import Schedule, as_utc
from daemon.schedules.dst import DstMark, fold_mark, gap_before, gap_mark, is_repeated

_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2})"
    r"(?::([0-9]{2})(?:\.([0-9]{1,9}))?)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})?"
)


@dataclass(frozen=True)
class AtSchedule(Schedule):
    """A one-shot at ``at_utc``; ``wall``: the zone's wall time it was given as (no offset)."""

    at_utc: datetime
    wall: datetime | None = None

    def next_after(self, t: datetime) -> datetime | None:
        return self.at_utc if self.at_utc > as_utc(t) else None

    def dst_mark(self, planned: datetime) -> DstMark | None:
        """A wall time in a gap runs at its end; one in a fold runs once, at its first pass."""
        if self.wall is None:
            return None
        zone = ZoneInfo(self.tz)
        local = as_utc(planned).astimezone(zone)
        if local.replace(tzinfo=None) != self.wall:
            return gap_mark(local, gap_before(planned, zone), [self.wall])
        if is_repeated(self.wall, zone):
            return fold_mark(local, runs_both=False)
        return None

    def describe(self) -> str:
        local = self.at_utc.astimezone(ZoneInfo(self.tz))
        return f"once at {local:%Y-%m-%d %H:%M:%S %Z} ({self.tz})"


def parse_at(spec: str, tz: str, zone: ZoneInfo, text: str) -> AtSchedule:
    at_utc, wall = _parse_rfc3339(spec, text, zone)
    return AtSchedule(spec, tz, "at " + at_utc.isoformat().replace("+00:00", "Z"), at_utc, wall)


def _parse_rfc3339(spec: str, text: str, zone: ZoneInfo) -> tuple[datetime, datetime | None]:
    """The instant, and the wall time it was given as when it had no offset."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError(
            f"invalid schedule {spec!r}: expected an RFC 3339 time like 2026-05-01T09:00:00Z"
        )
    year, month, day, hour, minute = (int(match[i]) for i in range(1, 6))
    second = int(match[6] or "0")
    microsecond = int((match[7] or "").ljust(9, "0")[:6])
    try:
        wall = datetime(year, month, day, hour, minute, second, microsecond)
        offset = match[8]
        if offset is None:
            return _resolve_wall_time(wall, zone), wall
        if offset in ("Z", "z"):
            return wall.replace(tzinfo=UTC), None
        offset_hours, offset_minutes = int(offset[1:3]), int(offset[4:6])
        if offset_hours > 23 or offset_minutes > 59:
            raise ValueError(f"UTC offset {offset} is out of range")
        sign = -1 if offset[0] == "-" else 1
        offset_delta = timedelta(hours=offset_hours, minutes=offset_minutes)
        return wall.replace(tzinfo=timezone(sign * offset_delta)).astimezone(UTC), None
    except (ValueError, OverflowError) as err:
        raise ValueError(f"invalid schedule {spec!r}: {err}") from None


def _resolve_wall_time(wall: datetime, zone: ZoneInfo) -> datetime:
    """The UTC instant of a zone's wall time: the first pass if it repeats, the end of
    the gap if it was skipped (as cron does)."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    low, high = min(first, second), max(first, second)
    while high - low > timedelta(seconds=1):  # find the jump: first instant past ``wall``
        middle = low + (high - low) / 2
        if middle.astimezone(zone).replace(tzinfo=None) >= wall:
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0)
