"""How ``runbroker jobs`` shows jobs and runs: JSON-ready dicts and plain-text tables.

The tables show times in each job's own zone, so one job's times read the same in both tables.
The ``--json`` shapes are stable and stay in UTC: scripts read them. Under the jobs table, a
line for each scheduler switch that stops every claim.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from daemon.pg.admin.times import duration_ms, json_time, local_time, zone_of
from daemon.pg.store.admin_records import JobInfo, RunInfo
from daemon.pg.store.base import SchedulerFlags
from daemon.schedules import AtSchedule, parse_schedule


def schedule_text(job: JobInfo) -> str:
    """The schedule with its zone, a one-shot's time in that zone (it is stored in UTC)."""
    spec = job.schedule
    try:
        parsed = parse_schedule(spec, job.tz)
    except ValueError:
        parsed = None
    if isinstance(parsed, AtSchedule) and job.tz != "UTC" and (zone := zone_of(job.tz)):
        with contextlib.suppress(OverflowError):  # past the year 1 or 9999 there: as written
            spec = "at " + parsed.at_utc.astimezone(zone).isoformat(timespec="seconds")
    return f"{spec} ({job.tz})"


def job_dict(job: JobInfo) -> dict[str, Any]:
    return {
        "name": job.name,
        "task": job.task,
        "schedule": job.schedule,
        "tz": job.tz,
        "enabled": job.enabled,
        "state": job.state,
        "next_run_at": json_time(job.next_run_at),
        "scheduled_for": json_time(job.scheduled_for),
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "misfire": job.misfire,
        "depends_on": [{"job": d.job, "policy": d.policy} for d in job.depends_on],
        "lease_owner": job.lease_owner,
        "last_run_at": json_time(job.last_run_at),
        "last_status": job.last_status,
        "last_error": job.last_error,
    }


def run_dict(run: RunInfo) -> dict[str, Any]:
    return {
        "id": run.id,
        "job": run.job,
        "scheduled_for": json_time(run.scheduled_for),
        "attempt": run.attempt,
        "status": run.status,
        "occurrences": run.occurrences,
        "owner": run.owner,
        "claimed_at": json_time(run.claimed_at),
        "started_at": json_time(run.started_at),
        "finished_at": json_time(run.finished_at),
        "duration_ms": duration_ms(run.started_at, run.finished_at),
        "error": run.error,
        "output": run.output,
    }


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [headers, *rows]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def jobs_table(jobs: Sequence[JobInfo]) -> str:
    if not jobs:
        return "no jobs"
    rows = []
    for job in jobs:
        # running: the occurrence in flight, else when it next runs (for a retry: the retry)
        next_run = job.scheduled_for if job.state == "running" else job.next_run_at
        last = job.last_status or "-"
        if job.state == "retrying":
            last = f"{last} (attempt {job.attempt})"
        rows.append(
            [
                job.name,
                job.task,
                schedule_text(job),
                job.state,
                local_time(next_run, job.tz),
                last,
            ]
        )
    return table(["NAME", "TASK", "SCHEDULE", "STATE", "NEXT RUN", "LAST STATUS"], rows)


def runs_table(runs: Sequence[RunInfo]) -> str:
    if not runs:
        return "no runs"
    rows = []
    for run in runs:
        d = run_dict(run)
        duration = f"{d['duration_ms']}ms" if d["duration_ms"] is not None else "-"
        error = (run.error or "").replace("\n", " ")
        rows.append(
            [
                str(run.id),
                run.job,
                run.status,
                str(run.attempt),
                local_time(run.started_at, run.tz),
                duration,
                error[:80],
            ]
        )
    return table(["ID", "JOB", "STATUS", "ATTEMPT", "STARTED", "DURATION", "ERROR"], rows)


PAUSED_LINE = (
    "the runner is paused (scheduler.paused): no replica claims jobs until `runbroker jobs resume`"
)
DISABLED_LINE = "scheduler.enabled is false in runbroker_settings: no replica claims jobs"


def scheduler_lines(flags: SchedulerFlags) -> list[str]:
    """What ``jobs list`` says under its table when the switches stop every claim."""
    return [
        line for on, line in ((flags.paused, PAUSED_LINE), (not flags.enabled, DISABLED_LINE)) if on
    ]


def scheduler_dict(flags: SchedulerFlags) -> dict[str, bool]:
    return {"paused": flags.paused, "enabled": flags.enabled, "claiming": flags.claiming}


def pause_text(paused: bool, changed: bool) -> str:
    """What ``jobs pause`` and ``jobs resume`` print."""
    if paused:
        head = "paused" if changed else "already paused, nothing changed"
        until = "until `runbroker jobs resume` (a run in progress finishes)"
        return f"{head}: no replica claims jobs {until}"
    if changed:
        return "resumed: replicas claim due jobs again"
    return "not paused, nothing changed: replicas claim due jobs"
