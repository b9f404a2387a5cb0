"""The administration ``runbroker jobs`` needs, on PostgreSQL (statements in ``queries.admin``)."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from daemon.pg.store.admin_records import (
    JobBusy,
    JobExists,
    JobInfo,
    JobInvalid,
    JobNotFound,
    NewJob,
    RunInfo,
)
from daemon.pg.store.postgres.pool import PgPool
from daemon.pg.store.postgres.rows import job_info
from daemon.pg.store.queries.admin import (
    CHANNEL,
    DB_NOW,
    DELETE_JOB,
    HISTORY,
    INSERT_JOB,
    JOB_ID,
    LIST_JOBS,
    LOCK_JOB,
    LOCK_JOB_NAMES,
    LOCK_SETTING,
    NOTIFY_RUN_NOW,
    RUN_NOW,
    SET_ENABLED,
    SET_SETTING,
)
from daemon.pg.store.scheduler_flags import PAUSED_KEY, flag_value


class PgAdminStore:
    """The ``jobs`` commands' side of the store: jobs added, listed, removed, enabled, disabled,
    run now, the run history, and the runner paused and resumed.

    Built on the pool of the ``PostgresStore`` it stands beside (``store.admin``)."""

    def __init__(self, pool: PgPool) -> None:
        self._pool = pool

    async def db_now(self) -> datetime:
        async with self._pool.connection() as conn:
            now: datetime = await conn.fetchval(DB_NOW)
        return now

    async def add_job(self, job: NewJob) -> JobInfo:
        deps = [{"job": d.job, "policy": d.policy} for d in job.depends_on]
        try:
            async with self._pool.connection() as conn, conn.transaction():
                if deps:  # the jobs depended on exist, and stay until this one is in
                    names = sorted({d.job for d in job.depends_on})
                    found = {row["name"] for row in await conn.fetch(LOCK_JOB_NAMES, names)}
                    missing = [name for name in names if name not in found]
                    if missing:
                        raise JobInvalid(
                            f"--depends-on: no job named {', '.join(map(repr, missing))}"
                        )
                row = await conn.fetchrow(
                    INSERT_JOB,
                    job.name,
                    job.task,
                    job.payload,
                    job.schedule,
                    job.tz,
                    job.enabled,
                    job.next_run_at,
                    job.max_attempts,
                    job.misfire,
                    deps,
                    job.following_run_at,
                )
        except asyncpg.exceptions.UniqueViolationError:
            raise JobExists(f"job {job.name!r} already exists") from None
        return job_info(row)

    async def list_jobs(self) -> list[JobInfo]:
        async with self._pool.connection() as conn:
            rows = await conn.fetch(LIST_JOBS)
        return [job_info(row) for row in rows]

    async def remove_job(self, name: str) -> None:
        async with self._pool.connection() as conn:
            if await conn.fetchval(DELETE_JOB, name) is None:
                raise JobNotFound(f"no job named {name!r}")

    async def set_enabled(self, name: str, enabled: bool) -> JobInfo:
        async with self._pool.connection() as conn:
            row = await conn.fetchrow(SET_ENABLED, name, enabled)
        if row is None:
            raise JobNotFound(f"no job named {name!r}")
        return job_info(row)

    async def run_now(self, name: str) -> JobInfo:
        """Make the job due now and wake every replica. Refused while it runs or is disabled."""
        async with self._pool.connection() as conn, conn.transaction():
            row = await conn.fetchrow(LOCK_JOB, name)
            if row is None:
                raise JobNotFound(f"no job named {name!r}")
            if row["lease_owner"] is not None:
                raise JobBusy(f"job {name!r} is running now; run-now again when it has finished")
            if not row["enabled"]:
                raise JobBusy(f"job {name!r} is disabled; enable it first")
            updated = await conn.fetchrow(RUN_NOW, row["id"])
            await conn.execute(NOTIFY_RUN_NOW, CHANNEL)
        return job_info(updated)

    async def history(self, name: str | None, limit: int) -> list[RunInfo]:
        async with self._pool.connection() as conn:
            if name is not None and await conn.fetchval(JOB_ID, name) is None:
                raise JobNotFound(f"no job named {name!r}")
            rows = await conn.fetch(HISTORY, name, limit)
        return [RunInfo(**dict(row)) for row in rows]

    async def set_paused(self, paused: bool) -> bool:
        """Write ``scheduler.paused`` (the row made again if it was deleted). Returns whether
        the runner's state changed: False when it already was so, so that pausing twice is
        harmless and says so."""
        async with self._pool.connection() as conn, conn.transaction():
            before = flag_value(await conn.fetchval(LOCK_SETTING, PAUSED_KEY), False)
            await conn.execute(SET_SETTING, PAUSED_KEY, paused)
        return before != paused
