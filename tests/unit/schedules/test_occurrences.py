"""The occurrence math (daemon/schedules/occurrences.py) finds what a plain walk of
``next_after`` finds, for every schedule form (``every``, daily and weekly in zones with offset
changes, cron, ``at``), ``every`` by arithmetic."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.schedules import EverySchedule, Schedule, parse_schedule
from daemon.schedules.occurrences import (
    Span,
    Stepped,
    Walk,
    following,
    gaps_after,
    latest_at_or_before,
    span_between,
    walk_through,
)
from tests.unit.schedules.zones import ZONES, fixed_specs, instants, wildcard_specs

EVERY_SPECS = ["every 1s", "every 1.5s", "every 90s", "every 7m", "every 1h", "every 250ms"]


@st.composite
def schedules_and_starts(draw: st.DrawFn) -> tuple[Schedule, datetime]:
    """A schedule of any form, and a time to walk it from (often near an offset change)."""
    zone = draw(st.sampled_from(ZONES))
    start = draw(instants(zone))
    form = draw(st.sampled_from(["every", "fixed", "wildcard", "at"]))
    if form == "every":
        spec = draw(st.sampled_from(EVERY_SPECS))
    elif form == "fixed":
        spec = draw(fixed_specs()).spec
    elif form == "wildcard":
        spec = draw(wildcard_specs()).spec
    else:
        at = start + timedelta(minutes=draw(st.integers(-600, 6000)))
        spec = f"at {at.astimezone(UTC).replace(tzinfo=None):%Y-%m-%dT%H:%M}"
    return parse_schedule(spec, zone), start


def walked(sched: Schedule, after: datetime, count: int) -> list[datetime]:
    """The reference: ``next_after`` stepped up to ``count`` times (fewer: the schedule ends)."""
    found: list[datetime] = []
    at: datetime | None = after
    while len(found) < count:
        at = sched.next_after(at)  # type: ignore[arg-type]
        if at is None:
            break
        found.append(at)
    return found


@settings(max_examples=200, deadline=None)
@given(start=schedules_and_starts(), count=st.integers(min_value=0, max_value=40))
def test_the_walk_and_the_gaps_are_next_after_stepped(
    start: tuple[Schedule, datetime], count: int
) -> None:
    sched, after = start
    times = walked(sched, after, count + 1)
    assert list(itertools.islice(following(sched, after), count + 1)) == times
    assert gaps_after(sched, after, count) == [b - a for a, b in itertools.pairwise(times)]


@settings(max_examples=200, deadline=None)
@given(
    start=schedules_and_starts(),
    steps=st.integers(min_value=0, max_value=60),
    beyond=st.floats(min_value=0, max_value=0.999),
    walk_max=st.integers(min_value=1, max_value=80),
)
def test_a_bounded_walk_and_the_latest_are_what_stepping_finds(
    start: tuple[Schedule, datetime], steps: int, beyond: float, walk_max: int
) -> None:
    sched, after = start
    times = walked(sched, after, steps + 2)
    if not times:
        return
    first = times[0]
    inside = times[: steps + 1]
    until = inside[-1]
    if len(times) > len(inside):  # a little past the last, short of the next
        until += (times[len(inside)] - until) * beyond
    latest, next_one = latest_at_or_before(sched, first, until)
    assert latest == inside[-1]
    assert next_one == (times[len(inside)] if len(times) > len(inside) else None)
    walk = walk_through(sched, first, until, walk_max=walk_max)
    if isinstance(sched, Stepped):
        assert walk == Walk(len(inside), inside[-1])
    else:  # stopped at its limit short of the bound, whether or not another one follows
        counted = min(len(inside), walk_max)
        last = inside[counted - 1]
        assert walk == Walk(counted, last, stopped=counted == walk_max and last < until)


def _timestamps(sched: Schedule, anchor_s: float, until_s: float) -> list[float]:
    """The reference: the Unix times of a walk from ``anchor_s`` not after ``until_s``."""
    found = []
    at: datetime | None = datetime.fromtimestamp(anchor_s, UTC)
    while (at := sched.next_after(at)) is not None and at.timestamp() <= until_s:  # type: ignore[arg-type]
        found.append(at.timestamp())
    return found


@settings(max_examples=200, deadline=None)
@given(
    start=schedules_and_starts(),
    later_q=st.integers(min_value=0, max_value=4 * 3600 * 4),  # quarter seconds
    stretch_q=st.integers(min_value=-4, max_value=4 * 3600 * 8),
    walk_max=st.integers(min_value=1, max_value=40),
)
def test_a_span_counts_the_walk_from_its_anchor(
    start: tuple[Schedule, datetime], later_q: int, stretch_q: int, walk_max: int
) -> None:
    """Quarter seconds from a whole second: the float grid of ``every`` is then exact."""
    sched, at = start
    anchor_s = float(int(at.timestamp()))
    after_s = anchor_s + later_q / 4
    until_s = after_s + stretch_q / 4
    times = [t for t in _timestamps(sched, anchor_s, until_s) if t > after_s]
    span = span_between(sched, anchor_s, after_s, until_s, walk_max=walk_max)
    if not times:
        assert span == Span()
    elif isinstance(sched, Stepped) or len(times) <= walk_max:
        assert span == Span(len(times), times[0], times[-1])
    else:
        assert span == Span(walk_max, times[0], times[-1], more=True)


def test_only_every_is_stepped_and_it_never_walks() -> None:
    every = parse_schedule("every 1ms")
    assert isinstance(every, EverySchedule)
    assert isinstance(every, Stepped)
    for spec in ["daily 02:30", "cron * * * * *", "at 2030-01-01T00:00Z"]:
        assert not isinstance(parse_schedule(spec, "Europe/Berlin"), Stepped)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    ten_years = timedelta(days=3653)
    walk = walk_through(every, t0, t0 + ten_years, walk_max=1)
    assert walk == Walk(3653 * 86_400_000 + 1, t0 + ten_years)
    span = span_between(
        every, t0.timestamp(), t0.timestamp(), (t0 + ten_years).timestamp(), walk_max=1
    )
    assert (span.count, span.more) == (3653 * 86_400_000, False)


def test_a_span_ends_at_its_bound_to_below_the_microsecond() -> None:
    """A bound a fraction of a microsecond before an occurrence leaves it out, though the
    bound rounds to it as a ``datetime``."""
    minutely = parse_schedule("cron * * * * *", "Europe/Berlin")
    minute_s = datetime(2026, 3, 29, 1, 0, tzinfo=UTC).timestamp()
    until_s = minute_s - 3e-7
    assert datetime.fromtimestamp(until_s, UTC).timestamp() == minute_s
    for walk_max in (1, 100):
        span = span_between(minutely, minute_s - 600, minute_s - 600, until_s, walk_max=walk_max)
        assert span.newest_s == minute_s - 60
        assert (span.count, span.more) == ((9, False) if walk_max > 9 else (1, True))
