"""The zones, instants, occurrence walks and schedule strategies the schedules' tests share: the
instants drawn near each offset change of the zones, where the rules differ."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from hypothesis import strategies as st

from daemon.schedules import Schedule

BERLIN = "Europe/Berlin"


NEW_YORK = "America/New_York"


ZONES = [
    "UTC",
    BERLIN,
    NEW_YORK,
    "Asia/Kolkata",  # +05:30, no DST
    "America/Santiago",  # DST changes at midnight
    "Australia/Lord_Howe",  # 30-minute DST shift
    "Pacific/Chatham",  # +12:45/+13:45, changes at 02:45 and 03:45
]


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, micro: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


def occurrences(schedule: Schedule, start: datetime, count: int) -> list[datetime]:
    found: list[datetime] = []
    t = start
    for _ in range(count):
        following = schedule.next_after(t)
        assert following is not None
        found.append(following)
        t = following
    return found


def offset_changes(zone: ZoneInfo, years: range) -> list[datetime]:
    """UTC instants of a zone's offset changes in the given years (to aim tests at them)."""
    changes: list[datetime] = []
    day = datetime(years.start, 1, 1, tzinfo=UTC)
    end = datetime(years.stop, 1, 1, tzinfo=UTC)
    while day < end:
        following = day + timedelta(days=1)
        if day.astimezone(zone).utcoffset() != following.astimezone(zone).utcoffset():
            low, high = day, following
            while high - low > timedelta(seconds=1):
                middle = low + (high - low) / 2
                if middle.astimezone(zone).utcoffset() == low.astimezone(zone).utcoffset():
                    low = middle
                else:
                    high = middle
            changes.append(high.replace(microsecond=0))
        day = following
    return changes


OFFSET_CHANGES = {name: offset_changes(ZoneInfo(name), range(2024, 2031)) for name in ZONES}


@st.composite
def instants(draw: st.DrawFn, zone_name: str) -> datetime:
    """Aware UTC datetimes, often within two days of a DST change, sometimes minute-aligned."""
    changes = OFFSET_CHANGES[zone_name]
    near_a_change = draw(st.booleans())
    if changes and near_a_change:
        base = draw(st.sampled_from(changes))
        spread_min = draw(st.sampled_from([90, 2 * 1440]))
        t = base + timedelta(minutes=draw(st.integers(-spread_min, spread_min)))
    else:
        t = draw(
            st.datetimes(datetime(1995, 1, 1), datetime(2060, 1, 1), timezones=st.just(UTC))
        ).replace(second=0, microsecond=0)
    return t + timedelta(microseconds=draw(st.sampled_from([0, 1, 999_999, 59_999_999])))


def wall_instant(day: date, hour: int, minute: int, zone: ZoneInfo) -> datetime:
    """The rule, stated independently: the earliest instant showing that wall time; if the
    clock skipped it, the instant the clock jumped past it."""
    wall = datetime.combine(day, time(hour, minute))
    passes = [wall.replace(tzinfo=zone, fold=fold).astimezone(UTC) for fold in (0, 1)]
    shown = [p for p in passes if p.astimezone(zone).replace(tzinfo=None) == wall]
    if shown:
        return min(shown)
    low, high = min(passes), max(passes)
    before = low.astimezone(zone).utcoffset()
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(zone).utcoffset() == before:
            low = middle
        else:
            high = middle
    return high.replace(microsecond=0)


@dataclass(frozen=True)
class FixedSpec:
    spec: str
    hours: frozenset[int]
    minutes: frozenset[int]
    weekdays: frozenset[int] | None  # Monday is 0; None: every day


DAY_NAMES = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


@st.composite
def fixed_specs(draw: st.DrawFn, near: datetime | None = None) -> FixedSpec:
    """daily / weekly / cron specs with fixed minutes and hours (no '*' there); with
    ``near`` (a local time), often a wall time within 90 minutes of it."""
    kind = draw(st.sampled_from(["daily", "weekly", "cron"]))
    hint = None
    if near is not None and draw(st.booleans()):
        hint = near + timedelta(minutes=draw(st.integers(-90, 90)))
    if kind in ("daily", "weekly"):
        hour, minute = draw(st.integers(0, 23)), draw(st.integers(0, 59))
        if hint is not None:
            hour, minute = hint.hour, hint.minute
        if kind == "daily":
            return FixedSpec(
                f"daily {hour:02d}:{minute:02d}", frozenset({hour}), frozenset({minute}), None
            )
        day = draw(st.integers(0, 6)) if hint is None else hint.weekday()
        name = draw(st.sampled_from([DAY_NAMES[day], DAY_NAMES[day].upper()]))
        return FixedSpec(
            f"weekly {name} {hour}:{minute:02d}",
            frozenset({hour}),
            frozenset({minute}),
            frozenset({day}),
        )
    minutes = draw(st.frozensets(st.integers(0, 59), min_size=1, max_size=3))
    hours = draw(st.frozensets(st.integers(0, 23), min_size=1, max_size=3))
    weekdays = draw(st.none() | st.frozensets(st.integers(0, 6), min_size=1, max_size=3))
    if hint is not None:
        minutes, hours = minutes | {hint.minute}, hours | {hint.hour}
        weekdays = None if weekdays is None else weekdays | {hint.weekday()}
    dow = "*" if weekdays is None else ",".join(str((d + 1) % 7) for d in sorted(weekdays))
    fields = [",".join(map(str, sorted(minutes))), ",".join(map(str, sorted(hours))), "*", "*", dow]
    return FixedSpec("cron " + " ".join(fields), hours, minutes, weekdays)


@st.composite
def zone_and_instant(draw: st.DrawFn, zones: list[str]) -> tuple[str, datetime]:
    zone_name = draw(st.sampled_from(zones))
    return zone_name, draw(instants(zone_name))


@dataclass(frozen=True)
class WildSpec:
    spec: str
    hours: frozenset[int]
    minutes: frozenset[int]
    weekdays: frozenset[int] | None


@st.composite
def wildcard_specs(draw: st.DrawFn) -> WildSpec:
    """cron specs with '*' in the minute or hour field (they follow the clock as it is)."""

    def field(limit: int) -> tuple[str, frozenset[int]]:
        choice = draw(st.sampled_from(["star", "step", "list"]))
        if choice == "star":
            return "*", frozenset(range(limit))
        if choice == "step":
            step = draw(st.integers(1, limit // 2))
            return f"*/{step}", frozenset(range(0, limit, step))
        values = draw(st.frozensets(st.integers(0, limit - 1), min_size=1, max_size=3))
        return ",".join(map(str, sorted(values))), values

    minute_field, minutes = field(60)
    hour_field, hours = field(24)
    if not minute_field.startswith("*") and not hour_field.startswith("*"):
        hour_field, hours = "*", frozenset(range(24))
    weekdays = draw(st.none() | st.frozensets(st.integers(0, 6), min_size=1, max_size=3))
    dow = "*" if weekdays is None else ",".join(DAY_NAMES[d] for d in sorted(weekdays))
    return WildSpec(f"cron {minute_field} {hour_field} * * {dow}", hours, minutes, weekdays)
