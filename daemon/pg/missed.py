"""The latest missed occurrence of a schedule and how many were missed, in bounded work however
far behind a row is.

The planner runs on the event loop inside the claim's transaction, and walking every missed
occurrence (millions for a minutely row years behind) would hold the loop long enough to miss
lease renewals. So the latest is found as ``daemon.schedules.occurrences`` finds it (``every``
by arithmetic, any other schedule by a search over ``next_after``), and a count walks at most
``COUNT_WALK_MAX`` occurrences.
"""

from __future__ import annotations

from datetime import datetime

from daemon.schedules.occurrences import Occurrences, latest_at_or_before, walk_through

__all__ = ["COUNT_MAX", "COUNT_WALK_MAX", "Occurrences", "count_occurrences", "latest_missed"]

COUNT_WALK_MAX = 1_000  # occurrences walked to count those passed over: 0.1 s at the most
COUNT_MAX = 2**31 - 1  # the most job_runs.occurrences (an integer) holds


def latest_missed(
    sched: Occurrences, start: datetime, now: datetime
) -> tuple[datetime, datetime | None]:
    """From a due occurrence ``start`` (<= now): the latest occurrence <= now, and the first
    after it (None: none)."""
    return latest_at_or_before(sched, start, now)


def count_occurrences(sched: Occurrences, first: datetime, last: datetime) -> tuple[int, bool]:
    """How many occurrences from ``first`` through ``last`` (both occurrences, first <= last),
    and whether the count stopped at ``COUNT_WALK_MAX`` (then there are at least that many), or
    at what the column holds.

    ``every`` counts by arithmetic, any other schedule walks: the claim passes over few
    occurrences as a rule, and the walk's bound keeps a row years behind from holding the loop."""
    walk = walk_through(sched, first, last, walk_max=COUNT_WALK_MAX)
    if walk.stopped:
        return walk.count, True
    return min(walk.count, COUNT_MAX), walk.count > COUNT_MAX
