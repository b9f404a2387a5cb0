"""Schedules parsed (daemon/schedules/parse.py): every form and its canonical text, zones, the
messages of a bad spec, and any text at all raising only ValueError."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.schedules import AtSchedule, CronSchedule, EverySchedule, Schedule, parse_schedule
from tests.unit.schedules.lookalikes import FULLWIDTH_ONE, FULLWIDTH_ZERO
from tests.unit.schedules.zones import (
    BERLIN,
    ZONES,
    FixedSpec,
    WildSpec,
    fixed_specs,
    utc,
    wildcard_specs,
    zone_and_instant,
)


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
