"""Wall-time schedules across offset changes (daemon/schedules/cron.py): a skipped wall time runs
right after the gap, a repeated one once, a wildcard job follows the clock; examples by hand."""

from __future__ import annotations

import itertools
from datetime import timedelta
from zoneinfo import ZoneInfo

from daemon.schedules import parse_schedule
from tests.unit.schedules.zones import BERLIN, NEW_YORK, occurrences, utc


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
