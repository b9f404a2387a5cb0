"""Schedules in the one text form of DESIGN.md ("Schedules"), evaluated in an IANA zone.

``every DUR`` | ``daily HH:MM`` | ``weekly DAY HH:MM`` | ``cron EXPR`` | ``at RFC3339``.
``next_after`` takes and returns aware UTC datetimes. Daily, weekly and cron schedules
run through ``cronsim``, which follows Debian cron across DST changes: a wall time in
the spring-forward gap runs right after the gap, a fixed wall time in the autumn
overlap runs once (at its first occurrence), while jobs with ``*`` in the minute or
hour field follow the clock as it is (an hourly job runs in both repeated hours).
Known cronsim 2.8 quirks, left as they are: a ``*``-minute job restricted to an hour
that a midnight change skips (America/Santiago) runs once at the end of the gap, and
``*`` jobs can miss wall times next to Lord Howe's 30-minute DST changes.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from daemon.schedules.interval import DurationError, format_duration, parse_duration

__all__ = [
    "AtSchedule",
    "CronSchedule",
    "EverySchedule",
    "Schedule",
    "parse_schedule",
]

_USAGE = "expected every DUR | daily HH:MM | weekly DAY HH:MM | cron EXPR | at RFC3339"
_SPACE = re.compile(r"[ \t\r\n\f\v]+")
_ASCII_SPACE = " \t\r\n\f\v"
_ZONE_KEY = re.compile(r"[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)*")
_TIME_OF_DAY = re.compile(r"([0-9]{1,2}):([0-9]{2})")
_CRON_FIELD = re.compile(r"[0-9A-Za-z*/,#-]+")
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2})"
    r"(?::([0-9]{2})(?:\.([0-9]{1,9}))?)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})?"
)
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_CRON_MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_PROBE_FROM = datetime(2001, 1, 1, tzinfo=UTC)
_MAX_CANDIDATES = 10_000  # far more than the minutes in any DST overlap


@dataclass(frozen=True)
class Schedule(ABC):
    """A parsed schedule: ``spec`` as given, its ``tz`` and its canonical ``text``."""

    spec: str
    tz: str
    text: str

    @abstractmethod
    def next_after(self, t: datetime) -> datetime | None:
        """First occurrence strictly after the aware datetime ``t``, in UTC.

        None when there is none: a one-shot whose time is not after ``t``, or an
        occurrence beyond what ``datetime`` can hold. Naive ``t``: ``ValueError``.
        """

    @abstractmethod
    def describe(self) -> str:
        """A short English description for people."""


@dataclass(frozen=True)
class EverySchedule(Schedule):
    """Fixed elapsed time: the next run is ``interval_s`` seconds after ``t``."""

    interval_s: float

    def next_after(self, t: datetime) -> datetime | None:
        try:
            return _as_utc(t) + timedelta(seconds=self.interval_s)
        except OverflowError:
            return None

    def describe(self) -> str:
        return f"every {format_duration(self.interval_s)}"


@dataclass(frozen=True)
class CronSchedule(Schedule):
    """A five-field cron expression (also daily and weekly) in the zone ``tz``."""

    expr: str
    zone: ZoneInfo

    def next_after(self, t: datetime) -> datetime | None:
        after = _as_utc(t)
        try:
            candidates = CronSim(self.expr, after.astimezone(self.zone))
            for _ in range(_MAX_CANDIDATES):
                # cronsim walks fixed times in wall-clock time, so a start inside the
                # second pass of an overlap yields first-pass times that lie before t.
                candidate: datetime = next(candidates).astimezone(UTC)
                if candidate > after:
                    return candidate
        except (StopIteration, OverflowError):
            return None
        raise RuntimeError(f"no occurrence of {self.expr!r} after {after.isoformat()}")

    def describe(self) -> str:
        try:
            summary = str(CronSim(self.expr, _PROBE_FROM).explain())
        except Exception:  # the explanation is a nicety; never fail for it
            summary = f"cron {self.expr}"
        return f"{summary} ({self.tz})"


@dataclass(frozen=True)
class AtSchedule(Schedule):
    """A one-shot at ``at_utc``."""

    at_utc: datetime

    def next_after(self, t: datetime) -> datetime | None:
        return self.at_utc if self.at_utc > _as_utc(t) else None

    def describe(self) -> str:
        local = self.at_utc.astimezone(ZoneInfo(self.tz))
        return f"once at {local:%Y-%m-%d %H:%M:%S %Z} ({self.tz})"


def parse_schedule(spec: str, tz: str = "UTC") -> Schedule:
    """Parse a schedule spec; ``tz`` is the IANA zone its wall times are in.

    Keywords, day names and ``@`` macros are ASCII and case-insensitive; numbers are
    ASCII digits. ``at`` takes an RFC 3339 timestamp (seconds optional); without an
    offset it is a wall time in ``tz`` (in a DST gap: the end of the gap; in an
    overlap: the first pass). Raises ``ValueError`` with a clear message.
    """
    if not isinstance(spec, str) or not isinstance(tz, str):
        raise TypeError("spec and tz must be str")
    zone = _load_zone(tz)
    keyword, rest = _split_first(spec.strip(_ASCII_SPACE))
    keyword = keyword.lower() if keyword.isascii() else keyword
    if keyword not in ("every", "daily", "weekly", "cron", "at"):
        raise ValueError(f"invalid schedule {spec!r}: {_USAGE}")
    if not rest:
        raise ValueError(f"invalid schedule {spec!r}: {keyword!r} needs a value; {_USAGE}")
    if keyword == "every":
        return _every(spec, tz, rest)
    if keyword == "daily":
        hour, minute = _time_of_day(spec, rest)
        text = f"daily {hour:02d}:{minute:02d}"
        return _cron(spec, tz, zone, f"{minute} {hour} * * *", text)
    if keyword == "weekly":
        day_name, time_text = _split_first(rest)
        day_index = _day_index(spec, day_name)
        hour, minute = _time_of_day(spec, time_text)
        text = f"weekly {_DAYS[day_index][:3]} {hour:02d}:{minute:02d}"
        return _cron(spec, tz, zone, f"{minute} {hour} * * {(day_index + 1) % 7}", text)
    if keyword == "cron":
        return _parse_cron(spec, tz, zone, rest)
    at_utc = _parse_rfc3339(spec, rest, zone)
    return AtSchedule(spec, tz, "at " + at_utc.isoformat().replace("+00:00", "Z"), at_utc)


def _parse_cron(spec: str, tz: str, zone: ZoneInfo, expr: str) -> Schedule:
    if expr.startswith("@"):
        macro, rest = _split_first(expr)
        macro = macro.lower() if macro.isascii() else macro
        if macro == "@every" and rest:
            return _every(spec, tz, rest)
        if macro in _CRON_MACROS and not rest:
            return _cron(spec, tz, zone, _CRON_MACROS[macro], f"cron {macro}")
        raise ValueError(
            f"invalid cron expression {expr!r}: expected five fields or one of "
            "@hourly, @daily, @weekly, @monthly, @yearly, @every DUR"
        )
    fields = _SPACE.split(expr)
    if len(fields) != 5:
        raise ValueError(
            f"invalid cron expression {expr!r}: expected five fields "
            f"(minute hour day-of-month month day-of-week), got {len(fields)}"
        )
    if not all(_CRON_FIELD.fullmatch(field) for field in fields):
        raise ValueError(f"invalid cron expression {expr!r}: unexpected character")
    canonical = " ".join(fields)
    return _cron(spec, tz, zone, canonical, f"cron {canonical}")


def _cron(spec: str, tz: str, zone: ZoneInfo, expr: str, text: str) -> CronSchedule:
    try:
        next(CronSim(expr, _PROBE_FROM.astimezone(zone)))
    except CronSimError as err:
        raise ValueError(f"invalid cron expression {expr!r}: {str(err).lower()}") from None
    except StopIteration:
        raise ValueError(f"invalid cron expression {expr!r}: it never matches") from None
    return CronSchedule(spec, tz, text, expr, zone)


def _every(spec: str, tz: str, duration_text: str) -> EverySchedule:
    try:
        interval_s = parse_duration(duration_text)
    except DurationError as err:
        raise ValueError(f"invalid schedule {spec!r}: {err}") from None
    if timedelta(seconds=interval_s) < timedelta(microseconds=1):
        raise ValueError(
            f"invalid schedule {spec!r}: 'every' needs a positive duration (at least 1us)"
        )
    return EverySchedule(spec, tz, f"every {format_duration(interval_s)}", interval_s)


def _time_of_day(spec: str, text: str) -> tuple[int, int]:
    match = _TIME_OF_DAY.fullmatch(text)
    if match is None or int(match[1]) > 23 or int(match[2]) > 59:
        raise ValueError(f"invalid schedule {spec!r}: time of day must be HH:MM (00:00-23:59)")
    return int(match[1]), int(match[2])


def _day_index(spec: str, name: str) -> int:
    """Monday is 0. Accepts ``mon`` .. ``sun`` and full English names, ASCII any case."""
    lowered = name.lower() if name.isascii() else name
    for index, day in enumerate(_DAYS):
        if lowered in (day, day[:3]):
            return index
    raise ValueError(f"invalid schedule {spec!r}: day must be one of mon, tue, ..., sun")


def _parse_rfc3339(spec: str, text: str, zone: ZoneInfo) -> datetime:
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
            return _resolve_wall_time(wall, zone)
        if offset in ("Z", "z"):
            return wall.replace(tzinfo=UTC)
        offset_hours, offset_minutes = int(offset[1:3]), int(offset[4:6])
        if offset_hours > 23 or offset_minutes > 59:
            raise ValueError(f"UTC offset {offset} is out of range")
        sign = -1 if offset[0] == "-" else 1
        offset_delta = timedelta(hours=offset_hours, minutes=offset_minutes)
        return wall.replace(tzinfo=timezone(sign * offset_delta)).astimezone(UTC)
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


def _load_zone(tz: str) -> ZoneInfo:
    if len(tz) <= 255 and _ZONE_KEY.fullmatch(tz):
        try:
            return ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    raise ValueError(f"unknown time zone {tz!r}")


def _split_first(text: str) -> tuple[str, str]:
    """Split at the first run of ASCII whitespace: (head, rest); rest may be empty."""
    parts = _SPACE.split(text, maxsplit=1)
    return (parts[0], parts[1]) if len(parts) == 2 else (parts[0], "")


def _as_utc(t: datetime) -> datetime:
    if type(t) is datetime and t.tzinfo is UTC:  # the common case, twice per claimed run
        return t
    if not isinstance(t, datetime):
        raise TypeError(f"expected a datetime, got {type(t).__name__}")
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"expected an aware datetime (UTC), got naive {t.isoformat()}")
    try:
        return t.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"datetime out of range: {t.isoformat()}") from None
