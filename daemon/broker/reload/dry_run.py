"""``runbroker reload --dry-run``: the plan a reload would make, and nothing changed.

The file is read and checked by the reloader's own steps (``TaskReloader.read_file``,
``check``); what would change is ``compare_tasks`` of the tasks that run now and those of the
file, and each added, removed or changed task's next planned time is given before and after.
After a reload a plan whose timing is unchanged keeps its loop (its next time stays); a new or
changed one starts on its schedule or interval from the reload, without a start-up fire
(``daemon.core.ticker.ticker``). With ``--file`` the client sends a candidate file's bytes, checked
by the same steps against the tasks that run now, so a file can be previewed before it lands in
the watched place. The check runs off the event loop, as a reload's does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from daemon.broker.reload.off_loop import no_collections, off_the_loop
from daemon.broker.reload.reloader import NO_TASKS_FILE, TaskReloader
from daemon.core.rfc3339 import rfc3339_utc
from daemon.core.tasks import compare_tasks
from daemon.core.ticker.ticker import TickPlan
from daemon.observe.upcoming import next_due
from daemon.schedules.every import every_text
from daemon.taskfile import TaskConfigError
from daemon.taskfile.tasks_file import check_size
from daemon.wire.control_answers import reload_plan_answer
from daemon.wire.control_shapes import ReloadMove


async def dry_run_answer(
    reloader: TaskReloader, now: datetime, candidate: tuple[str, bytes] | None = None
) -> dict[str, Any]:
    """The answer of ``{"op": "reload", "dry_run": true}``: ok with the plan, or the reason a
    reload would be refused. ``candidate``: the name and bytes of a file to check instead of
    the tasks file (``--file``)."""
    source: str | None = None
    data: bytes | str
    if candidate is not None:
        source, data = candidate
        try:
            check_size(data, source)
        except TaskConfigError as exc:
            data = str(exc)
    elif reloader.path is None:
        return reload_plan_answer(False, NO_TASKS_FILE)
    else:
        data = reloader.read_file()
    if isinstance(data, str):
        return reload_plan_answer(False, reloader.named(data, source))
    # What runs now, as the loop holds it: a reload swaps these whole, never in place.
    running, plans = reloader.registry.tasks, list(reloader.ticker.plans)
    with no_collections():
        return await off_the_loop(lambda: _plan(reloader, data, source, running, plans, now))


def _plan(
    reloader: TaskReloader,
    data: bytes,
    source: str | None,
    running: Mapping[str, object],
    running_plans: list[TickPlan],
    now: datetime,
) -> dict[str, Any]:
    """The answer of a dry run of ``data``, computed in a thread of its own: the check and
    each task's next times are the costly part of a large file."""
    checked = reloader.check(data, source)
    if isinstance(checked, str):
        return reload_plan_answer(False, reloader.named(checked, source))
    tasks, plans, _warnings = checked
    changes = compare_tasks(running, tasks)
    old = {plan.task: plan for plan in running_plans}
    new = {plan.task: plan for plan in plans}
    moves: list[ReloadMove] = []
    for name in changes.added:
        moves.append(_move(name, "added", None, new.get(name), now))
    for name in changes.removed:
        moves.append(_move(name, "removed", old.get(name), None, now))
    for name in changes.changed:
        moves.append(_move(name, "changed", old.get(name), new.get(name), now))
    return reload_plan_answer(True, changes=changes.names(), moves=moves)


def _move(
    name: str,
    change: Literal["added", "removed", "changed"],
    before: TickPlan | None,
    after: TickPlan | None,
    now: datetime,
) -> ReloadMove:
    due_before = next_due(before, now, "daemon")
    if before is not None and after is not None and before.key() == after.key():
        due_after = due_before  # the same timing: the ticker keeps the loop
    elif after is None or after.once:
        due_after = None  # a once plan fires at start-up only
    else:
        due_after = next_due(dataclasses.replace(after, fire_on_start=False), now, "file")
    return {
        "task": name,
        "change": change,
        "before": None if due_before is None else rfc3339_utc(due_before),
        "after": None if due_after is None else rfc3339_utc(due_after),
        "schedule_before": _timing(before),
        "schedule_after": _timing(after),
    }


def _timing(plan: TickPlan | None) -> str | None:
    if plan is None:
        return None
    if plan.schedule is not None:
        return f"{plan.schedule.text} ({plan.schedule.tz})"
    if plan.once:
        return "once"
    return None if plan.interval_s is None else every_text(plan.interval_s)
