"""A schedule's next planned times: each in UTC, in the schedule's zone, and with what an offset
change did to it (``dst.DstMark``): what ``runbroker next`` and a reload's dry run show.

The times are ``occurrences.following``: ``next_after`` applied again and again, the very steps
the ticker takes from one fire to the next (``daemon.core.ticker``): there is one rule of when
a schedule is due, and this module only says what DST did to each time of the walk.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from daemon.schedules.base import Schedule, as_utc
from daemon.schedules.dst import DstMark
from daemon.schedules.every import every_schedule
from daemon.schedules.occurrences import following

MAX_PLANNED = 1000  # the most times one listing holds


@dataclass(frozen=True)
class PlannedTime:
    """One planned time: ``utc``, the same instant as ``local`` (the zone's wall clock, with
    its offset and fold), and ``dst`` when an offset change moved or doubled its wall time."""

    utc: datetime
    local: datetime
    dst: DstMark | None = None


def planned_times(schedule: Schedule, after: datetime, count: int) -> list[PlannedTime]:
    """The first ``count`` (at most ``MAX_PLANNED``) times strictly after ``after``; fewer
    when the schedule ends (a one-shot, the end of what ``datetime`` holds, in UTC or in the
    zone)."""
    zone = ZoneInfo(schedule.tz)
    times: list[PlannedTime] = []
    for due in itertools.islice(
        following(schedule, as_utc(after)), max(0, min(count, MAX_PLANNED))
    ):
        try:
            local, mark = due.astimezone(zone), schedule.dst_mark(due)
        except (OverflowError, StopIteration):
            break  # at the edge of what ``datetime`` holds: no wall time to show
        times.append(PlannedTime(due, local, mark))
    return times


def interval_times(first: datetime, interval_s: float, count: int) -> list[PlannedTime]:
    """An interval ticker's planned grid from its next tick ``first``: elapsed time, in UTC,
    which no offset change moves (each tick may still move by the ticker's jitter): ``first``
    and the walk of ``every`` that interval after it."""
    first = as_utc(first)
    walk = itertools.chain((first,), following(every_schedule(interval_s), first))
    return [
        PlannedTime(due, due) for due in itertools.islice(walk, max(0, min(count, MAX_PLANNED)))
    ]
