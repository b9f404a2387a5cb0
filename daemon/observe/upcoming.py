"""The answer of ``next``: each task's next planned times, from the ticker's plans.

A running daemon answers from the plans its ticker holds (an interval plan from the tick it has
planned next); ``runbroker next --file`` answers from the plans a daemon would make of the file,
as if it started at the instant asked from (now, unless told). The times of a schedule are
``daemon.schedules.planned``'s, the ticker's own instants; what DST did to each is said beside
it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from daemon.core.rfc3339 import rfc3339_utc
from daemon.core.runqueue import RunRequest
from daemon.core.tasks import TaskRefused, TaskRegistry
from daemon.core.ticker.ticker import TickPlan
from daemon.schedules.at import AtSchedule
from daemon.schedules.every import every_text
from daemon.schedules.planned import PlannedTime, interval_times, planned_times
from daemon.wire.control_answers import EVENT_NEXT, next_refusal
from daemon.wire.control_shapes import DstNote, NextAnswer, PlannedSlot, TaskTimes

Source = Literal["daemon", "file"]
# The times one answer holds at most, every task's together: each costs the ticker's own
# ``next_after`` (about 0.1 ms for a cron schedule), and the daemon computes them in its event
# loop, so a listing of many tasks gets fewer of each (the answer's ``count`` says how many).
MAX_TIMES_PER_ANSWER = 500


def slot(time: PlannedTime) -> PlannedSlot:
    """One planned time as the wire says it."""
    local = time.local.isoformat(timespec="seconds")
    answer: PlannedSlot = {"at": rfc3339_utc(time.utc), "local": local}
    mark = time.dst
    if mark is not None:
        note: DstNote = {"kind": mark.kind, "wall": mark.wall, "note": mark.note}
        if mark.fold_pass is not None:
            note["fold_pass"] = mark.fold_pass
        answer["dst"] = note
    return answer


def first_interval_tick(plan: TickPlan, now: datetime, source: Source) -> datetime:
    """An interval plan's first tick from ``now``: on the grid of the tick the running ticker
    planned next (jitter included), or, for a daemon that would start at ``now``, the start-up
    tick or the first interval's end."""
    assert plan.interval_s is not None
    step = timedelta(seconds=plan.interval_s)
    if source == "daemon" and plan.next_fire_at is not None:
        first = datetime.fromtimestamp(plan.next_fire_at, UTC)
        if first < now:  # asked from later on: the first grid tick from then
            first += math.ceil((now - first) / step) * step
        return first
    if source == "file" and plan.fire_on_start:
        return now
    return now + step


def next_due(plan: TickPlan | None, now: datetime, source: Source) -> datetime | None:
    """The next planned time of a task's plan (None: it does not tick, or no longer)."""
    if plan is None:
        return None
    times = task_times(plan.task, plan, now, 1, 0.0, source)["times"]
    return datetime.fromisoformat(times[0]["at"]) if times else None


def task_times(
    name: str, plan: TickPlan | None, now: datetime, count: int, jitter: float, source: Source
) -> TaskTimes:
    """The next ``count`` planned times of the task ``name``, whose plan is ``plan``."""
    if plan is None:
        note = "no schedule: it runs when triggered"
        return {
            "task": name,
            "schedule": None,
            "tz": "UTC",
            "kind": "trigger",
            "times": [],
            "note": note,
        }
    if plan.schedule is not None:
        schedule = plan.schedule
        times = planned_times(schedule, now, count)
        answer: TaskTimes = {
            "task": name,
            "schedule": schedule.text,
            "tz": schedule.tz,
            "kind": "schedule",
            "times": [slot(time) for time in times],
        }
        if not times:
            one_shot = isinstance(schedule, AtSchedule)
            answer["note"] = "a one-shot whose time has passed" if one_shot else "no time ahead"
        return answer
    if plan.once:
        ran = source == "daemon"
        times = [] if ran else [PlannedTime(now, now)]
        note = "ran once at start-up" if ran else "runs once, at start-up"
        return {
            "task": name,
            "schedule": "once",
            "tz": "UTC",
            "kind": "once",
            "times": [slot(time) for time in times],
            "note": note + " (RUNBROKER_INTERVAL=0)",
        }
    assert plan.interval_s is not None
    try:
        first = first_interval_tick(plan, now, source)
        times = interval_times(first, plan.interval_s, count)
    except OverflowError:  # asked from the edge of what ``datetime`` holds
        times = []
    note = f"each tick may move by up to {jitter:.0%} of the interval (RUNBROKER_JITTER)"
    if source == "file":
        note = f"counted from a daemon started at {rfc3339_utc(now)}; {note}"
    return {
        "task": name,
        "schedule": every_text(plan.interval_s),
        "tz": "UTC",
        "kind": "interval",
        "times": [slot(time) for time in times],
        "note": note,
    }


def next_answer(
    plans: Sequence[TickPlan],
    tasks: TaskRegistry,
    *,
    task: str,
    count: int,
    now: datetime,
    jitter: float,
    source: Source,
) -> NextAnswer | dict[str, Any]:
    """``next``: the planned times of ``task`` (empty: of every task), ``count`` of each or fewer
    (``MAX_TIMES_PER_ANSWER``), or the refusal of a task this container does not define."""
    if task:
        try:
            tasks.admit(RunRequest(task=task))
        except TaskRefused as refused:
            return next_refusal(refused.reason, refused.code)
    by_task = {plan.task: plan for plan in plans}
    names = [task] if task else sorted(tasks.names())
    count = min(count, max(1, MAX_TIMES_PER_ANSWER // max(len(names), 1)))
    return {
        "event": EVENT_NEXT,
        "ok": True,
        "after": rfc3339_utc(now),
        "source": source,
        "count": count,
        "tasks": [
            task_times(name, by_task.get(name), now, count, jitter, source) for name in names
        ],
    }
