"""Catch-up at start: every slot of the gap is run once, covered or missed, and the run is the
newest slot of the window, whatever the schedule, the gap and the window."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from daemon.core.ticker.catchup import (
    MISFIRE_COALESCE,
    MISFIRE_SKIP,
    SLOTS_SCANNED_MAX,
    plan_catch_up,
    slots_between,
)
from daemon.schedules import parse_schedule

DAY_S = 86_400.0
T0 = datetime(2026, 3, 20, tzinfo=UTC).timestamp()


def _utc(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_a_daily_slot_missed_during_a_redeploy_runs_once_at_start() -> None:
    daily = parse_schedule("daily 02:30", "Europe/Berlin")
    plan = plan_catch_up(
        last_planned=_utc("2026-06-01T00:30:00+00:00"),  # 02:30 in Berlin (summer time)
        now=_utc("2026-06-02T00:31:00+00:00"),  # back a minute after the next one
        misfire=MISFIRE_COALESCE,
        window_s=float("inf"),
        schedule=daily,
    )
    assert plan.run_at == _utc("2026-06-02T00:30:00+00:00")
    assert plan.coalesced.count == 0
    assert plan.missed.count == 0


def test_a_week_down_runs_once_and_says_how_many_were_covered_and_missed() -> None:
    daily = parse_schedule("daily 02:30", "UTC")
    plan = plan_catch_up(
        last_planned=_utc("2026-06-01T02:30:00+00:00"),
        now=_utc("2026-06-08T12:00:00+00:00"),
        misfire=MISFIRE_COALESCE,
        window_s=3 * DAY_S,
        schedule=daily,
    )
    assert plan.run_at == _utc("2026-06-08T02:30:00+00:00")
    assert plan.coalesced.count == 2  # the 6th and 7th: in the window, covered by the run
    assert plan.coalesced.first_at == _utc("2026-06-06T02:30:00+00:00")
    assert plan.missed.count == 4  # the 2nd to the 5th: beyond the window
    assert plan.missed.first_at == _utc("2026-06-02T02:30:00+00:00")


def test_skip_runs_nothing_and_records_every_slot_missed() -> None:
    plan = plan_catch_up(
        last_planned=T0, now=T0 + 10 * 60, misfire=MISFIRE_SKIP, window_s=60.0, interval_s=60.0
    )
    assert plan.run_at is None
    assert plan.missed.count == 10
    assert plan.coalesced.count == 0


def test_a_gap_with_no_slot_plans_nothing() -> None:
    plan = plan_catch_up(
        last_planned=T0, now=T0 + 59, misfire=MISFIRE_COALESCE, window_s=DAY_S, interval_s=60.0
    )
    assert plan.run_at is None
    assert plan.missed.count == plan.coalesced.count == 0


def test_a_clock_set_back_plans_nothing() -> None:
    assert slots_between(T0, T0 - DAY_S, interval_s=60.0).count == 0


def test_a_gap_longer_than_the_scan_says_there_were_more() -> None:
    every_minute = parse_schedule("cron * * * * *", "UTC")
    found = slots_between(T0, T0 + (SLOTS_SCANNED_MAX + 10) * 60.0, schedule=every_minute)
    assert found.count == SLOTS_SCANNED_MAX
    assert found.more
    assert found.newest_at == T0 + (SLOTS_SCANNED_MAX + 10) * 60.0  # the newest, not the last


def test_the_slot_caught_up_after_a_longer_gap_is_the_newest() -> None:
    """A minutely schedule down for years: the run at start is the last minute's slot, not the
    last one the scan counted."""
    every_minute = parse_schedule("cron * * * * *", "Europe/Berlin")
    now = T0 + 5 * 365 * DAY_S + 30.0
    plan = plan_catch_up(
        last_planned=T0,
        now=now,
        misfire=MISFIRE_COALESCE,
        window_s=float("inf"),
        schedule=every_minute,
    )
    assert plan.run_at == now - 30.0
    assert plan.coalesced.more


def test_an_every_schedule_is_counted_not_scanned() -> None:
    tiny = parse_schedule("every 1ms", "UTC")
    found = slots_between(T0, T0 + 30 * DAY_S, schedule=tiny)  # 2.6e9 slots: arithmetic
    assert abs(found.count - 30 * DAY_S / 0.001) <= 1  # to the float precision of the times


@given(
    interval_s=st.integers(min_value=1, max_value=7200).map(float),
    gap_s=st.floats(min_value=0, max_value=30 * DAY_S),
    window_s=st.floats(min_value=0, max_value=40 * DAY_S) | st.just(float("inf")),
    misfire=st.sampled_from([MISFIRE_COALESCE, MISFIRE_SKIP]),
)
def test_every_slot_of_the_gap_has_exactly_one_fate(
    interval_s: float, gap_s: float, window_s: float, misfire: str
) -> None:
    now = T0 + gap_s
    total = slots_between(T0, now, interval_s=interval_s).count
    plan = plan_catch_up(
        last_planned=T0, now=now, misfire=misfire, window_s=window_s, interval_s=interval_s
    )
    ran = 0 if plan.run_at is None else 1
    assert ran + plan.coalesced.count + plan.missed.count == total
    if misfire == MISFIRE_SKIP:
        assert ran == 0
    if plan.run_at is not None:
        assert T0 < plan.run_at <= now
        assert plan.run_at > now - window_s  # never a slot from beyond the window
        assert now - plan.run_at < interval_s  # the newest slot: no later one was due yet
    elif misfire == MISFIRE_COALESCE:
        assert all(  # nothing in the window to run
            T0 + k * interval_s <= now - window_s for k in range(1, min(total, 5) + 1)
        )


@given(
    start_h=st.integers(min_value=0, max_value=24 * 400),
    gap_h=st.integers(min_value=0, max_value=24 * 40),
    zone=st.sampled_from(["UTC", "Europe/Berlin", "Australia/Lord_Howe", "America/New_York"]),
    spec=st.sampled_from(["daily 02:30", "weekly mon 09:00", "cron 0 */6 * * *", "daily 00:00"]),
)
def test_a_schedule_across_dst_has_each_slot_counted_once(
    start_h: int, gap_h: int, zone: str, spec: str
) -> None:
    schedule = parse_schedule(spec, zone)
    after = datetime(2025, 6, 1, tzinfo=UTC).timestamp() + start_h * 3600.0
    now = after + gap_h * 3600.0 + 1
    plan = plan_catch_up(
        last_planned=after,
        now=now,
        misfire=MISFIRE_COALESCE,
        window_s=float("inf"),
        schedule=schedule,
    )
    total = slots_between(after, now, schedule=schedule).count
    assert (0 if plan.run_at is None else 1) + plan.coalesced.count == total
    assert plan.missed.count == 0
    if plan.run_at is not None:
        following = schedule.next_after(datetime.fromtimestamp(plan.run_at, UTC))
        assert following is None or following.timestamp() > now  # the newest one runs


def test_an_intervals_newest_slot_is_never_past_the_end_by_a_floats_rounding() -> None:
    until = 1_780_920_000.0
    slots = slots_between(0.2, until, interval_s=0.05)
    assert slots.newest_at <= until
    assert slots.count == round((until - 0.2) / 0.05)
