"""How ``runbroker jobs`` shows jobs and runs: JSON-ready dicts and plain-text tables.

The tables show times in each job's own zone, so one job's times read the same in both tables.
The ``--json`` shapes are stable and stay in UTC: scripts read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from daemon.pg.plan import rfc3339_utc
from daemon.pg.store.admin_records import JobInfo, RunInfo
from daemon.schedules import AtSchedule, parse_schedule


def _t(value: datetime | None) -> str | None:
    return rfc3339_utc(value) if value is not None else None


def _zone(tz: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(tz)
    except (ValueError, KeyError):  # a zone written by hand that does not exist
        return None


def local_time(value: datetime | None, tz: str) -> str:
    """``value`` as a wall time in the zone ``tz`` with its UTC offset, for the tables.

    ``2027-01-01 09:00:00+01:00``, UTC as ``...Z``, and ``-`` for none."""
    if value is None:
        return "-"
    if value in (datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)):
        return "-infinity" if value.year == 1 else "infinity"
    zone = _zone(tz)
    if zone is None or tz == "UTC":
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    return value.astimezone(zone).isoformat(sep=" ", timespec="seconds")


def schedule_text(job: JobInfo) -> str:
    """The schedule with its zone, a one-shot's time in that zone (it is stored in UTC)."""
    spec = job.schedule
    try:
        parsed = parse_schedule(spec, job.tz)
    except ValueError:
        parsed = None
    if isinstance(parsed, AtSchedule) and job.tz != "UTC" and (zone := _zone(job.tz)):
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
        "next_run_at": _t(job.next_run_at),
        "scheduled_for": _t(job.scheduled_for),
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "misfire": job.misfire,
        "depends_on": [{"job": d.job, "policy": d.policy} for d in job.depends_on],
        "lease_owner": job.lease_owner,
        "last_run_at": _t(job.last_run_at),
        "last_status": job.last_status,
        "last_error": job.last_error,
    }


def run_dict(run: RunInfo) -> dict[str, Any]:
    duration_ms = None
    if run.started_at is not None and run.finished_at is not None:
        duration_ms = round((run.finished_at - run.started_at).total_seconds() * 1000)
    return {
        "id": run.id,
        "job": run.job,
        "scheduled_for": _t(run.scheduled_for),
        "attempt": run.attempt,
        "status": run.status,
        "occurrences": run.occurrences,
        "owner": run.owner,
        "claimed_at": _t(run.claimed_at),
        "started_at": _t(run.started_at),
        "finished_at": _t(run.finished_at),
        "duration_ms": duration_ms,
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
