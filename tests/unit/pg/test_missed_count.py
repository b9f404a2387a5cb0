"""Counting the occurrences a claim passes over: what walking them finds, and bounded."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.pg.missed import COUNT_MAX, COUNT_WALK_MAX, Occurrences, count_occurrences
from daemon.pg.plan import schedule_for
from tests.unit.pg.conftest import T0
from tests.unit.pg.test_missed import count_calls, first_occurrences, stepped


@settings(max_examples=200, deadline=None)
@given(start=first_occurrences(), occurrences=st.integers(min_value=1, max_value=300))
def test_the_count_is_the_number_of_occurrences_walked(
    start: tuple[Occurrences, datetime], occurrences: int
) -> None:
    sched, first = start
    last = stepped(sched, first, occurrences - 1)
    assert count_occurrences(sched, first, last) == (occurrences, False)


def test_every_counts_by_arithmetic_however_far_behind() -> None:
    counting = count_calls(schedule_for("every 1s", "UTC"))
    ten_years = timedelta(days=3653)
    assert count_occurrences(counting, T0, T0 + ten_years) == (3653 * 86400 + 1, False)
    assert counting.calls == 0


def test_a_walk_stops_at_its_bound_and_says_at_least() -> None:
    counting = count_calls(schedule_for("cron * * * * *", "Europe/Berlin"))
    count, at_least = count_occurrences(counting, T0, T0 + timedelta(days=3653))
    assert (count, at_least) == (COUNT_WALK_MAX, True)
    assert counting.calls < COUNT_WALK_MAX
    exactly = T0 + timedelta(minutes=COUNT_WALK_MAX - 1)
    assert count_occurrences(counting, T0, exactly) == (COUNT_WALK_MAX, False)


def test_an_every_count_beyond_what_the_column_holds_says_at_least() -> None:
    sched = schedule_for("every 1ms", "UTC")
    assert count_occurrences(sched, T0, T0 + timedelta(days=30)) == (COUNT_MAX, True)
