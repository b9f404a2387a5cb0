"""Schedules without a keyword (daemon/schedules/parse.py), as supercronic, yacron and Ofelia
read them: five cron fields and the ``@`` macros are the ``cron`` forms, ``X`` and ``cron X``
giving the same occurrences; the keywords keep working."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.schedules import CronSchedule, EverySchedule, parse_schedule
from tests.unit.schedules.zones import (
    ZONES,
    FixedSpec,
    WildSpec,
    fixed_specs,
    occurrences,
    utc,
    wildcard_specs,
    zone_and_instant,
)


@pytest.mark.parametrize(
    ("spec", "kind", "text"),
    [
        ("*/5 * * * *", CronSchedule, "cron */5 * * * *"),
        ("  30   2 * * mon-fri ", CronSchedule, "cron 30 2 * * mon-fri"),
        ("@every 5m", EverySchedule, "every 5m"),
        ("@EVERY 1h30m", EverySchedule, "every 1h30m"),
        ("@hourly", CronSchedule, "cron @hourly"),
        ("@daily", CronSchedule, "cron @daily"),
        ("@midnight", CronSchedule, "cron @midnight"),
        ("@weekly", CronSchedule, "cron @weekly"),
        ("@monthly", CronSchedule, "cron @monthly"),
        ("@yearly", CronSchedule, "cron @yearly"),
        ("@annually", CronSchedule, "cron @annually"),
    ],
)
def test_a_bare_cron_form_is_its_cron_keyword_form(
    spec: str, kind: type[CronSchedule | EverySchedule], text: str
) -> None:
    bare = parse_schedule(spec, "Europe/Berlin")
    keyword = parse_schedule(f"cron {spec}", "Europe/Berlin")
    assert type(bare) is kind
    assert bare.text == keyword.text == text
    assert bare.spec == spec
    start = utc(2026, 3, 28)
    assert occurrences(bare, start, 5) == occurrences(keyword, start, 5)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("* * * *", "expected every DUR | daily HH:MM"),
        ("*/5 * * * * *", "expected every DUR | daily HH:MM"),
        ("61 * * * *", "bad minute"),
        ("@reboot", "expected five fields or one of"),
        ("@every", "expected five fields or one of"),
        ("@every 0s", "needs a positive duration"),
        ("@daily 5", "expected five fields or one of"),
        ("hourly", "or a cron expression (five fields, @daily, @every DUR ...) as it is"),
    ],
)
def test_a_bad_bare_form_says_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_schedule(spec)


def test_the_keywords_keep_their_forms() -> None:
    assert parse_schedule("every 5m").text == "every 5m"
    assert parse_schedule("cron @every 5m").text == "every 5m"
    assert parse_schedule("daily 02:30").text == "daily 02:30"
    assert parse_schedule("at 2026-05-01T09:00:00Z").text == "at 2026-05-01T09:00:00Z"


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(fixed_specs(), wildcard_specs()).filter(lambda s: s.spec.startswith("cron ")),
    zone_and_instant(ZONES),
)
def test_x_and_cron_x_give_the_same_occurrences(
    spec: FixedSpec | WildSpec, zone_and_start: tuple[str, datetime]
) -> None:
    zone, start = zone_and_start
    expression = spec.spec.removeprefix("cron ")
    bare = parse_schedule(expression, zone)
    keyword = parse_schedule(f"cron {expression}", zone)
    assert bare.text == keyword.text
    assert occurrences(bare, start, 6) == occurrences(keyword, start, 6)
    assert [bare.dst_mark(t) for t in occurrences(bare, start, 6)] == [
        keyword.dst_mark(t) for t in occurrences(keyword, start, 6)
    ]
