"""How ``runbroker jobs`` shows jobs and runs: JSON-ready dicts and plain-text tables.

The ``--json`` shapes are stable (times are RFC 3339 UTC or null):

- ``jobs list --json``: ``{"jobs": [...]}``, each ``{name, task, schedule, tz, enabled, state,
  next_run_at, scheduled_for, attempt, max_attempts, misfire, depends_on: [{job, policy}],
  lease_owner, last_run_at, last_status, last_error}``.
- ``jobs history [NAME] --json``: ``{"runs": [...]}``, newest first, each ``{id, job,
  scheduled_for, attempt, status, owner, claimed_at, started_at, finished_at, duration_ms,
  error, output}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from daemon.jobplan import rfc3339_utc
from daemon.store.base import JobInfo, RunInfo


def _t(value: datetime | None) -> str | None:
    return rfc3339_utc(value) if value is not None else None


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
        d = job_dict(job)
        next_run = d["scheduled_for"] if job.state in ("running", "retrying") else d["next_run_at"]
        last = d["last_status"] or "-"
        if job.state == "retrying":
            last = f"{last} (attempt {job.attempt})"
        rows.append(
            [job.name, job.task, f"{job.schedule} ({job.tz})", job.state, next_run or "-", last]
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
                d["started_at"] or "-",
                duration,
                error[:80],
            ]
        )
    return table(["ID", "JOB", "STATUS", "ATTEMPT", "STARTED", "DURATION", "ERROR"], rows)
