"""What a restart does with the slots a task's schedule planned while the daemon was down.

``misfire = "coalesce"`` runs the newest slot within the window once, at start, and records the
older ones in the window as covered by it; ``"skip"`` runs none. Slots older than the window
are recorded as missed either way: a nightly job down for a week runs once, not seven times,
and says so. The window is the task's ``catchup_window`` or its ``start_deadline``, whichever is
shorter: a slot is never started later than its start deadline, down or not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from daemon.core.ticker.slots import CAUGHT_UP, MISSED, Slot
from daemon.core.ticker.tick_slots import TickSlots
from daemon.schedules.base import Schedule
from daemon.schedules.occurrences import grid_between, span_between

MISFIRE_COALESCE = "coalesce"
MISFIRE_SKIP = "skip"
MISFIRES = (MISFIRE_COALESCE, MISFIRE_SKIP)
COVERED_AT_START = "covered by the catch-up run at start"
SLOTS_SCANNED_MAX = 100_000  # a longer gap is counted up to this, and said to be longer


@dataclass(frozen=True)
class Slots:
    """Planned slots told by count, as the record settles them: in one entry."""

    count: int = 0
    first_at: float = 0.0  # Unix seconds, when count > 0
    newest_at: float = 0.0
    more: bool = False  # the scan stopped at SLOTS_SCANNED_MAX: there were more than ``count``


@dataclass(frozen=True)
class CatchUp:
    """The decision for one task at start: the slot run at once, and the slots not run."""

    run_at: float | None = None  # the newest slot in the window, run at start (``caught_up``)
    coalesced: Slots = Slots()  # the window's older slots, covered by that run
    missed: Slots = Slots()  # beyond the window; with ``skip``, every slot of the gap


def slots_between(
    after: float,
    until: float,
    *,
    interval_s: float | None = None,
    schedule: Schedule | None = None,
    anchor: float | None = None,
) -> Slots:
    """The slots strictly after ``after`` and not after ``until`` of an interval or schedule;
    an interval's slots are ``anchor`` (``after`` unless given) plus a whole number of them."""
    grid = after if anchor is None else anchor
    if schedule is not None:
        span = span_between(schedule, grid, after, until, walk_max=SLOTS_SCANNED_MAX)
    elif interval_s is not None:
        span = grid_between(grid, interval_s, after, until)
    else:
        return Slots()
    return Slots(span.count, span.first_s, span.newest_s, span.more)


def plan_catch_up(
    *,
    last_planned: float,
    now: float,
    misfire: str,
    window_s: float,
    interval_s: float | None = None,
    schedule: Schedule | None = None,
) -> CatchUp:
    """What to do at start with the slots planned after ``last_planned``, up to ``now``."""
    window_start = max(last_planned, now - window_s)
    timing: dict[str, Any] = {
        "interval_s": interval_s,
        "schedule": schedule,
        "anchor": last_planned,
    }
    beyond = slots_between(last_planned, window_start, **timing)
    inside = slots_between(window_start, now, **timing)
    if misfire == MISFIRE_SKIP:
        if not beyond.count:
            return CatchUp(missed=inside)
        newest_at = inside.newest_at if inside.count else beyond.newest_at
        total = beyond.count + inside.count
        return CatchUp(missed=Slots(total, beyond.first_at, newest_at, inside.more or beyond.more))
    if not inside.count:
        return CatchUp(missed=beyond)
    older = (
        Slots(inside.count - 1, inside.first_at, 0.0, inside.more) if inside.count > 1 else Slots()
    )
    return CatchUp(run_at=inside.newest_at, coalesced=older, missed=beyond)


@dataclass(frozen=True)
class Window:
    """How old a slot planned while the daemon was down may be to run at start, and the key
    of the task that says so (empty: no bound)."""

    seconds: float = math.inf
    key: str = ""


def catch_up_window(catchup_window_s: float | None, start_deadline_s: float | None) -> Window:
    """The shorter of the task's ``catchup_window`` and ``start_deadline``."""
    bounds = [
        Window(bound_s, key)
        for bound_s, key in (
            (catchup_window_s, "catchup_window"),
            (start_deadline_s, "start_deadline"),
        )
        if bound_s is not None
    ]
    return min(bounds, key=lambda window: window.seconds, default=Window())


def down_reason(window: Window, beyond_window: bool) -> str:
    """Why slots planned while the daemon was down were not run."""
    if beyond_window and window.key:
        return f"the daemon was down; older than its {window.key} of {window.seconds:g}s"
    return "the daemon was down (misfire: skip)"


def settle_catch_up(
    ticks: TickSlots,
    task: str,
    decision: CatchUp,
    *,
    misfire: str,
    window: Window,
    start_deadline_s: float | None = None,
) -> Slot | None:
    """Record the gap's slots in the slot record and submit the catch-up run, if any (it
    leaves the queue at its ``start_deadline``, as a tick's run does)."""
    record = ticks.record
    if decision.missed.count:
        missed = record.open(task, decision.missed.first_at, count=decision.missed.count)
        record.settle(missed, MISSED, reason=down_reason(window, misfire == MISFIRE_COALESCE))
    if decision.run_at is None:
        return None
    slot = ticks.fire(task, decision.run_at, None, start_deadline_s, outcome=CAUGHT_UP)
    coalesced = decision.coalesced
    ticks.cover(slot, coalesced.first_at, coalesced.count, reason=COVERED_AT_START)
    return slot
