"""Pure decisions of the Postgres runner: what a claim does, what a finish writes, backoff.

The next occurrence is computed from the previous *scheduled* time, never from "now", so a late
run does not drift the schedule and a repeated wall-clock hour does not fire twice.
"""

from __future__ import annotations

import functools
import random
from datetime import datetime, timedelta
from typing import Any

from daemon.core.rfc3339 import rfc3339_utc as rfc3339_utc  # the one text form of a time
from daemon.pg.missed import Occurrences, count_occurrences, latest_missed
from daemon.pg.store.base import (
    NO_OCCURRENCE,
    Claimed,
    ClaimPlan,
    DueJob,
    FinalStatus,
    Finish,
    PassedOver,
)
from daemon.pg.store.plain_case import EARLIEST_USABLE, LATEST_USABLE, is_plain
from daemon.schedules import parse_schedule

BACKOFF_CAP_S = 3600.0


def _out_of_range(job: DueJob) -> str | None:
    """Which of the row's times (written by hand) is out of range, or None."""
    if job.next_run_at < EARLIEST_USABLE:
        return "next_run_at"
    at = job.scheduled_for
    if at is not None and not EARLIEST_USABLE <= at < LATEST_USABLE:
        return "scheduled_for"
    return None


def _rescheduled(job: DueJob, sched: Occurrences, now: datetime, column: str) -> ClaimPlan:
    """A row whose time is out of range is taken as unset: on to the schedule's next
    occurrence after now, without a run (an expired lease's run is abandoned), and said so."""
    why = f"its {column} is out of range (before 0001-01-02 or after 9999-12-29)"
    return ClaimPlan(
        run=False,
        scheduled_for=None,
        attempt=0,
        next_run_at=sched.next_after(now),
        last_error=f"{why}; rescheduled from now",
        abandon_error=_abandoned_error(job),
        unusable=why,
    )


@functools.lru_cache(maxsize=4096)
def schedule_for(spec: str, tz: str) -> Occurrences:
    """The parsed schedule, cached. ValueError for a bad spec or zone."""
    parsed: Occurrences = parse_schedule(spec, tz)
    return parsed


def occurrence_after(sched: Occurrences, t: datetime) -> datetime:
    """What ``following_run_at`` says after ``t``: the next occurrence, or NO_OCCURRENCE."""
    return sched.next_after(t) or NO_OCCURRENCE


def plan_first_run(
    sched: Occurrences, now: datetime, *, starts_now: bool = False
) -> tuple[datetime | None, datetime | None]:
    """A new job's ``next_run_at`` and ``following_run_at`` from the database's ``now``: its
    first occurrence after now (None: it has none), and the one after that. ``starts_now``: a
    one-shot written for now itself (``--at now``), whose one occurrence is then, not after."""
    first = sched.next_after(now - timedelta(seconds=1) if starts_now else now)
    return first, None if first is None else occurrence_after(sched, first)


def _advance(
    next_run_at: datetime | None, *, last_status: str | None = None, **kw: str | None
) -> ClaimPlan:
    return ClaimPlan(
        run=False,
        scheduled_for=None,
        attempt=0,
        next_run_at=next_run_at,
        last_status=last_status,
        last_error=kw.get("last_error"),
        abandon_error=kw.get("abandon_error"),
    )


def _lease_expired(job: DueJob) -> str:
    """The error of the run whose lease (another replica's) expired."""
    return f"abandoned: the lease of {job.lease_owner} expired (attempt {job.attempt})"


def _abandoned_error(job: DueJob) -> str | None:
    if job.lease_owner is None or job.current_run_id is None:
        return None
    return _lease_expired(job)


def _invalid(job: DueJob, err: Exception) -> ClaimPlan:
    """The job cannot be scheduled: it is disabled with the reason (an expired lease's run is
    abandoned on the way), and stays so until someone fixes the row and enables it."""
    if isinstance(err, ValueError):
        error = f"invalid schedule {job.schedule!r} (tz {job.tz}): {err}"
    else:
        error = f"cannot schedule {job.schedule!r} (tz {job.tz}): {type(err).__name__}: {err}"
    return ClaimPlan(
        run=False,
        scheduled_for=None,
        attempt=0,
        next_run_at=None,
        enabled=False,
        last_status="failed",
        last_error=f"{error[:500]}; job disabled",
        abandon_error=_abandoned_error(job),
    )


def plan_claim(
    job: DueJob, now: datetime, *, default_max_attempts: int, misfire_grace_s: float
) -> ClaimPlan:
    """Decide, inside the claim transaction, what to do with one due job.

    Never raises for what one row holds: that job is disabled with the reason, so the claim goes
    on for the others. The plain case is ``plain_case.PLAIN_CASE``, the rule ``CLAIM_PLAIN`` is
    rendered from, so the statement and the planner decide it the same."""
    try:
        return _plan_claim(
            job, now, default_max_attempts=default_max_attempts, misfire_grace_s=misfire_grace_s
        )
    except Exception as err:  # one row must not fail the batch
        return _invalid(job, err)


def _plan_claim(
    job: DueJob, now: datetime, *, default_max_attempts: int, misfire_grace_s: float
) -> ClaimPlan:
    sched = schedule_for(job.schedule, job.tz)
    if is_plain(job, now, misfire_grace_s, lambda: occurrence_after(sched, job.next_run_at)):
        return ClaimPlan(run=True, scheduled_for=job.next_run_at, attempt=1)
    limit = job.max_attempts or default_max_attempts
    if (column := _out_of_range(job)) is not None:
        return _rescheduled(job, sched, now, column)

    if job.lease_owner is not None and job.scheduled_for is not None:
        # Another replica's lease expired: its run is abandoned and counts as an attempt.
        error = _lease_expired(job)
        if job.attempt < limit and not job.needs_schedule:
            return ClaimPlan(
                run=True,
                scheduled_for=job.scheduled_for,
                attempt=job.attempt + 1,
                abandon_error=error,
            )
        following = (
            sched.next_after(now) if job.needs_schedule else sched.next_after(job.scheduled_for)
        )
        return _advance(
            following,
            last_status="failed",
            last_error=f"{error}; {job.attempt} of {limit} attempts used",
            abandon_error=error,
        )

    if job.needs_schedule:
        first = sched.next_after(now)
        note = None if first is not None else "the schedule has no occurrence after now"
        return _advance(first, last_error=note)

    if job.scheduled_for is not None:  # a retry whose backoff is over
        if job.attempt >= limit:  # only a row edited by hand gets here
            return _advance(
                sched.next_after(job.scheduled_for),
                last_status="failed",
                last_error=f"{job.attempt} of {limit} attempts used",
            )
        return ClaimPlan(run=True, scheduled_for=job.scheduled_for, attempt=job.attempt + 1)

    occurrence = job.next_run_at
    latest, following = latest_missed(sched, occurrence, now)
    late_s = (now - occurrence).total_seconds()
    if job.misfire == "skip" and (latest != occurrence or late_s > misfire_grace_s):
        skipped = _advance(following)
        skipped.passed_over = _missed(sched, occurrence, latest)
        return skipped
    plan = ClaimPlan(run=True, scheduled_for=latest, attempt=1)
    if latest != occurrence:
        plan.passed_over = _coalesced(sched, occurrence, latest)
    return plan


def _count_text(count: int, at_least: bool) -> str:
    word = "occurrence" if count == 1 else "occurrences"
    return f"{'at least ' if at_least else ''}{count} {word}"


def _missed(sched: Occurrences, first: datetime, last: datetime) -> PassedOver:
    """The occurrences from ``first`` through ``last`` a misfire = skip job does not run."""
    count, at_least = count_occurrences(sched, first, last)
    counted = _count_text(count, at_least)
    note = f"{counted} from {rfc3339_utc(first)} to {rfc3339_utc(last)} not run"
    return PassedOver("missed", first, count, note)


def _coalesced(sched: Occurrences, first: datetime, run_for: datetime) -> PassedOver:
    """The occurrences from ``first`` up to the one run (``run_for``), run as that one."""
    count, at_least = count_occurrences(sched, first, run_for)
    if not at_least:  # the run's own occurrence, counted last, is not passed over
        count -= 1
    counted = _count_text(count, at_least)
    note = f"{counted} from {rfc3339_utc(first)} run once as {rfc3339_utc(run_for)}"
    return PassedOver("coalesced", first, count, note)


def backoff_s(attempt: int, base_s: float, rng: random.Random | None = None) -> float:
    """Capped exponential backoff after failed attempt ``attempt`` (1-based), with jitter.

    base * 2^(attempt-1), capped at max(base, 1h), then scaled by a random factor in [0.5, 1].
    """
    if base_s <= 0:
        return 0.0
    cap_s = max(base_s, BACKOFF_CAP_S)
    delay_s = min(base_s * 2.0 ** min(attempt - 1, 60), cap_s)
    return delay_s * (0.5 + 0.5 * (rng or random).random())


def plan_finish(
    claimed: Claimed,
    *,
    ok: bool,
    cancelled: bool,
    error: str | None,
    output: dict[str, Any] | None,
    started_at: datetime | None,
    finished_at: datetime,
    default_max_attempts: int,
    backoff_base_s: float,
    retryable: bool = True,
    rng: random.Random | None = None,
) -> Finish:
    """The run's record and the job's next state: a retry with backoff, or the next occurrence."""
    job, scheduled_for, attempt = claimed.job, claimed.scheduled_for, claimed.attempt
    status: FinalStatus = "succeeded" if ok else ("cancelled" if cancelled else "failed")
    limit = job.max_attempts or default_max_attempts
    retry = not ok and retryable and attempt < limit
    following: datetime | None = None
    after_following: datetime | None = None
    if not retry:
        try:  # a schedule that cannot be computed ends the job (the claim said why)
            sched = schedule_for(job.schedule, job.tz)
            following = sched.next_after(scheduled_for)
            if following is not None:
                after_following = occurrence_after(sched, following)
        except Exception:
            following = after_following = None
    return Finish(
        job_id=job.id,
        run_id=claimed.run_id,
        status=status,
        started_at=started_at,
        finished_at=finished_at,
        output=output,
        error=None if ok else (error or status),
        next_run_at=following,
        retry_in_s=backoff_s(attempt, backoff_base_s, rng) if retry else None,
        scheduled_for=scheduled_for if retry else None,
        attempt=attempt if retry else 0,
        following_run_at=after_following,
    )
