"""``runbroker reload --dry-run``: the plan a reload would make, and nothing changed.

The file is read and checked by the reloader's own steps (``TaskReloader.read_file``,
``check``); what would change is ``compare_tasks`` of the tasks that run now and those of the
file, and each added, removed or changed task's next planned time is given before and after.
After a reload a plan whose timing is unchanged keeps its loop (its next time stays); a new or
changed one starts on its schedule or interval from the reload, without a start-up fire
(``daemon.core.ticker``).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, Literal

from daemon.broker.reload.reloader import NO_TASKS_FILE, TaskReloader
from daemon.core.rfc3339 import rfc3339_utc
from daemon.core.tasks import compare_tasks
from daemon.core.ticker import TickPlan
from daemon.observe.upcoming import next_due
from daemon.schedules.every import every_text
from daemon.wire.control_answers import reload_plan_answer
from daemon.wire.control_shapes import ReloadMove


def dry_run_answer(reloader: TaskReloader, now: datetime) -> dict[str, Any]:
    """The answer of ``{"op": "reload", "dry_run": true}``: ok with the plan, or the reason a
    reload would be refused."""
    if reloader.path is None:
        return reload_plan_answer(False, NO_TASKS_FILE)
    data = reloader.read_file()
    checked = reloader.check(data) if isinstance(data, bytes) else data
    if isinstance(checked, str):
        return reload_plan_answer(False, reloader.named(checked))
    tasks, plans, _warnings = checked
    changes = compare_tasks(reloader.registry.tasks, tasks)
    old = {plan.task: plan for plan in reloader.ticker.plans}
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
