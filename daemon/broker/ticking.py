"""What the ticker runs, from the settings and the tasks: the ``default`` task at
``RUNBROKER_INTERVAL`` (the README, "Configuration"), and every task with its own ``interval`` or
``schedule`` in the tasks file. Intervals are held to bounds, with a warning when one is moved.
"""

from __future__ import annotations

from typing import Any

from daemon.core.tasks import Task, TaskRegistry
from daemon.core.ticker.ticker import TickPlan
from daemon.schedules.interval import MIN_INTERVAL_S, clamp_interval, parse_interval
from daemon.settings import Settings

MAX_INTERVAL_S = 720 * 3600.0  # 30 days: a longer one is a typo (or wants a schedule), clamped


def tick_plans(settings: Settings, tasks: TaskRegistry) -> tuple[list[TickPlan], list[str]]:
    """The ticker's plans and the warnings about their intervals.

    Every interval is held to [``MIN_INTERVAL_S``, ``MAX_INTERVAL_S``]. Warnings name the
    setting, never its value, because the environment can carry secrets."""
    plans: list[TickPlan] = []
    warnings: list[str] = []
    default = tasks.get("default")
    if default is not None and default.interval_s is None and default.schedule is None:
        decision = parse_interval(
            settings.interval,
            default_s=settings.default_interval_s,
            zero_as_once=True,
            min_s=MIN_INTERVAL_S,
            max_s=MAX_INTERVAL_S,
            redact=True,
        )
        warnings.extend(f"RUNBROKER_INTERVAL: {warning}" for warning in decision.warnings)
        if decision.mode == "builtin":
            plans.append(
                TickPlan(
                    "default",
                    interval_s=decision.interval_s,
                    fire_on_start=settings.fire_on_start,
                    **_slot_policy(default),
                )
            )
        elif decision.mode == "once":
            plans.append(TickPlan("default", once=True))
    for task in tasks.tasks.values():
        plan, own_warnings = task_tick_plan(task, fire_on_start=settings.fire_on_start)
        warnings.extend(own_warnings)
        if plan is not None:
            plans.append(plan)
    return plans, warnings


def task_tick_plan(task: Task, *, fire_on_start: bool) -> tuple[TickPlan | None, list[str]]:
    """The ticker's plan of a task's own ``interval`` or ``schedule`` (None: it has neither)
    and the warnings about its interval; ``daemon.testing`` plans a user's task with it too."""
    if task.schedule is not None:
        return TickPlan(task.name, schedule=task.schedule, **_slot_policy(task)), []
    if task.interval_s is None:
        return None, []
    own = clamp_interval(
        task.interval_s,
        subject=f"tasks.{task.name}: interval",
        min_s=MIN_INTERVAL_S,
        max_s=MAX_INTERVAL_S,
    )
    plan = TickPlan(
        task.name, interval_s=own.interval_s, fire_on_start=fire_on_start, **_slot_policy(task)
    )
    return plan, list(own.warnings)


def _slot_policy(task: Task) -> dict[str, Any]:
    """What the task says of its slots: when busy, how late, and after a restart."""
    return {
        "on_busy": task.on_busy,
        "start_deadline_s": task.start_deadline_s,
        "misfire": task.misfire,
        "catchup_window_s": task.catchup_window_s,
    }
