"""The latest missed occurrence of a schedule and how many were missed, in bounded work however
far behind a row is.

The planner runs on the event loop inside the claim's transaction, and walking every missed
occurrence (millions for a minutely row years behind) would hold the loop long enough to miss
lease renewals. So ``every`` jumps by arithmetic and any other schedule by a search over
``next_after``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

WALK_STEPS = 8  # occurrences walked before jumping: the usual gap is one or two
_MICROSECOND = timedelta(microseconds=1)
_FIRST_PROBE = timedelta(seconds=1)


class Occurrences(Protocol):
    """A schedule as the planner sees it: only its occurrences."""

    def next_after(self, t: datetime, /) -> datetime | None: ...


def latest_missed(
    sched: Occurrences, start: datetime, now: datetime
) -> tuple[datetime, datetime | None]:
    """From a due occurrence ``start`` (<= now): the latest occurrence <= now, and the first
    after it (None: none)."""
    latest = start
    for _ in range(WALK_STEPS):
        following = sched.next_after(latest)
        if following is None or following > now:
            return latest, following
        latest = following
    interval_s = getattr(sched, "interval_s", None)  # ``every``: EverySchedule, or a wrapper
    if isinstance(interval_s, float | int):
        return _every_latest(sched, interval_s, latest, now)
    latest = _search_latest(sched, latest, now)
    return latest, sched.next_after(latest)


def _every_latest(
    sched: Occurrences, interval_s: float, start: datetime, now: datetime
) -> tuple[datetime, datetime | None]:
    """``every``: start + k * interval for the largest k that is not after now, as the walk
    adds it up (``timedelta`` sums are exact integer microseconds). Its ``next_after(t)`` is
    ``t`` + interval for any ``t``, not a fixed set of times: a search would not apply."""
    step = timedelta(seconds=interval_s)
    latest = start + step * ((now - start) // step)
    return latest, sched.next_after(latest)


def _search_latest(sched: Occurrences, known: datetime, now: datetime) -> datetime:
    """The latest occurrence <= now, given an occurrence ``known`` <= now: a search for the
    boundary of "the first occurrence after t is not after now", which holds for t before that
    occurrence and not from it on. ``lo`` always holds it, ``hi`` never does."""

    def before_latest(t: datetime) -> datetime | None:
        """The first occurrence after ``t`` when it is not after now (so ``t`` < the latest)."""
        found = sched.next_after(t)
        return found if found is not None and found <= now else None

    lo, hi, probe = known, now, _FIRST_PROBE
    while probe < now - lo:  # look back from now, doubling, for a time before the latest
        t = now - probe
        found = before_latest(t)
        if found is not None:
            lo = max(t, found - _MICROSECOND)
            break
        hi = t
        probe *= 2
    while hi - lo > _MICROSECOND:
        mid = lo + (hi - lo) / 2
        found = before_latest(mid)
        if found is None:
            hi = mid
        else:  # the occurrence found is itself not after the latest: start just before it
            lo = max(mid, found - _MICROSECOND)
    latest = sched.next_after(lo)
    return known if latest is None or latest > now else latest


COUNT_WALK_MAX = 1_000  # occurrences walked to count those passed over: 0.1 s at the most
COUNT_MAX = 2**31 - 1  # the most job_runs.occurrences (an integer) holds


def count_occurrences(sched: Occurrences, first: datetime, last: datetime) -> tuple[int, bool]:
    """How many occurrences from ``first`` through ``last`` (both occurrences, first <= last),
    and whether the count stopped at ``COUNT_WALK_MAX`` (then there are at least that many).

    ``every`` counts by arithmetic, any other schedule walks: the claim passes over few
    occurrences as a rule, and the walk's bound keeps a row years behind from holding the loop."""
    interval_s = getattr(sched, "interval_s", None)
    if isinstance(interval_s, float | int):
        count = (last - first) // timedelta(seconds=interval_s) + 1
        return min(count, COUNT_MAX), count > COUNT_MAX
    count, at = 1, first
    while at < last:
        if count >= COUNT_WALK_MAX:
            return count, True
        following = sched.next_after(at)
        if following is None or following > last:
            break
        count, at = count + 1, following
    return count, False
