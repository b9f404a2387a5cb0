"""The latest missed occurrence: the same as walking every occurrence, in bounded work."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.pg.missed import Occurrences, latest_missed
from daemon.pg.plan import plan_claim, schedule_for
from daemon.schedules.occurrences import Span, Stepped, Walk
from tests.unit.pg.conftest import T0, due_job

SPECS = [
    "every 1s",
    "every 7s",
    "every 90s",
    "every 1h",
    "every 1.5s",
    "cron * * * * *",
    "cron */5 * * * *",
    "cron 0 * * * *",
    "cron 30 2 * * *",
    "cron * 3 * * *",
    "cron 0 9 * * 1-5",
    "cron 0 0 1 * *",
    "cron 0 0 29 2 *",
    "daily 02:30",
    "weekly sun 04:00",
]
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]


def walked(sched: Occurrences, start: datetime, now: datetime) -> tuple[datetime, datetime | None]:
    """The reference: walk every occurrence from ``start`` (only for small gaps)."""
    latest = start
    while True:
        following = sched.next_after(latest)
        if following is None or following > now:
            return latest, following
        latest = following


class Counting:
    """A schedule that counts its ``next_after`` calls."""

    def __init__(self, sched: Occurrences) -> None:
        self.sched = sched
        self.calls = 0

    def next_after(self, t: datetime, /) -> datetime | None:
        self.calls += 1
        return self.sched.next_after(t)

    def __getattr__(self, name: str) -> object:  # ``interval_s`` of an ``every``
        return getattr(self.sched, name)


class CountingStepped(Counting):
    """A counting ``every``: its arithmetic passed on, as a method the way ``Stepped`` sees it."""

    def __init__(self, sched: Stepped) -> None:
        super().__init__(sched)
        self.stepped = sched

    def walk_through(self, first: datetime, until: datetime, /) -> Walk:
        return self.stepped.walk_through(first, until)

    def grid_between(self, anchor_s: float, after_s: float, until_s: float, /) -> Span:
        return self.stepped.grid_between(anchor_s, after_s, until_s)


def count_calls(sched: Occurrences) -> Counting:
    """``sched`` wrapped to count its ``next_after`` calls, its arithmetic kept if it has one."""
    return CountingStepped(sched) if isinstance(sched, Stepped) else Counting(sched)


@st.composite
def first_occurrences(draw: st.DrawFn) -> tuple[Occurrences, datetime]:
    """A schedule of ``SPECS`` in a zone of ``ZONES``, and its first occurrence after a time up
    to three years past ``T0``."""
    sched = schedule_for(draw(st.sampled_from(SPECS)), draw(st.sampled_from(ZONES)))
    offset_s = draw(st.integers(min_value=0, max_value=3 * 365 * 86400))
    first = sched.next_after(T0 + timedelta(seconds=offset_s))
    assert first is not None
    return sched, first


def stepped(sched: Occurrences, start: datetime, steps: int) -> datetime:
    """The occurrence of ``sched`` that is ``steps`` occurrences after ``start``, walked."""
    at = start
    for _ in range(steps):
        following = sched.next_after(at)
        assert following is not None
        at = following
    return at


@settings(max_examples=300, deadline=None)
@given(
    start=first_occurrences(),
    occurrences=st.integers(min_value=0, max_value=300),
    extra_s=st.floats(min_value=0, max_value=1.0),
)
def test_the_jump_finds_what_walking_finds(
    start: tuple[Occurrences, datetime], occurrences: int, extra_s: float
) -> None:
    sched, first = start
    # a gap of ``occurrences`` occurrences, and a little more
    now = stepped(sched, first, occurrences)
    now += (sched.next_after(now) - now) * extra_s  # type: ignore[operator]
    assert latest_missed(sched, first, now) == walked(sched, first, now)


def test_sixty_rows_ten_years_behind_take_a_bounded_number_of_steps() -> None:
    now = datetime(2036, 6, 1, 12, 0, 30, tzinfo=UTC)
    behind = now - timedelta(days=3653)
    total = 0
    for index in range(60):
        spec = ["cron * * * * *", "every 1s", "cron */5 * * * *", "daily 02:30"][index % 4]
        counting = count_calls(schedule_for(spec, "Europe/Berlin"))
        start = counting.next_after(behind + timedelta(minutes=index))
        assert start is not None
        latest, following = latest_missed(counting, start, now)
        assert latest <= now < following  # type: ignore[operator]
        assert counting.calls <= 120, (spec, counting.calls)  # walking: up to 315 million
        total += counting.calls
    assert total <= 60 * 120


def test_the_planner_runs_a_row_ten_years_behind_once_at_its_latest_occurrence() -> None:
    now = datetime(2036, 6, 1, 12, 0, 30, tzinfo=UTC)
    job = due_job(
        schedule="cron * * * * *", next_run_at=now - timedelta(days=3653), misfire="coalesce"
    )
    plan = plan_claim(job, now, default_max_attempts=3, misfire_grace_s=60.0)
    assert (plan.run, plan.scheduled_for, plan.attempt) == (True, now.replace(second=0), 1)
