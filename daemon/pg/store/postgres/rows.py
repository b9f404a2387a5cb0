"""What the PostgreSQL store's rows mean in Python, and what it sends as JSON.

Decoding never fails for what one row holds, because a row written by hand must not fail every
other row's claim or listing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from daemon.pg.store.admin_records import JobInfo
from daemon.pg.store.base import NO_OCCURRENCE, ClaimPlan, Dependency, DueJob, Finish

UNREADABLE_JSON = "<unreadable JSON: nested too deeply>"


def _unreadable(exc: BaseException) -> str:
    """Why a JSON text from the database cannot be read (hand-written rows can hold anything
    jsonb takes: it nests far deeper than Python's decoder can follow)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply to be read"
    return f"not readable: {str(exc)[:120]}"


def json_or_marker(text: str) -> Any:
    """The json/jsonb decoder of the ``jobs`` commands: a value that cannot be read becomes a
    marker, so listing jobs or runs never fails on one row."""
    try:
        return json.loads(text)
    except (RecursionError, ValueError):
        return UNREADABLE_JSON


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def as_us(t: datetime | None) -> int | None:
    """An aware datetime as integer microseconds since the epoch: exact, and a plain JSON
    number (the SQL turns it back: ``timestamptz 'epoch' + n * interval '1 microsecond'``)."""
    return None if t is None else (t - EPOCH) // _MICROSECOND


def from_us(us: int | None) -> datetime | None:
    """The inverse of ``as_us`` (the due query sends its times so: cheaper to decode)."""
    return None if us is None else EPOCH + timedelta(microseconds=us)


def plans_json(jobs: Sequence[DueJob], plans: Sequence[ClaimPlan]) -> str:
    """A claim's plans as one JSON array of arrays (see CLAIM in ``queries/claim.py``)."""
    return json.dumps(
        [
            (
                j.id,
                p.run,
                as_us(p.scheduled_for),
                p.attempt,
                as_us(p.next_run_at),
                p.enabled,
                p.last_status,
                p.last_error,
                j.current_run_id if p.abandon_error else None,
                p.abandon_error,
                *_passed_over(p),
            )
            for j, p in zip(jobs, plans, strict=True)
        ],
        separators=(",", ":"),
    )


def _passed_over(plan: ClaimPlan) -> tuple[str | None, int | None, int | None, str | None]:
    """The plan's row of occurrences passed over, as CLAIM's elements 10 to 13 (nulls: none)."""
    passed = plan.passed_over
    if passed is None:
        return None, None, None, None
    return passed.status, as_us(passed.first), passed.count, passed.note


def finishes_json(owner: str, finishes: Sequence[Finish]) -> str:
    """A batch of finishes as one JSON array of arrays (see FINISH in ``queries/runs.py``).
    One ``json.dumps`` costs a fraction of what asyncpg spends encoding twelve typed arrays
    (timestamps above all)."""
    return json.dumps(
        [
            (
                f.job_id,
                f.run_id,
                f.status,
                as_us(f.started_at),
                as_us(f.finished_at),
                f.output,
                f.error,
                as_us(f.next_run_at),
                f.retry_in_s,
                as_us(f.scheduled_for),
                f.attempt,
                owner,
                "infinity" if f.following_run_at is NO_OCCURRENCE else as_us(f.following_run_at),
            )
            for f in finishes
        ],
        separators=(",", ":"),
    )


def due_job(row: asyncpg.Record) -> DueJob:
    """A due row as the runner sees it. Never raises for what a row holds: a payload or
    depends_on that cannot be read marks the job ``unusable`` (its run fails with the reason),
    so one row written by hand cannot fail the claim of every other."""
    payload, depends_on = row["payload"], row["depends_on"]
    unusable = None
    what = "payload"
    try:
        payload = {} if payload == "{}" else json.loads(payload)
        what = "depends_on"
        deps = () if depends_on is None else parse_dependencies(json.loads(depends_on))
    except (RecursionError, ValueError) as exc:
        payload, deps, unusable = None, (), f"its {what} is {_unreadable(exc)}"
    return DueJob(
        id=row["id"],
        name=row["name"],
        task=row["task_type"],
        payload=payload,
        schedule=row["schedule"],
        tz=row["time_zone"],
        next_run_at=EPOCH + timedelta(microseconds=row["next_run_us"]),
        scheduled_for=from_us(row["scheduled_for_us"]),
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        misfire=row["misfire"],
        depends_on=deps,
        needs_schedule=row["needs_schedule"],
        lease_owner=row["lease_owner"],
        current_run_id=row["current_run_id"],
        unusable=unusable,
    )


def parse_dependencies(value: Any) -> tuple[Dependency, ...]:
    """The ``depends_on`` column. Entries that are not {"job": str, ...} are ignored."""
    deps: list[Dependency] = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict) and isinstance(item.get("job"), str):
            deps.append(Dependency(item["job"], "skip" if item.get("policy") == "skip" else "stop"))
        elif isinstance(item, str):
            deps.append(Dependency(item))
    return tuple(deps)


def job_info(row: asyncpg.Record) -> JobInfo:
    return JobInfo(
        id=row["id"],
        name=row["name"],
        task=row["task_type"],
        payload=row["payload"],
        schedule=row["schedule"],
        tz=row["time_zone"],
        enabled=row["enabled"],
        next_run_at=row["next_run_at"],
        scheduled_for=row["scheduled_for"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        misfire=row["misfire"],
        depends_on=parse_dependencies(row["depends_on"]),
        lease_owner=row["lease_owner"],
        lease_expires_at=row["lease_expires_at"],
        last_run_at=row["last_run_at"],
        last_status=row["last_status"],
        last_error=row["last_error"],
    )
