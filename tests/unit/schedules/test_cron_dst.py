"""Cron schedules around the 2026 offset changes of four zones, as Debian cron runs them:
a fixed-time job runs a skipped wall time right after the jump and a repeated one once; a
wildcard job (``*`` in its minute or hour field) runs every wall time the clock shows,
twice when it shows it twice, and none it skips. Expected times computed by hand."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.schedules import parse_schedule

LORD_HOWE = "Australia/Lord_Howe"  # +10:30 / +11:00, changes at 02:00 local
CHATHAM = "Pacific/Chatham"  # +12:45 / +13:45, changes at 02:45 and 03:45 local
NEW_YORK = "America/New_York"
BERLIN = "Europe/Berlin"

# The 2026 changes, in UTC:
#   Lord Howe  04-04 15:00Z  02:00 +11   -> 01:30 +10:30  (01:30-02:00 shown twice)
#              10-03 15:30Z  02:00 +10:30 -> 02:30 +11    (02:00-02:30 skipped)
#   Chatham    04-04 14:00Z  03:45 +13:45 -> 02:45 +12:45 (02:45-03:45 shown twice)
#              09-26 14:00Z  02:45 +12:45 -> 03:45 +13:45 (02:45-03:45 skipped)
#   New York   03-08 07:00Z  02:00 -05 -> 03:00 -04;  11-01 06:00Z  02:00 -04 -> 01:00 -05
#   Berlin     03-29 01:00Z  02:00 +01 -> 03:00 +02;  10-25 01:00Z  03:00 +02 -> 02:00 +01


def z(month: int, day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


CASES = [
    # Lord Howe, forward: 02:30 and 02:45 exist (the clock shows 02:30 at the jump).
    (
        LORD_HOWE,
        "cron 30 * * * *",
        z(10, 3, 13, 30),
        [z(10, 3, 14), z(10, 3, 15), z(10, 3, 15, 30), z(10, 3, 16, 30)],
    ),
    (
        LORD_HOWE,
        "cron 45 * * * *",
        z(10, 3, 13, 30),
        [z(10, 3, 14, 15), z(10, 3, 15, 15), z(10, 3, 15, 45), z(10, 3, 16, 45)],
    ),
    (LORD_HOWE, "cron 0 * * * *", z(10, 3, 13, 30), [z(10, 3, 14, 30), z(10, 3, 16), z(10, 3, 17)]),
    (LORD_HOWE, "daily 02:15", z(10, 3, 13), [z(10, 3, 15, 30), z(10, 4, 15, 15)]),
    # Lord Howe, back: 01:30 and 01:45 come twice; a wildcard runs both, a fixed time once.
    (
        LORD_HOWE,
        "cron 30 * * * *",
        z(4, 4, 13),
        [z(4, 4, 13, 30), z(4, 4, 14, 30), z(4, 4, 15), z(4, 4, 16)],
    ),
    (
        LORD_HOWE,
        "cron 45 * * * *",
        z(4, 4, 13),
        [z(4, 4, 13, 45), z(4, 4, 14, 45), z(4, 4, 15, 15), z(4, 4, 16, 15)],
    ),
    (LORD_HOWE, "daily 01:45", z(4, 4, 13), [z(4, 4, 14, 45), z(4, 5, 15, 15)]),
    # Chatham, forward: 03:00 and 03:30 are skipped; a fixed 03:00 runs at the jump.
    (
        CHATHAM,
        "cron 0 * * * *",
        z(9, 26, 12, 45),
        [z(9, 26, 13, 15), z(9, 26, 14, 15), z(9, 26, 15, 15)],
    ),
    (CHATHAM, "cron 30 * * * *", z(9, 26, 12, 45), [z(9, 26, 13, 45), z(9, 26, 14, 45)]),
    (CHATHAM, "daily 03:00", z(9, 26, 12), [z(9, 26, 14), z(9, 27, 13, 15)]),
    # Chatham, back: 03:00 comes twice.
    (
        CHATHAM,
        "cron 0 * * * *",
        z(4, 4, 11, 45),
        [z(4, 4, 12, 15), z(4, 4, 13, 15), z(4, 4, 14, 15), z(4, 4, 15, 15)],
    ),
    (CHATHAM, "daily 03:00", z(4, 4, 11), [z(4, 4, 13, 15), z(4, 5, 14, 15)]),
    # New York.
    (
        NEW_YORK,
        "cron */30 * * * *",
        z(11, 1, 4, 45),
        [z(11, 1, 5), z(11, 1, 5, 30), z(11, 1, 6), z(11, 1, 6, 30), z(11, 1, 7)],
    ),
    (NEW_YORK, "cron 30 * * * *", z(3, 8, 5, 45), [z(3, 8, 6, 30), z(3, 8, 7, 30)]),
    (NEW_YORK, "cron 30 2 * * *", z(3, 7, 12), [z(3, 8, 7), z(3, 9, 6, 30)]),
    (NEW_YORK, "cron 30 1 * * *", z(10, 31, 12), [z(11, 1, 5, 30), z(11, 2, 6, 30)]),
    # A wildcard minute in a fixed hour, months ahead across both changes: the first pass.
    (NEW_YORK, "cron */5 1 1 11 *", z(3, 1, 0), [z(11, 1, 5), z(11, 1, 5, 5)]),
    # Berlin.
    (
        BERLIN,
        "cron 15,45 * * * *",
        z(10, 24, 23, 50),
        [z(10, 25, 0, 15), z(10, 25, 0, 45), z(10, 25, 1, 15), z(10, 25, 1, 45), z(10, 25, 2, 15)],
    ),
    (BERLIN, "cron */20 2 * * *", z(3, 28, 12), [z(3, 30, 0), z(3, 30, 0, 20)]),
    (BERLIN, "cron 20 2 * * *", z(3, 28, 12), [z(3, 29, 1), z(3, 30, 0, 20)]),
    (BERLIN, "cron 20 2 * * *", z(10, 24, 12), [z(10, 25, 0, 20), z(10, 26, 1, 20)]),
]


@pytest.mark.parametrize(("zone", "spec", "start", "expected"), CASES)
def test_runs_as_debian_cron_around_the_2026_changes(
    zone: str, spec: str, start: datetime, expected: list[datetime]
) -> None:
    schedule = parse_schedule(spec, zone)
    found: list[datetime | None] = []
    t: datetime | None = start
    for _ in expected:
        assert t is not None
        t = schedule.next_after(t)
        found.append(t)
    assert found == expected


ZONES = [LORD_HOWE, CHATHAM, NEW_YORK, BERLIN]
CHANGE_DAYS = [z(4, 4, 0), z(10, 3, 0), z(9, 26, 0), z(3, 8, 0), z(11, 1, 0), z(3, 28, 12)]


def _field(draw: st.DrawFn, limit: int) -> str:
    kind = draw(st.sampled_from(["star", "step", "list"]))
    if kind == "star":
        return "*"
    if kind == "step":
        return f"*/{draw(st.integers(1, limit // 2))}"
    values = draw(st.lists(st.integers(0, limit - 1), min_size=1, max_size=3, unique=True))
    return ",".join(map(str, sorted(values)))


@st.composite
def cron_exprs(draw: st.DrawFn) -> str:
    return f"{_field(draw, 60)} {_field(draw, 24)} * * *"


def _values(field: str, limit: int) -> set[int]:
    if field == "*":
        return set(range(limit))
    if field.startswith("*/"):
        return set(range(0, limit, int(field[2:])))
    return {int(v) for v in field.split(",")}


def _right_after_a_jump(t: datetime, zone: ZoneInfo) -> bool:
    before = (t - timedelta(seconds=1)).astimezone(zone).utcoffset()
    return before != t.astimezone(zone).utcoffset()


@settings(max_examples=200, deadline=None)
@given(
    expr=cron_exprs(),
    zone_name=st.sampled_from(ZONES),
    day=st.sampled_from(CHANGE_DAYS),
    offset_min=st.integers(0, 36 * 60),
)
def test_runs_increase_and_match_their_fields(
    expr: str, zone_name: str, day: datetime, offset_min: int
) -> None:
    zone = ZoneInfo(zone_name)
    minute_field, hour_field = expr.split()[:2]
    minutes, hours = _values(minute_field, 60), _values(hour_field, 24)
    wildcard = minute_field.startswith("*") or hour_field.startswith("*")
    schedule = parse_schedule(f"cron {expr}", zone_name)
    runs: list[datetime] = []
    t: datetime | None = day + timedelta(minutes=offset_min)
    for _ in range(12):
        assert t is not None
        t = schedule.next_after(t)
        assert t is not None
        runs.append(t)
    assert all(a < b for a, b in itertools.pairwise(runs))
    for run in runs:
        wall = run.astimezone(zone)
        if wildcard or not _right_after_a_jump(run, zone):
            assert (wall.hour, wall.minute) in itertools.product(hours, minutes), (run, wall)
    if not wildcard:  # a wall time the clock shows twice runs once
        shown = [run.astimezone(zone).replace(tzinfo=None) for run in runs]
        assert len(set(shown)) == len(shown)
