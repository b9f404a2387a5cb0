"""The answers to the ``status`` and ``health`` control ops (a stable, documented shape).

``status``::

    {"event": "status", "ok": true, "pid": int, "reaper": "pid1"|"subreaper"|"none",
     "uptime_s": float,
     "queue": {"capacity", "waiting", "accepted", "rejected_full", "rejected_closed",
               "finished", "closed"},
     "current": null | {"id", "task", "trigger", "elapsed_ms"},
     "waiting": [{"id", "task", "trigger", "position"}],
     "recent": [{"id", "task", "trigger", "ok", "reason", "code", "exit_code", "duration_ms",
                 "finished_at"}],
     "ticks": [{"task", "schedule", "tz", "next_at", "last_at"}],
     "reload": {"tasks_file": null | str, "watch": "inotify"|"signal"|"lost"|"none",
                "last_at", "last_source": "signal"|"file"|"request", "last_ok": null | bool,
                "last_changes": null | {"added", "removed", "changed", "unchanged"} (counts),
                "last_error": null | str, "last_failed_at"},
     "journal": {"bytes", "runs", "run_bytes_max", "history_runs_max", "history_bytes_max"},
     "database": null | {...}}

``journal`` is the output ``runbroker logs`` reads: the bytes its lines hold now, and how
many runs (the running one and the finished ones kept), with its bounds.

``health``: ``{"event": "health", "ok": bool, "reason": str, "code": str, "ready": bool,
"ready_reason": str, "warnings": [str]}`` (``reason`` and ``ready_reason`` empty when there is
none, ``code`` ``unhealthy`` beside a reason, ``warnings`` omitted when there are none).
``ok`` is liveness: whether this process works. It is false, with
the reason in one line, when: the daemon is shutting down; a run is wedged past its task's
timeout + grace + 30 s; a ticking task has not fired within two of its intervals (or a schedule
is over a minute late). A restart cures those. ``ready`` is readiness: live, and the database
(when one is configured) works: not when it has been unreachable longer than the runner's
threshold, or every claim has failed that long, or its schema is missing or older than this
runbroker. A restart cures none of those (every replica sees the same database), so they never
make the daemon unhealthy: a liveness probe would restart every replica during an outage, and
kill their running jobs with it. ``warnings`` name
database job rows the runner could not use (a payload it cannot read, a schedule it cannot
compute, a task this container does not define): each fails or is disabled on its own, every
other job goes on, and a restart would not fix the row, so they do not make it unhealthy. A
last reload of the tasks file that was refused is a warning too, not a problem: the daemon still
runs the tasks it had, and a restart would read the same bad file and not start at all; so is a
lost watch of the tasks file's directory (SIGHUP or ``runbroker reload`` re-arm it).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from daemon.core.runqueue import Run
from daemon.core.ticker import TickPlan
from daemon.schedules.every import every_text
from daemon.wire import control_answers as answers

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


def _run_summary(run: Run) -> dict[str, Any]:
    return {"id": run.id, "task": run.request.task, "trigger": run.request.trigger}


def _result_summary(run: Run) -> dict[str, Any]:
    summary = _run_summary(run)
    result = run.result
    if result is not None:
        summary.update(
            ok=result.ok,
            reason=result.reason,
            code=result.wire_code,
            exit_code=result.exit_code,
            duration_ms=result.duration_ms,
        )
    # A run that started finished its duration later; one cancelled while queued never ran.
    finished_at = None
    if run.started_at is not None and result is not None:
        finished_at = run.started_at + result.duration_ms / 1000
    summary["finished_at"] = _iso(finished_at)
    return summary


def _tick_summary(plan: TickPlan) -> dict[str, Any]:
    """A tick plan as ``status`` shows it. ``schedule`` is the one text form of DESIGN.md
    (``every DUR`` for an interval, the schedule's text otherwise, ``once`` for a run at start),
    ``tz`` its zone (None for an interval); times are RFC 3339 in UTC, like ``finished_at``."""
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


def status_answer(broker: BrokerState) -> dict[str, Any]:
    stats = broker.queue.statistics()
    current = broker.queue.current
    current_info = None
    if current is not None:
        current_info = {**_run_summary(current), "elapsed_ms": round(current.elapsed_s() * 1000)}
    database = broker.pgrunner.status() if broker.pgrunner is not None else None
    return {
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
        "reload": broker.reloader.status(),
        "journal": broker.journal.figures(),
        "database": database,
    }


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
    """Why the daemon is not ready (its database does not work), or None; liveness apart."""
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
    database job rows it cannot use."""
    warnings = broker.reloader.health_warnings()
    return warnings + (broker.pgrunner.health_warnings() if broker.pgrunner is not None else [])


def health_answer(broker: BrokerState) -> dict[str, Any]:
    problem = health_problem(broker)
    return answers.health_answer(problem, health_warnings(broker), readiness_problem(broker))
