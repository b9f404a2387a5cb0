"""An in-memory ``JobStore`` for unit tests: the same rules as the SQL, on dicts, one replica.

Time comes from ``clock`` so that tests can move it, and ``outage`` makes every call fail until
cleared.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from daemon.pg.store.base import (
    Claimed,
    ClaimPlan,
    DependencyState,
    DueJob,
    Outlook,
    Planner,
    Renewal,
    SchedulerFlags,
    StoreUnavailable,
    WriteBatch,
    WriteOutcome,
)
from daemon.pg.store.memory_rows import MemJob, MemRun, MemSubscription


class MemoryStore:
    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self.clock = clock or (lambda: datetime.now(UTC))
        self.jobs: dict[int, MemJob] = {}
        self.runs: dict[int, MemRun] = {}
        self.flags = SchedulerFlags()
        self.outage = False
        self.calls: list[str] = []
        self.claim_limits: list[int] = []
        self._listeners: list[tuple[MemSubscription, Callable[[str], None]]] = []
        self._ids = 0
        self._changed = asyncio.Event()

    # -- test helpers -------------------------------------------------------------------------
    def add(
        self, name: str, task: str, schedule: str, next_run_at: datetime | None, **kw: Any
    ) -> MemJob:
        self._ids += 1
        job = MemJob(self._ids, name, task, schedule, next_run_at, **kw)
        self.jobs[job.id] = job
        return job

    def job(self, name: str) -> MemJob:
        return next(j for j in self.jobs.values() if j.name == name)

    def runs_of(self, name: str) -> list[MemRun]:
        job_id = self.job(name).id
        return [r for r in self.runs.values() if r.job_id == job_id]

    def notify(self, payload: str = "jobs") -> None:
        for sub, callback in list(self._listeners):
            if not sub.lost:
                callback(payload)

    def drop_listeners(self) -> None:
        for sub, _ in self._listeners:
            sub.drop()

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
        """Wait until ``predicate()``, checked on store calls rather than a timer. TimeoutError if
        not."""
        async with asyncio.timeout(timeout_s):
            while not predicate():
                changed = self._changed
                await changed.wait()

    def bump(self) -> None:
        """Wake ``wait_for`` callers: something they may be waiting for changed."""
        self._changed.set()
        self._changed = asyncio.Event()

    def _enter(self, name: str) -> datetime:
        self.calls.append(name)
        self.bump()
        if self.outage:
            raise StoreUnavailable("outage")
        return self.clock()

    # -- JobStore -------------------------------------------------------------------------------
    async def claim(
        self,
        owner: str,
        limit: int,
        lease_s: float,
        planner: Planner,
        *,
        misfire_grace_s: float = 0.0,  # every job goes through the planner here
    ) -> list[Claimed]:
        await asyncio.sleep(0)  # a round trip: others run meanwhile, as with a database
        now = self._enter("claim")
        self.claim_limits.append(limit)
        if not self.flags.claiming or limit <= 0:
            return []
        due = [j for j in self.jobs.values() if j.enabled and (d := j.due_at()) and d <= now]
        due.sort(key=lambda j: (j.next_run_at, j.id))  # the SQL's ORDER BY next_run_at
        claimed = []
        for job in due[:limit]:
            plan = planner(self._due_job(job), now)
            if plan.abandon_error is not None and job.current_run_id in self.runs:
                run = self.runs[job.current_run_id]
                if run.status in ("queued", "running"):
                    run.status, run.finished_at, run.error = "abandoned", now, plan.abandon_error
            job.scheduled_for, job.attempt, job.enabled = (
                plan.scheduled_for,
                plan.attempt,
                plan.enabled,
            )
            if not plan.run or plan.scheduled_for is None:
                job.next_run_at, job.needs_schedule = plan.next_run_at, False
                job.lease_owner = job.lease_expires_at = job.current_run_id = None
                job.last_status = plan.last_status or job.last_status
                job.last_error = plan.last_error
                self._record_passed_over(job.id, plan, owner, now)
                continue
            self._ids += 1
            run = MemRun(self._ids, job.id, plan.scheduled_for, plan.attempt, owner)
            self.runs[run.id] = run
            job.lease_owner, job.current_run_id = owner, run.id
            job.lease_expires_at = now + timedelta(seconds=lease_s)
            claimed.append(Claimed(self._due_job(job), run.id, plan.scheduled_for, plan.attempt))
            self._record_passed_over(job.id, plan, owner, now)
        return claimed

    def _record_passed_over(self, job_id: int, plan: ClaimPlan, owner: str, now: datetime) -> None:
        """CLAIM's row of the occurrences a plan passes over: attempt 0, replaced when the key
        (job, first occurrence, 0) is there already."""
        passed = plan.passed_over
        if passed is None:
            return
        key = (job_id, passed.first, 0)
        row = next(
            (r for r in self.runs.values() if (r.job_id, r.scheduled_for, r.attempt) == key), None
        )
        if row is None:
            self._ids += 1
            row = self.runs[self._ids] = MemRun(self._ids, job_id, passed.first, 0, owner)
        row.status, row.occurrences, row.owner = passed.status, passed.count, owner
        row.finished_at, row.error = now, passed.note

    def _due_job(self, job: MemJob) -> DueJob:
        assert job.next_run_at is not None or job.lease_owner is not None
        return DueJob(
            id=job.id,
            name=job.name,
            task=job.task,
            payload=job.payload,
            schedule=job.schedule,
            tz=job.tz,
            next_run_at=job.next_run_at or self.clock(),
            scheduled_for=job.scheduled_for,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            misfire="skip" if job.misfire == "skip" else "coalesce",
            depends_on=job.depends_on,
            needs_schedule=job.needs_schedule,
            lease_owner=job.lease_owner,
            current_run_id=job.current_run_id,
        )

    async def schema_problem(self) -> str | None:
        return None

    async def outlook(self) -> Outlook:
        await asyncio.sleep(0)
        now = self._enter("outlook")
        times = [d for j in self.jobs.values() if j.enabled and (d := j.due_at())]
        due_in_s = (min(times) - now).total_seconds() if times else None
        return Outlook(replace(self.flags), due_in_s)

    async def heartbeat(self, owner: str, job_ids: Sequence[int], lease_s: float) -> Renewal:
        now = self._enter("heartbeat")
        kept = set()
        for job_id in job_ids:
            job = self.jobs.get(job_id)
            if job is not None and job.lease_owner == owner:
                job.lease_expires_at = now + timedelta(seconds=lease_s)
                kept.add(job_id)
        return Renewal(kept, {job_id for job_id in job_ids if job_id not in self.jobs})

    async def write(self, owner: str, batch: WriteBatch) -> WriteOutcome:
        now = self._enter("write")
        for start in batch.starts:
            run = self.runs.get(start.run_id)
            if run is not None and run.status == "queued" and run.owner == owner:
                run.status, run.started_at = "running", start.started_at
        lost = set()
        for f in batch.finishes:
            job = self.jobs.get(f.job_id)
            if job is None or job.lease_owner != owner or job.current_run_id != f.run_id:
                lost.add(f.run_id)
                continue
            run = self.runs[f.run_id]
            run.status, run.finished_at, run.output, run.error = (
                f.status,
                f.finished_at,
                f.output,
                f.error,
            )
            run.started_at = run.started_at or f.started_at
            job.lease_owner = job.lease_expires_at = job.current_run_id = None
            if f.retry_in_s is not None:
                job.next_run_at = now + timedelta(seconds=f.retry_in_s)
            else:
                job.next_run_at = f.next_run_at
            job.scheduled_for, job.attempt = f.scheduled_for, f.attempt
            job.last_run_at, job.last_status, job.last_error = f.finished_at, f.status, f.error
        for r in batch.releases:
            job = self.jobs.get(r.job_id)
            if job is None or job.lease_owner != owner or job.current_run_id != r.run_id:
                lost.add(r.run_id)
                continue
            del self.runs[r.run_id]
            job.lease_owner = job.lease_expires_at = job.current_run_id = None
            job.attempt = max(job.attempt - 1, 0)
            job.scheduled_for = job.scheduled_for if job.attempt else None
        if batch.finishes or batch.releases:
            self.notify("jobs")
        return WriteOutcome(frozenset(lost))

    async def dependency_states(
        self, names: Sequence[str], scheduled_for: datetime
    ) -> dict[str, DependencyState]:
        self._enter("dependency_states")
        states = {}
        for name in names:
            job = next((j for j in self.jobs.values() if j.name == name), None)
            if job is None:
                states[name] = DependencyState(False, False, None)
                continue
            pending = (
                job.lease_owner is not None
                or (job.scheduled_for is not None and job.scheduled_for <= scheduled_for)
                or (
                    job.enabled and job.next_run_at is not None and job.next_run_at <= scheduled_for
                )
            )
            states[name] = DependencyState(True, pending, job.last_status)
        return states

    async def prune(self, retention_s: float) -> int:
        now = self._enter("prune")
        cutoff = now - timedelta(seconds=retention_s)
        old = [r.id for r in self.runs.values() if r.finished_at and r.finished_at < cutoff]
        for run_id in old:
            del self.runs[run_id]
        return len(old)

    async def listen(self, on_message: Callable[[str], None]) -> MemSubscription:
        self._enter("listen")
        sub = MemSubscription(lambda: self.outage)
        self._listeners.append((sub, on_message))
        return sub

    async def close(self) -> None:
        self.drop_listeners()
