"""The answers to the ``status`` and ``health`` control ops, built from the broker's parts.

Their shapes are ``daemon.wire.control_shapes``, checked by mypy. What each field means is in
the README.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from daemon.core.runqueue import Run
from daemon.core.ticker.slots import Slot, SlotRecord
from daemon.core.ticker.ticker import TickPlan
from daemon.schedules.every import every_text
from daemon.wire import control_answers as answers
from daemon.wire.control_shapes import (
    CurrentRun,
    HealthAnswer,
    RecentRun,
    RunSummary,
    SlotEntry,
    StatusAnswer,
    TaskSlots,
    TickSummary,
)

if TYPE_CHECKING:
    from daemon.observe.sources import BrokerState

WEDGED_MARGIN_S = 30.0
STALL_SLACK_S = 1.0
SCHEDULE_STALL_S = 60.0


def _iso(timestamp: float | None) -> str | None:
    """To the millisecond: ``status`` computes "2.3s ago" from it."""
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds")


def _run_summary(run: Run) -> RunSummary:
    return {"id": run.id, "task": run.request.task, "trigger": run.request.trigger}


def _result_summary(run: Run) -> RecentRun:
    summary: RecentRun = {
        "id": run.id,
        "task": run.request.task,
        "trigger": run.request.trigger,
        "finished_at": None,
    }
    result = run.result
    if result is not None:
        summary["ok"] = result.ok
        summary["reason"] = result.reason
        summary["code"] = result.wire_code
        summary["exit_code"] = result.exit_code
        summary["duration_ms"] = result.duration_ms
    # A run that started finished its duration later. One cancelled while queued never ran.
    finished_at = None
    if run.started_at is not None and result is not None:
        finished_at = run.started_at + result.duration_ms / 1000
    summary["finished_at"] = _iso(finished_at)
    return summary


def _tick_summary(plan: TickPlan) -> TickSummary:
    """A tick plan as ``status`` shows it.

    ``schedule`` is the one text form of a schedule (``every DUR`` for an interval, ``once`` for
    a run at start), ``tz`` its zone (None for an interval). Times are RFC 3339 in UTC."""
    schedule, tz = "-", None
    if plan.schedule is not None:
        schedule, tz = plan.schedule.text, plan.schedule.tz
    elif plan.once:
        schedule = "once"
    elif plan.interval_s is not None:
        schedule = every_text(plan.interval_s)
    return {
        "task": plan.task,
        "schedule": schedule,
        "tz": tz,
        "next_at": _iso(plan.next_fire_at),
        "last_at": _iso(plan.last_fired_at),
    }


def _slot_entry(slot: Slot) -> SlotEntry:
    return {
        "planned_at": _iso(slot.planned_at) or "",
        "outcome": slot.outcome,
        "count": slot.count,
        "run_id": slot.run_id or None,
        "result": slot.result or None,
        "reason": slot.reason or None,
        "note": slot.note or None,
        "settled_at": _iso(slot.settled_at) or "",
    }


def slot_summaries(record: SlotRecord) -> list[TaskSlots]:
    """Each task's last settled slots and its counts by outcome, by task name."""
    return [
        {
            "task": task,
            "totals": record.totals(task),
            "last": [_slot_entry(slot) for slot in record.last(task)],
        }
        for task in record.tasks()
    ]


def status_answer(broker: BrokerState) -> StatusAnswer:
    stats = broker.queue.statistics()
    current = broker.queue.current
    current_info: CurrentRun | None = None
    if current is not None:
        current_info = {**_run_summary(current), "elapsed_ms": round(current.elapsed_s() * 1000)}
    database = broker.pgrunner.status() if broker.pgrunner is not None else None
    answer: StatusAnswer = {
        "event": answers.EVENT_STATUS,
        "ok": True,
        "pid": os.getpid(),
        "reaper": broker.reaper_mode,
        "uptime_s": round(time.time() - broker.started_at, 3),
        "queue": {
            "capacity": stats.capacity,
            "waiting": stats.waiting,
            "accepted": stats.accepted,
            "rejected_full": stats.rejected_full,
            "rejected_closed": stats.rejected_closed,
            "finished": stats.finished,
            "closed": stats.closed,
        },
        "current": current_info,
        "waiting": [
            {**_run_summary(run), "position": position}
            for position, run in enumerate(broker.queue.waiting(), start=1)
        ],
        "recent": [_result_summary(run) for run in broker.recent],
        "ticks": [_tick_summary(plan) for plan in broker.ticker.plans],
        "slots": slot_summaries(broker.ticker.slots),
        "reload": broker.reloader.status(),
        "journal": broker.journal.figures(),
        "database": database,
    }
    notify = broker.notifier.status()
    if notify is not None:
        answer["notify"] = notify
    if broker.slot_state is not None:
        answer["state"] = broker.slot_state.status()
    strays = broker.strays
    if strays:
        answer["strays"] = [
            {
                "id": stray.run_id,
                "task": stray.task,
                "started_at": _iso(stray.started_at) or "",
                "given_up_at": _iso(stray.given_up_at) or "",
            }
            for stray in strays
        ]
    return answer


def health_problem(broker: BrokerState) -> str | None:
    """Why this process does not work (liveness), or None: nothing about the database."""
    if broker.queue.closed:
        return "shutting down"
    current = broker.queue.current
    if current is not None:
        task = broker.tasks.get(current.request.task)
        timeout_s = task.timeout_s if task is not None else None
        if timeout_s is not None:
            grace_s = task.grace_s if task and task.grace_s is not None else broker.settings.grace_s
            limit_s = timeout_s + grace_s + WEDGED_MARGIN_S
            if current.elapsed_s() > limit_s:
                elapsed_s = current.elapsed_s()
                return f"executor wedged: run {current.id} at {elapsed_s:.0f}s, past its timeout"
    return ticker_stall(broker, time.time())


def readiness_problem(broker: BrokerState) -> str | None:
    """Why the daemon is not ready (its database does not work), or None. Liveness apart."""
    if broker.pgrunner is not None:
        problem: str | None = broker.pgrunner.health_problem()
        return problem or None
    return None


def ticker_stall(broker: BrokerState, now: float) -> str | None:
    """A ticking task that has not fired within two of its intervals (jitter allowed for), or a
    schedule whose due time passed long ago without a tick."""
    for plan in broker.ticker.plans:
        if plan.once:
            continue
        if plan.interval_s is not None:
            limit_s = 2 * plan.interval_s * (1 + broker.ticker.jitter) + STALL_SLACK_S
            reference = plan.last_fired_at or plan.planned_at or broker.started_at
            if now - reference > limit_s:
                return (
                    f"ticker stalled: task {plan.task!r} has not fired for "
                    f"{now - reference:.0f}s (interval {plan.interval_s:g}s)"
                )
        elif plan.next_fire_at is not None and now - plan.next_fire_at > SCHEDULE_STALL_S:
            return f"ticker stalled: task {plan.task!r} was due {now - plan.next_fire_at:.0f}s ago"
    return None


def health_warnings(broker: BrokerState) -> list[str]:
    """What is wrong without making the daemon unhealthy: a refused reload of the tasks file,
    a task past its ``max_silence``, a state directory that cannot be written, database job
    rows it cannot use, a handler still running after the executor gave up on it."""
    warnings = broker.reloader.health_warnings() + broker.notifier.health_warnings()
    if broker.slot_state is not None:
        warnings += broker.slot_state.health_warnings()
    warnings += stray_warnings(broker, time.time())
    return warnings + (broker.pgrunner.health_warnings() if broker.pgrunner is not None else [])


def stray_warnings(broker: BrokerState, now: float) -> list[str]:
    """One line a stray: the executor went on without it, so the daemon works."""
    return [
        f"run {stray.run_id} of task {stray.task!r}: its handler ignored its cancellation and "
        f"still runs, {now - stray.given_up_at:.0f}s after its result was given"
        for stray in broker.strays
    ]


def health_answer(broker: BrokerState) -> HealthAnswer:
    problem = health_problem(broker)
    return answers.health_answer(problem, health_warnings(broker), readiness_problem(broker))
