"""Schedules: parsing, next_after, DST behaviour (daemon/schedules)."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.schedules import (
    AtSchedule,
    CronSchedule,
    EverySchedule,
    Schedule,
    parse_schedule,
)

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
FULLWIDTH_ZERO = "\N{FULLWIDTH DIGIT ZERO}"
FULLWIDTH_ONE = "\N{FULLWIDTH DIGIT ONE}"


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


# --- parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "kind", "text"),
    [
        ("every 90s", EverySchedule, "every 1m30s"),
        ("EVERY 1h30m", EverySchedule, "every 1h30m"),
        ("  every\t250ms  ", EverySchedule, "every 250ms"),
        ("daily 02:30", CronSchedule, "daily 02:30"),
        ("Daily 2:05", CronSchedule, "daily 02:05"),
        ("weekly mon 09:00", CronSchedule, "weekly mon 09:00"),
        ("weekly SUN 23:59", CronSchedule, "weekly sun 23:59"),
        ("weekly Friday 7:00", CronSchedule, "weekly fri 07:00"),
        ("cron 30 2 * * *", CronSchedule, "cron 30 2 * * *"),
        ("cron   */15  9-17 * *   mon-fri", CronSchedule, "cron */15 9-17 * * mon-fri"),
        ("CRON @Hourly", CronSchedule, "cron @hourly"),
        ("cron @daily", CronSchedule, "cron @daily"),
        ("cron @weekly", CronSchedule, "cron @weekly"),
        ("cron @monthly", CronSchedule, "cron @monthly"),
        ("cron @yearly", CronSchedule, "cron @yearly"),
        ("cron @every 15m", EverySchedule, "every 15m"),
        ("at 2026-05-01T09:00:00Z", AtSchedule, "at 2026-05-01T09:00:00Z"),
        ("at 2026-05-01t09:00:00z", AtSchedule, "at 2026-05-01T09:00:00Z"),
        ("at 2026-05-01T09:00:00+02:00", AtSchedule, "at 2026-05-01T07:00:00Z"),
        ("at 2026-05-01T09:00:00.25-01:30", AtSchedule, "at 2026-05-01T10:30:00.250000Z"),
        ("at 2026-05-01 09:00", AtSchedule, "at 2026-05-01T09:00:00Z"),
    ],
)
def test_parse_forms(spec: str, kind: type[Schedule], text: str) -> None:
    schedule = parse_schedule(spec)
    assert type(schedule) is kind
    assert schedule.text == text
    assert schedule.spec == spec
    assert schedule.tz == "UTC"
    assert schedule.describe()


def test_zone_is_kept_and_described() -> None:
    schedule = parse_schedule("daily 02:30", BERLIN)
    assert schedule.tz == BERLIN
    assert BERLIN in schedule.describe()
    assert "02:30" in schedule.describe()
    assert "Monday" in parse_schedule("weekly mon 09:00").describe()
    assert parse_schedule("every 90s").describe() == "every 1m30s"
    once = parse_schedule("at 2026-05-01T09:00:00Z", BERLIN).describe()
    assert "2026-05-01 11:00:00" in once
    assert BERLIN in once


def test_at_every_equals_every() -> None:
    plain = parse_schedule("every 1h30m", BERLIN)
    macro = parse_schedule("cron @every 1h30m", BERLIN)
    assert type(macro) is type(plain)
    assert macro.text == plain.text
    t = utc(2026, 3, 29, 0, 59, 1)
    assert macro.next_after(t) == plain.next_after(t) == t + timedelta(hours=1, minutes=30)


# --- invalid input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "invalid schedule ''"),
        ("   ", "invalid schedule"),
        ("hourly", "expected every DUR | daily HH:MM"),
        ("every", "'every' needs a value"),
        ("every 0s", "needs a positive duration"),
        ("every 0", "needs a positive duration"),
        ("every -1m", "needs a positive duration"),
        ("every 1ns", "needs a positive duration"),
        ("every 1x", "invalid duration '1x'"),
        ("every 1h 30m", "invalid duration '1h 30m'"),
        (f"every {FULLWIDTH_ONE}h", "invalid duration"),
        ("daily", "'daily' needs a value"),
        ("daily 24:00", "time of day must be HH:MM"),
        ("daily 12:60", "time of day must be HH:MM"),
        ("daily 2:5", "time of day must be HH:MM"),
        ("daily 123:00", "time of day must be HH:MM"),
        ("daily 02:30:00", "time of day must be HH:MM"),
        ("daily 02:30 extra", "time of day must be HH:MM"),
        (f"daily {FULLWIDTH_ZERO}2:30", "time of day must be HH:MM"),
        ("daily \N{ARABIC-INDIC DIGIT TWO}:30", "time of day must be HH:MM"),
        ("daily\N{NO-BREAK SPACE}02:30", "invalid schedule"),
        ("weekly mon", "time of day must be HH:MM"),
        ("weekly xyz 10:00", "day must be one of mon"),
        ("weekly 1 10:00", "day must be one of mon"),
        ("weekly \N{FULLWIDTH LATIN SMALL LETTER M}on 10:00", "day must be one of mon"),
        ("cron * * * *", "expected five fields"),
        ("cron * * * * * *", "expected five fields"),
        ("cron 61 * * * *", "bad minute"),
        ("cron * 24 * * *", "bad hour"),
        ("cron * * 32 * *", "bad day-of-month"),
        ("cron * * * 13 *", "bad month"),
        ("cron * * * * 8", "bad day-of-week"),
        ("cron */0 * * * *", "bad minute"),
        ("cron 5-1 * * * *", "bad minute"),
        ("cron 0 0 30 2 *", "bad day-of-month"),
        (f"cron {FULLWIDTH_ONE} * * * *", "unexpected character"),
        ("cron @reboot", "expected five fields or one of"),
        ("cron @hourly 5", "expected five fields or one of"),
        ("cron @every", "expected five fields or one of"),
        ("cron @every 0s", "needs a positive duration"),
        ("at yesterday", "expected an RFC 3339 time"),
        ("at 2026-05-01", "expected an RFC 3339 time"),
        ("at 2026-02-30T00:00:00Z", "day is out of range"),
        ("at 2026-05-01T24:00:00Z", "hour must be in"),
        ("at 2026-05-01T09:00:60Z", "second must be in"),
        ("at 2026-05-01T09:00:00+24:00", "UTC offset +24:00 is out of range"),
        ("at 0001-01-01T00:00:00+01:00", "out of range"),
        (f"at 2026-05-01T09:00:0{FULLWIDTH_ZERO}Z", "expected an RFC 3339 time"),
    ],
)
def test_invalid_specs_raise_value_error_with_a_message(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_schedule(spec)


@pytest.mark.parametrize(
    "tz",
    [
        "Mars/Base",
        "",
        "Europe",
        "Europe/",
        "/etc/localtime",
        "../etc/passwd",
        "Europe/../Europe/Berlin",
        "Europe/Berlin\x00",
        "Europe/Berlin ",
        "zone.tab",
        "A" * 300,
        "Europe\N{DIVISION SLASH}Berlin",
    ],
)
def test_unknown_zones_raise_value_error(tz: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"unknown time zone {tz!r}")):
        parse_schedule("daily 02:30", tz)


def test_unknown_zone_message_is_exact() -> None:
    with pytest.raises(ValueError, match=r"^unknown time zone 'Mars/Base'$"):
        parse_schedule("every 1h", "Mars/Base")


def test_next_after_rejects_naive_datetimes() -> None:
    for spec in ("every 1m", "daily 02:30", "cron @hourly", "at 2026-05-01T09:00:00Z"):
        with pytest.raises(ValueError, match="aware"):
            parse_schedule(spec).next_after(datetime(2026, 5, 1, 8, 0))


# --- next_after examples ------------------------------------------------------------------


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


# --- DST: what cronsim does, checked here ---------------------------------------------------


def test_berlin_spring_gap_runs_right_after_the_gap() -> None:
    # 2026-03-29: 02:00 CET -> 03:00 CEST; 02:30 does not exist that day.
    schedule = parse_schedule("daily 02:30", BERLIN)
    assert occurrences(schedule, utc(2026, 3, 28, 12, 0), 3) == [
        utc(2026, 3, 29, 1, 0),  # 03:00 CEST, right after the gap
        utc(2026, 3, 30, 0, 30),  # 02:30 CEST
        utc(2026, 3, 31, 0, 30),
    ]


def test_berlin_autumn_overlap_runs_once() -> None:
    # 2026-10-25: 03:00 CEST -> 02:00 CET; 02:30 happens twice on the wall clock.
    schedule = parse_schedule("daily 02:30", BERLIN)
    assert occurrences(schedule, utc(2026, 10, 24, 12, 0), 3) == [
        utc(2026, 10, 25, 0, 30),  # 02:30 CEST, the first pass only
        utc(2026, 10, 26, 1, 30),  # 02:30 CET the next day
        utc(2026, 10, 27, 1, 30),
    ]


def test_berlin_start_inside_the_second_pass_does_not_go_back() -> None:
    # cronsim alone answers 00:30Z here (the first pass, before t); the wrapper must not.
    schedule = parse_schedule("daily 02:30", BERLIN)
    t = utc(2026, 10, 25, 1, 10)  # 02:10 CET, second pass
    assert schedule.next_after(t) == utc(2026, 10, 26, 1, 30)
    fixed_hours = parse_schedule("cron 0-59 2 * * *", BERLIN)
    assert fixed_hours.next_after(t) == utc(2026, 10, 26, 1, 0)


def test_new_york_spring_gap_and_autumn_overlap() -> None:
    # 2026-03-08: 02:00 EST -> 03:00 EDT. 2026-11-01: 02:00 EDT -> 01:00 EST.
    spring = parse_schedule("daily 02:30", NEW_YORK)
    assert occurrences(spring, utc(2026, 3, 7, 12, 0), 2) == [
        utc(2026, 3, 8, 7, 0),  # 03:00 EDT
        utc(2026, 3, 9, 6, 30),  # 02:30 EDT
    ]
    overlap = parse_schedule("daily 01:30", NEW_YORK)
    assert occurrences(overlap, utc(2026, 10, 31, 0, 0), 3) == [
        utc(2026, 10, 31, 5, 30),
        utc(2026, 11, 1, 5, 30),  # 01:30 EDT only, not 06:30Z (01:30 EST)
        utc(2026, 11, 2, 6, 30),
    ]
    after_overlap = parse_schedule("daily 02:30", NEW_YORK)
    assert after_overlap.next_after(utc(2026, 11, 1, 0, 0)) == utc(2026, 11, 1, 7, 30)


def test_weekly_on_dst_sundays() -> None:
    schedule = parse_schedule("weekly sun 02:30", BERLIN)
    assert schedule.next_after(utc(2026, 3, 28)) == utc(2026, 3, 29, 1, 0)
    assert schedule.next_after(utc(2026, 10, 24)) == utc(2026, 10, 25, 0, 30)
    assert schedule.next_after(utc(2026, 10, 25, 0, 30)) == utc(2026, 11, 1, 1, 30)


def test_hourly_cron_across_the_autumn_overlap_follows_real_hours() -> None:
    # A '*' hour job follows the clock (as Debian cron does for wildcard jobs): it runs
    # once per real hour, so wall time 02:00 comes twice, but no instant repeats.
    hourly = parse_schedule("cron 0 * * * *", BERLIN)
    runs = occurrences(hourly, utc(2026, 10, 24, 22, 30), 5)
    assert runs == [
        utc(2026, 10, 24, 23),
        utc(2026, 10, 25, 0),
        *[utc(2026, 10, 25, h) for h in (1, 2, 3)],
    ]
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(runs))
    assert [run.astimezone(ZoneInfo(BERLIN)).hour for run in runs] == [1, 2, 2, 3, 4]
    assert parse_schedule("cron @hourly", BERLIN).next_after(utc(2026, 10, 25, 0)) == utc(
        2026, 10, 25, 1
    )


def test_fixed_hour_cron_across_the_autumn_overlap_runs_02_00_once() -> None:
    fixed = parse_schedule("cron 0 1-3 * * *", BERLIN)
    assert occurrences(fixed, utc(2026, 10, 24, 22, 30), 4) == [
        utc(2026, 10, 24, 23),  # 01:00 CEST
        utc(2026, 10, 25, 0),  # 02:00 CEST; no second 02:00 CET run
        utc(2026, 10, 25, 2),  # 03:00 CET
        utc(2026, 10, 26, 0),  # 01:00 CET next day
    ]


def test_hourly_cron_across_the_spring_gap() -> None:
    hourly = parse_schedule("cron 0 * * * *", BERLIN)
    assert occurrences(hourly, utc(2026, 3, 28, 23, 30), 3) == [
        utc(2026, 3, 29, 0),  # 01:00 CET
        utc(2026, 3, 29, 1),  # 03:00 CEST: 02:00 never existed
        utc(2026, 3, 29, 2),
    ]


def test_midnight_gap_in_santiago_runs_at_the_end_of_the_gap() -> None:
    # 2026-09-06: 00:00 -04 -> 01:00 -03, so 00:30 does not exist that day.
    schedule = parse_schedule("daily 00:30", "America/Santiago")
    assert occurrences(schedule, utc(2026, 9, 5, 12), 2) == [
        utc(2026, 9, 6, 4, 0),  # 01:00 -03
        utc(2026, 9, 7, 3, 30),  # 00:30 -03
    ]


def test_at_wall_time_in_gap_and_overlap() -> None:
    assert parse_schedule("at 2026-03-29T02:30:00", BERLIN).text == "at 2026-03-29T01:00:00Z"
    assert parse_schedule("at 2026-10-25T02:30:00", BERLIN).text == "at 2026-10-25T00:30:00Z"
    assert parse_schedule("at 2026-03-08T02:30:00", NEW_YORK).text == "at 2026-03-08T07:00:00Z"
    assert parse_schedule("at 2026-11-01T01:30:00", NEW_YORK).text == "at 2026-11-01T05:30:00Z"


# --- properties ---------------------------------------------------------------------------------


def _offset_changes(zone: ZoneInfo, years: range) -> list[datetime]:
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


OFFSET_CHANGES = {name: _offset_changes(ZoneInfo(name), range(2024, 2031)) for name in ZONES}


def test_offset_changes_were_found_for_dst_zones() -> None:
    assert utc(2026, 3, 29, 1) in OFFSET_CHANGES[BERLIN]
    assert utc(2026, 11, 1, 6) in OFFSET_CHANGES[NEW_YORK]
    assert len(OFFSET_CHANGES["Australia/Lord_Howe"]) == 14
    assert OFFSET_CHANGES["UTC"] == []


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


def expected_fixed(spec: FixedSpec, zone: ZoneInfo, t: datetime) -> datetime:
    first_day = t.astimezone(zone).date() - timedelta(days=1)
    candidates = [
        wall_instant(first_day + timedelta(days=n), hour, minute, zone)
        for n in range(10)
        if spec.weekdays is None or (first_day + timedelta(days=n)).weekday() in spec.weekdays
        for hour in spec.hours
        for minute in spec.minutes
    ]
    return min(c for c in candidates if c > t)


@st.composite
def zone_and_instant(draw: st.DrawFn, zones: list[str]) -> tuple[str, datetime]:
    zone_name = draw(st.sampled_from(zones))
    return zone_name, draw(instants(zone_name))


@settings(max_examples=300, deadline=None)
@given(data=st.data(), zone_and_t=zone_and_instant(ZONES))
def test_fixed_time_schedules_match_the_dst_rule(
    data: st.DataObject, zone_and_t: tuple[str, datetime]
) -> None:
    zone_name, t = zone_and_t
    zone = ZoneInfo(zone_name)
    spec = data.draw(fixed_specs(near=t.astimezone(zone)))
    found = parse_schedule(spec.spec, zone_name).next_after(t)
    assert found is not None
    assert found > t
    assert found.utcoffset() == timedelta(0)
    assert found == expected_fixed(spec, zone, t)
    local = found.astimezone(zone)
    just_after_gap = (found - timedelta(seconds=1)).astimezone(
        zone
    ).utcoffset() != local.utcoffset()
    if not just_after_gap:
        assert local.hour in spec.hours
        assert local.minute in spec.minutes
        assert spec.weekdays is None or local.weekday() in spec.weekdays


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


def matches(spec: WildSpec, wall: datetime) -> bool:
    return (
        wall.hour in spec.hours
        and wall.minute in spec.minutes
        and (spec.weekdays is None or wall.weekday() in spec.weekdays)
    )


@settings(max_examples=150, deadline=None)
@given(spec=wildcard_specs(), zone_and_t=zone_and_instant(ZONES))
def test_wildcard_cron_is_the_first_matching_minute_on_the_clock(
    spec: WildSpec, zone_and_t: tuple[str, datetime]
) -> None:
    zone_name, t = zone_and_t
    zone = ZoneInfo(zone_name)
    found = parse_schedule(spec.spec, zone_name).next_after(t)
    assert found is not None
    assert found > t
    # Debian cron's wildcard jobs: a wall time the clock skipped does not run.
    assert matches(spec, found.astimezone(zone))
    # and no earlier minute on the clock matched
    probe = t.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while probe < found:
        assert not matches(spec, probe.astimezone(zone)), probe
        probe += timedelta(minutes=1)


@given(
    duration_ms=st.integers(1, 10**10),
    zone_and_t=zone_and_instant(ZONES),
)
def test_every_adds_the_duration(duration_ms: int, zone_and_t: tuple[str, datetime]) -> None:
    zone_name, t = zone_and_t
    schedule = parse_schedule(f"every {duration_ms}ms", zone_name)
    assert schedule.next_after(t) == t + timedelta(milliseconds=duration_ms)


@given(spec=fixed_specs() | wildcard_specs(), zone_and_t=zone_and_instant(ZONES))
@settings(deadline=None)
def test_canonical_text_parses_to_the_same_schedule(
    spec: FixedSpec | WildSpec, zone_and_t: tuple[str, datetime]
) -> None:
    zone_name, t = zone_and_t
    schedule = parse_schedule(spec.spec, zone_name)
    again = parse_schedule(schedule.text, zone_name)
    assert again.text == schedule.text
    assert again.next_after(t) == schedule.next_after(t)


@given(zone_and_t=zone_and_instant(ZONES), delta_s=st.integers(-(10**8), 10**8))
def test_at_round_trips_and_fires_once(zone_and_t: tuple[str, datetime], delta_s: int) -> None:
    zone_name, t = zone_and_t
    moment = t + timedelta(seconds=delta_s)
    stamp = moment.astimezone(ZoneInfo(zone_name)).isoformat()
    schedule = parse_schedule(f"at {stamp}", zone_name)
    assert parse_schedule(schedule.text).next_after(moment - timedelta(seconds=1)) == moment
    assert schedule.next_after(moment - timedelta(microseconds=1)) == moment
    assert schedule.next_after(moment) is None


# --- fuzz: only ValueError ----------------------------------------------------------------------

PREFIXES = ["", "every ", "daily ", "weekly ", "weekly mon ", "cron ", "cron @every ", "at "]
CRON_ALPHABET = "0123456789*/,-#LWlw?MONmonJANjan@ \t"


def _parse_or_value_error(spec: str, tz: str = "UTC") -> None:
    schedule: Schedule | None = None
    message = ""
    try:
        schedule = parse_schedule(spec, tz)
    except ValueError as err:
        message = str(err)
    if schedule is None:
        assert message
        return
    t = utc(2026, 3, 29, 0, 30)
    following = schedule.next_after(t)
    assert following is None or following > t


@given(st.text())
def test_fuzz_parse_schedule_any_text(spec: str) -> None:
    _parse_or_value_error(spec)


@given(st.sampled_from(PREFIXES), st.text())
def test_fuzz_parse_schedule_after_a_keyword(prefix: str, rest: str) -> None:
    _parse_or_value_error(prefix + rest)


@settings(deadline=None)
@given(st.lists(st.text(CRON_ALPHABET, min_size=1, max_size=6), min_size=1, max_size=6))
def test_fuzz_cron_fields(fields: list[str]) -> None:
    _parse_or_value_error("cron " + " ".join(fields), BERLIN)


@given(st.text())
def test_fuzz_time_zone(tz: str) -> None:
    _parse_or_value_error("daily 02:30", tz)
