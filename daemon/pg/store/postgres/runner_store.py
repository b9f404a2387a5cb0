"""The runner's ``JobStore`` on PostgreSQL, over the one pool it owns.

Its statements are in ``queries.claim`` and ``queries.runs``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import asyncpg

from daemon.pg.store.base import (
    Claimed,
    ClaimIncomplete,
    DependencyState,
    Outlook,
    Planner,
    Renewal,
    SchedulerFlags,
    WriteBatch,
    WriteOutcome,
)
from daemon.pg.store.migrate import latest_migration_version
from daemon.pg.store.postgres.admin_store import PgAdminStore
from daemon.pg.store.postgres.listen import PgListening, start_listening
from daemon.pg.store.postgres.migrator import PgMigrator
from daemon.pg.store.postgres.pool import SCHEMA_NOT_MIGRATED, PgPool, transaction_if
from daemon.pg.store.postgres.rows import EPOCH, due_job, finishes_json, plans_json
from daemon.pg.store.queries.admin import SCHEMA_VERSION
from daemon.pg.store.queries.claim import CLAIM, CLAIM_PLAIN, OUTLOOK, SELECT_DUE
from daemon.pg.store.queries.runs import (
    DEPENDENCY_STATES,
    FINISH,
    HEARTBEAT,
    JOBS_PRESENT,
    MARK_STARTED,
    PRUNE,
    RELEASE,
)
from daemon.pg.store.scheduler_flags import read_flags


class PostgresStore:
    """What the Postgres runner asks of its store (``JobStore``), over the pool it owns.

    The ``jobs`` commands' side is ``admin``, ``runbroker migrate``'s is ``migrator``."""

    def __init__(self, dsn: str, *, max_size: int = 4, connect_timeout_s: float = 5.0) -> None:
        self._pool = PgPool(dsn, max_size=max_size, connect_timeout_s=connect_timeout_s)
        self.admin = PgAdminStore(self._pool)
        self.migrator = PgMigrator(self._pool)

    def __repr__(self) -> str:  # never show the DSN
        return f"{type(self).__name__}(<dsn hidden>)"

    async def close(self) -> None:
        """Close the pool, which the administration and the migrator share."""
        await self._pool.close()

    async def claim(
        self,
        owner: str,
        limit: int,
        lease_s: float,
        planner: Planner,
        *,
        misfire_grace_s: float = 0.0,
    ) -> list[Claimed]:
        """The plain case in one statement (``CLAIM_PLAIN``), and the planner's transaction only for
        the rows it left (retries, expired leases, missed occurrences, rows written by hand).

        Two commits: when the second fails, ``ClaimIncomplete`` carries the runs the first
        claimed."""
        if limit <= 0:
            return []
        async with self._pool.connection() as conn:
            rows = await conn.fetch(CLAIM_PLAIN, limit, owner, lease_s, misfire_grace_s)
        claimed = []
        for row in rows:
            if (run_id := row["run_id"]) is not None:
                job = due_job(row)
                claimed.append(Claimed(job, run_id, job.next_run_at, 1))
        if len(claimed) < len(rows):  # rows for the planner
            try:
                claimed += await self._claim_planned(owner, limit - len(claimed), lease_s, planner)
            except Exception as exc:  # the plain claims are committed: they must not be lost
                if not claimed:
                    raise
                raise ClaimIncomplete(claimed) from exc
        return claimed

    async def _claim_planned(
        self, owner: str, limit: int, lease_s: float, planner: Planner
    ) -> list[Claimed]:
        async with self._pool.connection() as conn, conn.transaction():
            rows = await conn.fetch(SELECT_DUE, limit)
            if not rows:
                return []
            now = EPOCH + timedelta(microseconds=rows[0]["db_now_us"])
            jobs = [due_job(row) for row in rows]
            plans = [planner(job, now) for job in jobs]
            inserted = await conn.fetch(CLAIM, plans_json(jobs, plans), owner, lease_s)
        run_ids = {row["job_id"]: row["run_id"] for row in inserted}
        claimed = []
        for job, plan in zip(jobs, plans, strict=True):
            if plan.run and job.id in run_ids and plan.scheduled_for is not None:
                claimed.append(Claimed(job, run_ids[job.id], plan.scheduled_for, plan.attempt))
        return claimed

    async def outlook(self) -> Outlook:
        async with self._pool.connection() as conn:
            row = await conn.fetchrow(OUTLOOK)
        due_in_s = row["due_in_s"]
        return Outlook(
            read_flags(row["paused"], row["enabled"], row["interval_s"]),
            None if due_in_s is None else float(due_in_s),
        )

    async def heartbeat(self, owner: str, job_ids: Sequence[int], lease_s: float) -> Renewal:
        """The leases renewed, and for the others (rare: a lease lost) which jobs are gone."""
        if not job_ids:
            return Renewal(set())
        async with self._pool.connection() as conn:
            rows = await conn.fetch(HEARTBEAT, list(job_ids), owner, lease_s)
            kept = {row["id"] for row in rows}
            missing = [job_id for job_id in job_ids if job_id not in kept]
            if not missing:
                return Renewal(kept)
            present = {row["id"] for row in await conn.fetch(JOBS_PRESENT, missing)}
        return Renewal(kept, set(missing) - present)

    async def write(self, owner: str, batch: WriteBatch) -> WriteOutcome:
        finishing = {f.run_id for f in batch.finishes}
        starts = [s for s in batch.starts if s.run_id not in finishing]
        written: set[int] = set()
        one_statement = not starts and not batch.releases  # FINISH alone needs no BEGIN
        async with self._pool.connection() as conn, transaction_if(conn, not one_statement):
            if starts:
                await conn.execute(
                    MARK_STARTED,
                    [s.run_id for s in starts],
                    [s.started_at for s in starts],
                    owner,
                )
            if batch.finishes:
                rows = await conn.fetch(FINISH, finishes_json(owner, batch.finishes))
                written.update(row["run_id"] for row in rows)
            if batch.releases:
                rows = await conn.fetch(
                    RELEASE,
                    [r.job_id for r in batch.releases],
                    [r.run_id for r in batch.releases],
                    owner,
                )
                written.update(row["run_id"] for row in rows)
        wanted = finishing | {r.run_id for r in batch.releases}
        return WriteOutcome(lost_run_ids=frozenset(wanted - written))

    async def scheduler_flags(self) -> SchedulerFlags:
        return (await self.outlook()).flags

    async def dependency_states(
        self, names: Sequence[str], scheduled_for: datetime
    ) -> dict[str, DependencyState]:
        async with self._pool.connection() as conn:
            rows = await conn.fetch(DEPENDENCY_STATES, list(names), scheduled_for)
        found = {
            row["name"]: DependencyState(True, row["pending"], row["last_status"]) for row in rows
        }
        missing = DependencyState(exists=False, pending=False, last_status=None)
        return {name: found.get(name, missing) for name in names}

    async def prune(self, retention_s: float, batch: int = 5000) -> int:
        total = 0
        while True:
            async with self._pool.connection() as conn:
                deleted = await conn.fetchval(PRUNE, retention_s, batch)
            total += int(deleted or 0)
            if not deleted or deleted < batch:
                return total

    async def listen(self, on_message: Callable[[str], None]) -> PgListening:
        return await start_listening(await self._pool.connect(), on_message)

    async def schema_problem(self) -> str | None:
        """Why the schema does not fit this runbroker (not migrated, or older than its newest
        migration), or None. A newer schema is fine: a newer replica has migrated it."""
        expected = latest_migration_version()
        async with self._pool.connection() as conn:
            try:
                version = await conn.fetchval(SCHEMA_VERSION)
            except asyncpg.exceptions.UndefinedTableError:
                version = None
        if version is None:
            return SCHEMA_NOT_MIGRATED
        if version < expected:
            return (
                f"schema version {version:04d} is older than this runbroker's {expected:04d}: "
                "run `runbroker migrate`"
            )
        return None
