"""PostgreSQL job store: the only module that imports asyncpg; every SQL statement is here.

A lazily connecting asyncpg pool serves the runner and the ``jobs`` commands; a dedicated
connection LISTENs. Connection trouble surfaces as ``StoreUnavailable`` (retry later), a
schema that was never migrated as ``StoreSchemaMissing``. The DSN is never logged or put in
an error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from daemon.pg.migrate import latest_migration_version
from daemon.pg.store.base import (
    NO_OCCURRENCE,
    Claimed,
    ClaimIncomplete,
    ClaimPlan,
    Dependency,
    DependencyState,
    DueJob,
    Finish,
    JobBusy,
    JobExists,
    JobInfo,
    JobInvalid,
    JobNotFound,
    NewJob,
    Outlook,
    Planner,
    RunInfo,
    SchedulerFlags,
    StoreSchemaMissing,
    StoreUnavailable,
    WriteBatch,
    WriteOutcome,
    flag_value,
    interval_value,
)

CHANNEL = "runbroker"
SCHEMA_NOT_MIGRATED = (
    "schema not migrated (the runbroker tables are missing): run `runbroker migrate`"
)
UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,  # admin shutdown, cannot connect now
    asyncpg.exceptions.InsufficientResourcesError,  # too many connections
    # Refused at connect time: the database is not created yet, or credentials are being
    # rotated. Both can heal without a restart, so they are outages, not crashes.
    asyncpg.exceptions.InvalidCatalogNameError,
    asyncpg.exceptions.InvalidAuthorizationSpecificationError,
)


def describe(exc: BaseException) -> str:
    """A short, DSN-free description of a connection error."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:200] if text else type(exc).__name__


UNREADABLE_JSON = "<unreadable JSON: nested too deeply>"


def _unreadable(exc: BaseException) -> str:
    """Why a JSON text from the database cannot be read (hand-written rows can hold anything
    jsonb takes: it nests far deeper than Python's decoder can follow)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply to be read"
    return f"not readable: {str(exc)[:120]}"


def _json_or_marker(text: str) -> Any:
    """The json/jsonb decoder of the ``jobs`` commands: a value that cannot be read becomes a
    marker, so listing jobs or runs never fails on one row."""
    try:
        return json.loads(text)
    except (RecursionError, ValueError):
        return UNREADABLE_JSON


async def _init_connection(conn: asyncpg.Connection) -> None:
    for name in ("json", "jsonb"):
        await conn.set_type_codec(
            name, encoder=json.dumps, decoder=_json_or_marker, schema="pg_catalog"
        )


async def _keep_session(_conn: asyncpg.Connection) -> None:
    """The pool's reset: nothing to undo. The store never changes session state (no SET, no
    LISTEN on pooled connections, the migration lock is released in ``finally``); asyncpg
    still rolls back an open transaction. Saves asyncpg's reset query: a round trip per use."""


def _transaction(
    conn: asyncpg.Connection, needed: bool
) -> contextlib.AbstractAsyncContextManager[Any]:
    return conn.transaction() if needed else contextlib.nullcontext()


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _us(t: datetime | None) -> int | None:
    """An aware datetime as integer microseconds since the epoch: exact, and a plain JSON
    number (the SQL side turns it back with ``US_TIME``)."""
    return None if t is None else (t - _EPOCH) // _MICROSECOND


def _from_us(us: int | None) -> datetime | None:
    """The inverse of ``_us`` (the due query sends its times so: cheaper to decode)."""
    return None if us is None else _EPOCH + timedelta(microseconds=us)


def _plans_json(jobs: Sequence[DueJob], plans: Sequence[ClaimPlan]) -> str:
    """A claim's plans as one JSON array of arrays (see CLAIM)."""
    return json.dumps(
        [
            (
                j.id,
                p.run,
                _us(p.scheduled_for),
                p.attempt,
                _us(p.next_run_at),
                p.enabled,
                p.last_status,
                p.last_error,
                j.current_run_id if p.abandon_error else None,
                p.abandon_error,
            )
            for j, p in zip(jobs, plans, strict=True)
        ],
        separators=(",", ":"),
    )


def _finishes_json(owner: str, finishes: Sequence[Finish]) -> str:
    """A batch of finishes as one JSON array of arrays (see FINISH). One ``json.dumps`` costs
    a fraction of what asyncpg spends encoding twelve typed arrays (timestamps above all)."""
    return json.dumps(
        [
            (
                f.job_id,
                f.run_id,
                f.status,
                _us(f.started_at),
                _us(f.finished_at),
                f.output,
                f.error,
                _us(f.next_run_at),
                f.retry_in_s,
                _us(f.scheduled_for),
                f.attempt,
                owner,
                "infinity" if f.following_run_at is NO_OCCURRENCE else _us(f.following_run_at),
            )
            for f in finishes
        ],
        separators=(",", ":"),
    )


def _due_job(row: asyncpg.Record) -> DueJob:
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
        next_run_at=_EPOCH + timedelta(microseconds=row["next_run_us"]),
        scheduled_for=_from_us(row["scheduled_for_us"]),
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
    """The ``depends_on`` column; entries that are not {"job": str, ...} are ignored."""
    deps: list[Dependency] = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict) and isinstance(item.get("job"), str):
            deps.append(Dependency(item["job"], "skip" if item.get("policy") == "skip" else "stop"))
        elif isinstance(item, str):
            deps.append(Dependency(item))
    return tuple(deps)


class _Listening:
    """A LISTEN on its own connection; ``lost`` once the connection closes."""

    def __init__(self, conn: asyncpg.Connection, on_message: Callable[[str], None]) -> None:
        self._conn = conn
        self._on_message = on_message
        self._lost = asyncio.Event()

    def _notified(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        self._on_message(payload)

    def _terminated(self, _conn: object) -> None:
        self._lost.set()

    async def start(self) -> None:
        self._conn.add_termination_listener(self._terminated)
        await self._conn.add_listener(CHANNEL, self._notified)

    @property
    def lost(self) -> bool:
        return self._lost.is_set() or self._conn.is_closed()

    async def wait_lost(self) -> None:
        await self._lost.wait()

    async def ping(self) -> None:
        try:
            await self._conn.fetchval("SELECT 1", timeout=5.0)
        except UNAVAILABLE as exc:
            self._lost.set()
            raise StoreUnavailable(describe(exc)) from None

    async def close(self) -> None:
        self._lost.set()
        with contextlib.suppress(*UNAVAILABLE):
            await asyncio.wait_for(self._conn.close(), timeout=2.0)
        if not self._conn.is_closed():
            self._conn.terminate()


class PostgresStore:
    """``JobStore`` on PostgreSQL, plus the administration the ``jobs`` commands need."""

    def __init__(
        self,
        dsn: str,
        *,
        max_size: int = 4,
        command_timeout_s: float = 15.0,
        connect_timeout_s: float = 5.0,
        application_name: str = "runbroker",
    ) -> None:
        self._dsn = dsn
        self._server_settings = {"application_name": application_name}
        self._max_size = max_size
        self._command_timeout_s = command_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._pool: asyncpg.Pool | None = None

    def __repr__(self) -> str:  # never show the DSN
        return "PostgresStore(<dsn hidden>)"

    async def _get_pool(self) -> asyncpg.Pool:
        if self._pool is None:
            self._pool = await asyncpg.create_pool(
                self._dsn,
                min_size=0,
                max_size=self._max_size,
                init=_init_connection,
                reset=_keep_session,
                command_timeout=self._command_timeout_s,
                timeout=self._connect_timeout_s,
                server_settings=self._server_settings,
            )
        return self._pool

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection; maps driver errors onto the store's exceptions."""
        try:
            pool = await self._get_pool()
            async with pool.acquire(timeout=self._connect_timeout_s) as conn:
                yield conn
        except asyncpg.exceptions.UndefinedTableError:
            raise StoreSchemaMissing(SCHEMA_NOT_MIGRATED) from None
        except UNAVAILABLE as exc:
            raise StoreUnavailable(describe(exc)) from None

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), timeout=2.0)
            except Exception:  # a pool that will not close cleanly is cut off
                pool.terminate()

    # -- the runner's port ------------------------------------------------------------------
    async def claim(
        self,
        owner: str,
        limit: int,
        lease_s: float,
        planner: Planner,
        *,
        misfire_grace_s: float = 0.0,
    ) -> list[Claimed]:
        """The plain case in one statement (CLAIM_PLAIN); the planner's transaction only for
        the due rows that statement left (retries, expired leases, missed occurrences, rows
        written by hand). Two commits: when the second fails, ``ClaimIncomplete`` carries the
        runs the first one claimed."""
        if limit <= 0:
            return []
        async with self.connection() as conn:
            rows = await conn.fetch(CLAIM_PLAIN, limit, owner, lease_s, misfire_grace_s)
        claimed = []
        for row in rows:
            if (run_id := row["run_id"]) is not None:
                job = _due_job(row)
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
        async with self.connection() as conn, conn.transaction():
            rows = await conn.fetch(SELECT_DUE, limit)
            if not rows:
                return []
            now = _EPOCH + timedelta(microseconds=rows[0]["db_now_us"])
            jobs = [_due_job(row) for row in rows]
            plans = [planner(job, now) for job in jobs]
            inserted = await conn.fetch(CLAIM, _plans_json(jobs, plans), owner, lease_s)
        run_ids = {row["job_id"]: row["run_id"] for row in inserted}
        claimed = []
        for job, plan in zip(jobs, plans, strict=True):
            if plan.run and job.id in run_ids and plan.scheduled_for is not None:
                claimed.append(Claimed(job, run_ids[job.id], plan.scheduled_for, plan.attempt))
        return claimed

    async def outlook(self) -> Outlook:
        async with self.connection() as conn:
            row = await conn.fetchrow(OUTLOOK)
        due_in_s = row["due_in_s"]
        return Outlook(
            SchedulerFlags(
                paused=flag_value(row["paused"], False),
                enabled=flag_value(row["enabled"], True),
                interval_s=interval_value(row["interval_s"]),
            ),
            None if due_in_s is None else float(due_in_s),
        )

    async def heartbeat(self, owner: str, job_ids: Sequence[int], lease_s: float) -> set[int]:
        if not job_ids:
            return set()
        async with self.connection() as conn:
            rows = await conn.fetch(HEARTBEAT, list(job_ids), owner, lease_s)
        return {row["id"] for row in rows}

    async def write(self, owner: str, batch: WriteBatch) -> WriteOutcome:
        finishing = {f.run_id for f in batch.finishes}
        starts = [s for s in batch.starts if s.run_id not in finishing]
        written: set[int] = set()
        one_statement = not starts and not batch.releases  # FINISH alone needs no BEGIN
        async with self.connection() as conn, _transaction(conn, not one_statement):
            if starts:
                await conn.execute(
                    MARK_STARTED,
                    [s.run_id for s in starts],
                    [s.started_at for s in starts],
                    owner,
                )
            if batch.finishes:
                rows = await conn.fetch(FINISH, _finishes_json(owner, batch.finishes))
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
        async with self.connection() as conn:
            rows = await conn.fetch(DEPENDENCY_STATES, list(names), scheduled_for)
        found = {
            row["name"]: DependencyState(True, row["pending"], row["last_status"]) for row in rows
        }
        missing = DependencyState(exists=False, pending=False, last_status=None)
        return {name: found.get(name, missing) for name in names}

    async def prune(self, retention_s: float, batch: int = 5000) -> int:
        total = 0
        while True:
            async with self.connection() as conn:
                deleted = await conn.fetchval(PRUNE, retention_s, batch)
            total += int(deleted or 0)
            if not deleted or deleted < batch:
                return total

    async def listen(self, on_message: Callable[[str], None]) -> _Listening:
        try:
            conn = await asyncpg.connect(
                self._dsn, timeout=self._connect_timeout_s, server_settings=self._server_settings
            )
        except UNAVAILABLE as exc:
            raise StoreUnavailable(describe(exc)) from None
        listening = _Listening(conn, on_message)
        try:
            await listening.start()
        except UNAVAILABLE as exc:
            await listening.close()
            raise StoreUnavailable(describe(exc)) from None
        return listening

    # -- administration (``runbroker migrate`` and ``runbroker jobs``) -----------------------
    async def migrate(self, migrations: Sequence[tuple[int, str, str, str]]) -> list[str]:
        """Apply the (version, name, checksum, sql) not yet applied, under an advisory lock."""
        applied: list[str] = []
        async with self.connection() as conn:
            await conn.execute(LOCK_MIGRATIONS)
            try:
                await conn.execute(CREATE_MIGRATIONS_TABLE)
                done = {row["version"] for row in await conn.fetch(APPLIED_MIGRATIONS)}
                for version, name, checksum, sql in migrations:
                    if version in done:
                        continue
                    async with conn.transaction():
                        await conn.execute(sql)
                        await conn.execute(RECORD_MIGRATION, version, name, checksum)
                    applied.append(name)
            finally:
                await conn.execute(UNLOCK_MIGRATIONS)
                # The pool does not reset sessions (_keep_session): undo whatever session state
                # a migration's SQL may have set before the connection serves the runner.
                await conn.reset()
        return applied

    async def schema_problem(self) -> str | None:
        """Why the schema does not fit this runbroker (not migrated, or older than its newest
        migration), or None. A newer schema is fine: a newer replica has migrated it."""
        expected = latest_migration_version()
        async with self.connection() as conn:
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

    async def db_now(self) -> datetime:
        async with self.connection() as conn:
            now: datetime = await conn.fetchval("SELECT now()")
        return now

    async def add_job(self, job: NewJob) -> JobInfo:
        deps = [{"job": d.job, "policy": d.policy} for d in job.depends_on]
        try:
            async with self.connection() as conn, conn.transaction():
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
        return _job_info(row)

    async def list_jobs(self) -> list[JobInfo]:
        async with self.connection() as conn:
            rows = await conn.fetch(LIST_JOBS)
        return [_job_info(row) for row in rows]

    async def remove_job(self, name: str) -> None:
        async with self.connection() as conn:
            if await conn.fetchval(DELETE_JOB, name) is None:
                raise JobNotFound(f"no job named {name!r}")

    async def set_enabled(self, name: str, enabled: bool) -> JobInfo:
        async with self.connection() as conn:
            row = await conn.fetchrow(SET_ENABLED, name, enabled)
        if row is None:
            raise JobNotFound(f"no job named {name!r}")
        return _job_info(row)

    async def run_now(self, name: str) -> JobInfo:
        """Make the job due now and wake every replica; refused while it runs or is disabled."""
        async with self.connection() as conn, conn.transaction():
            row = await conn.fetchrow(LOCK_JOB, name)
            if row is None:
                raise JobNotFound(f"no job named {name!r}")
            if row["lease_owner"] is not None:
                raise JobBusy(f"job {name!r} is running now; run-now again when it has finished")
            if not row["enabled"]:
                raise JobBusy(f"job {name!r} is disabled; enable it first")
            updated = await conn.fetchrow(RUN_NOW, row["id"])
            await conn.execute("SELECT pg_notify($1, 'run-now')", CHANNEL)
        return _job_info(updated)

    async def history(self, name: str | None, limit: int) -> list[RunInfo]:
        async with self.connection() as conn:
            if name is not None and await conn.fetchval(JOB_ID, name) is None:
                raise JobNotFound(f"no job named {name!r}")
            rows = await conn.fetch(HISTORY, name, limit)
        return [RunInfo(**dict(row)) for row in rows]


def _job_info(row: asyncpg.Record) -> JobInfo:
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


# == SQL ====================================================================================
# The runner's claim. The due condition and ORDER BY match scheduled_jobs_due_idx (partial on
# enabled, on next_run_at), so it is an index range scan whatever the table's size. An expired
# lease is due like an occurrence: a leased row keeps its occurrence (<= now) in next_run_at,
# and the lease filter skips only the runs in flight now (migration 0003).

# The times are clamped to the years 1-9999 Python's datetime holds: a row written by hand
# with '-infinity', 'infinity' or a date BC must not fail the claim of every row in its batch.
_DUE_COLUMNS = """
    id, name, task_type, payload::text AS payload, schedule, time_zone,
    (extract(epoch FROM greatest(next_run_at, timestamptz '0001-01-01 00:00:00+00'))
     * 1000000)::int8 AS next_run_us,
    (extract(epoch FROM CASE WHEN scheduled_for IS NOT NULL THEN least(greatest(
        scheduled_for, timestamptz '0001-01-01 00:00:00+00'), timestamptz '9999-12-31 00:00:00+00')
     END) * 1000000)::int8 AS scheduled_for_us, attempt,
    max_attempts, misfire, nullif(depends_on, '[]'::jsonb)::text AS depends_on,
    needs_schedule, lease_owner, current_run_id"""

_DUE_ROWS = """
FROM scheduled_jobs
WHERE enabled AND next_run_at <= now()
  AND (lease_expires_at IS NULL OR lease_expires_at <= now())
  AND NOT EXISTS (
    SELECT 1 FROM runbroker_settings
    WHERE (key = 'scheduler.paused' AND lower(value #>> '{}') IN ('true', '1', 'yes', 'on'))
       OR (key = 'scheduler.enabled' AND lower(value #>> '{}') IN ('false', '0', 'no', 'off')))
ORDER BY next_run_at
LIMIT $1
FOR UPDATE SKIP LOCKED"""

# The planner's path: lock the due rows, plan each in Python, then CLAIM, in one transaction.
# (S608: the statements are built from the constant fragments above, never from input.)
SELECT_DUE = f"""
SELECT {_DUE_COLUMNS},
       (extract(epoch FROM now()) * 1000000)::int8 AS db_now_us
{_DUE_ROWS}
"""  # noqa: S608

# The plain case in one statement: a fresh occurrence (no retry, no expired lease, no schedule
# to recompute) with none missed since (following_run_at, migration 0004, is after now) and,
# for misfire = skip, not later than the grace ($4 s). ``plan_claim`` decides exactly this so:
# a run for (next_run_at, attempt 1), the job leased, nothing else changed. Every due row it
# locked comes back; those without a run_id are left to the planner's path.
CLAIM_PLAIN = f"""
WITH due AS MATERIALIZED (
    SELECT {_DUE_COLUMNS}, next_run_at,
           lease_owner IS NULL AND NOT needs_schedule AND scheduled_for IS NULL
             AND following_run_at > now()
             AND (misfire = 'coalesce' OR next_run_at >= now() - $4 * interval '1 second')
             AS plain
    {_DUE_ROWS}
), runs AS (
    INSERT INTO job_runs (id, job_id, scheduled_for, attempt, status, owner)
    SELECT nextval('job_runs_id_seq'::regclass), id, next_run_at, 1, 'queued', $2
    FROM due WHERE plain
    RETURNING id, job_id
), jobs AS (
    UPDATE scheduled_jobs s SET
        lease_owner = $2, lease_expires_at = now() + $3 * interval '1 second',
        current_run_id = runs.id, scheduled_for = s.next_run_at, attempt = 1,
        updated_at = now()
    FROM runs
    WHERE s.id = ANY(ARRAY(SELECT job_id FROM runs)) AND s.id = runs.job_id
)
SELECT due.*, runs.id AS run_id FROM due LEFT JOIN runs ON runs.job_id = due.id
"""  # noqa: S608

# A claim's plans are applied in the claim's transaction, in one statement: abandon the expired
# runs, insert the new run rows (their ids drawn up front, so the jobs' update needs no join
# with the inserted rows), then lease or reschedule the jobs. The plans come as one JSON
# array of arrays (``_plans_json``, times in microseconds since the epoch): asyncpg encodes a
# JSON text far more cheaply than ten typed arrays. The jobs are fetched by primary key
# (``s.id = ANY(ARRAY(...))``), so the plan stays linear in the batch (see FINISH).
CLAIM = """
WITH p AS MATERIALIZED (
    SELECT (e->>0)::bigint AS job_id, (e->>1)::bool AS run,
           timestamptz 'epoch' + (e->>2)::bigint * interval '1 microsecond' AS scheduled_for,
           (e->>3)::int AS attempt,
           timestamptz 'epoch' + (e->>4)::bigint * interval '1 microsecond' AS next_run_at,
           (e->>5)::bool AS enabled, e->>6 AS last_status, e->>7 AS last_error,
           (e->>8)::bigint AS abandon_run_id, e->>9 AS abandon_error,
           CASE WHEN (e->>1)::bool THEN nextval('job_runs_id_seq'::regclass) END AS run_id
    FROM jsonb_array_elements($1::text::jsonb) AS e
), abandoned AS (
    UPDATE job_runs r SET status = 'abandoned', finished_at = now(), error = p.abandon_error
    FROM p
    WHERE r.id = ANY(ARRAY(SELECT abandon_run_id FROM p WHERE abandon_error IS NOT NULL))
      AND r.id = p.abandon_run_id AND p.abandon_error IS NOT NULL
      AND r.status IN ('queued', 'running')
), runs AS (
    INSERT INTO job_runs (id, job_id, scheduled_for, attempt, status, owner)
    SELECT p.run_id, p.job_id, p.scheduled_for, p.attempt, 'queued', $2 FROM p WHERE p.run
    RETURNING id, job_id
), jobs AS (
    UPDATE scheduled_jobs s SET
        lease_owner = CASE WHEN p.run THEN $2 END,
        lease_expires_at = CASE WHEN p.run THEN now() + $3 * interval '1 second' END,
        current_run_id = p.run_id,
        scheduled_for = p.scheduled_for,
        attempt = p.attempt,
        next_run_at = CASE WHEN p.run THEN s.next_run_at ELSE p.next_run_at END,
        following_run_at = CASE WHEN p.run THEN s.following_run_at END,
        needs_schedule = p.run AND s.needs_schedule,
        enabled = p.enabled,
        last_status = coalesce(p.last_status, s.last_status),
        last_error = CASE WHEN p.run THEN s.last_error ELSE p.last_error END,
        updated_at = now()
    FROM p
    WHERE s.id = ANY(ARRAY(SELECT job_id FROM p)) AND s.id = p.job_id
)
SELECT job_id, id AS run_id FROM runs
"""

# The claim loop's one look per wake-up: the flags, and how soon the earliest job is due: the
# first unleased next_run_at (in scheduled_jobs_due_idx order, past the runs in flight) or the
# earliest lease expiry. Leased rows have next_run_at <= now, so the second is a range scan of
# what is due now. It is evaluated only while claiming (not paused, not disabled), and the claim
# loop looks only after a claim that was not full: what is due now is then hardly more than the
# runs in flight.
OUTLOOK = """
SELECT
    (SELECT value FROM runbroker_settings WHERE key = 'scheduler.paused') AS paused,
    (SELECT value FROM runbroker_settings WHERE key = 'scheduler.enabled') AS enabled,
    (SELECT value FROM runbroker_settings WHERE key = 'scheduler.interval_seconds') AS interval_s,
    CASE WHEN NOT EXISTS (
        SELECT 1 FROM runbroker_settings
        WHERE (key = 'scheduler.paused' AND lower(value #>> '{}') IN ('true', '1', 'yes', 'on'))
           OR (key = 'scheduler.enabled' AND lower(value #>> '{}') IN ('false', '0', 'no', 'off')))
    THEN extract(epoch FROM least(
        (SELECT next_run_at FROM scheduled_jobs
         WHERE enabled AND next_run_at IS NOT NULL AND lease_owner IS NULL
         ORDER BY next_run_at LIMIT 1),
        (SELECT min(lease_expires_at) FROM scheduled_jobs
         WHERE enabled AND next_run_at <= now() AND lease_owner IS NOT NULL)) - now())::float8
    END AS due_in_s
"""

HEARTBEAT = """
UPDATE scheduled_jobs SET lease_expires_at = now() + $3 * interval '1 second'
WHERE id = ANY($1::bigint[]) AND lease_owner = $2
RETURNING id
"""

MARK_STARTED = """
UPDATE job_runs r SET status = 'running', started_at = x.started_at
FROM unnest($1::bigint[], $2::timestamptz[]) AS x(id, started_at)
WHERE r.id = ANY($1::bigint[]) AND r.id = x.id AND r.status = 'queued' AND r.owner = $3
"""

# A finish is written only while the job is still leased by us for this very run; a schedule
# edited by hand meanwhile (needs_schedule) is recomputed by the next claim. It notifies when
# it released any job (the row trigger leaves finishes to it, migration 0004; a data-modifying
# CTE runs to the end, so its RETURNING is evaluated for every row): a released lease lets
# dependants go on, and every replica's timer learns the new next_run_at. The batch
# comes as one JSON array of arrays (``_finishes_json``), times as integer microseconds since
# the epoch.
# The plan must stay linear in the batch whatever the statistics say: the batch is
# materialized once, its rows fetch the jobs by primary key, and the owner comes in as a
# column of each element (one value repeated) so that it is a join condition, not a scan
# filter whose estimate (the owner is rarely in the statistics: "1 row") once made the planner
# rescan the batch for every row (10-20 ms per 100 finishes instead of 2-3 ms).
FINISH = """
WITH f AS MATERIALIZED (
    SELECT (e->>0)::bigint AS job_id, (e->>1)::bigint AS run_id, e->>2 AS status,
           timestamptz 'epoch' + (e->>3)::bigint * interval '1 microsecond' AS started_at,
           timestamptz 'epoch' + (e->>4)::bigint * interval '1 microsecond' AS finished_at,
           e->5 AS output, e->>6 AS error,
           timestamptz 'epoch' + (e->>7)::bigint * interval '1 microsecond' AS next_run_at,
           (e->>8)::float8 AS retry_in_s,
           timestamptz 'epoch' + (e->>9)::bigint * interval '1 microsecond' AS scheduled_for,
           (e->>10)::int AS attempt, e->>11 AS owner,
           CASE e->>12 WHEN 'infinity' THEN timestamptz 'infinity'
               ELSE timestamptz 'epoch' + (e->>12)::bigint * interval '1 microsecond'
           END AS following_run_at
    FROM jsonb_array_elements($1::text::jsonb) AS e
), jobs AS (
    UPDATE scheduled_jobs s SET
        lease_owner = NULL, lease_expires_at = NULL, current_run_id = NULL,
        next_run_at = CASE
            WHEN s.needs_schedule THEN now()
            WHEN f.retry_in_s IS NOT NULL THEN now() + f.retry_in_s * interval '1 second'
            ELSE f.next_run_at END,
        following_run_at = CASE
            WHEN s.needs_schedule OR f.retry_in_s IS NOT NULL THEN NULL
            ELSE f.following_run_at END,
        scheduled_for = CASE WHEN s.needs_schedule THEN NULL ELSE f.scheduled_for END,
        attempt = CASE WHEN s.needs_schedule THEN 0 ELSE f.attempt END,
        last_run_at = f.finished_at, last_status = f.status, last_error = f.error,
        updated_at = now()
    FROM f
    WHERE s.id = ANY(ARRAY(SELECT job_id FROM f)) AND s.id = f.job_id
      AND s.current_run_id = f.run_id AND s.lease_owner = f.owner
    RETURNING f.run_id, f.status, f.started_at, f.finished_at, f.output, f.error,
        pg_notify('runbroker', 'jobs')  -- once per transaction, however many rows call it
), runs AS (
    UPDATE job_runs r SET
        status = jobs.status, started_at = coalesce(r.started_at, jobs.started_at),
        finished_at = jobs.finished_at, output = nullif(jobs.output, 'null'::jsonb),
        error = jobs.error
    FROM jobs
    WHERE r.id = jobs.run_id
    RETURNING r.id
)
SELECT id AS run_id FROM runs
"""

# A claimed run that never started: the job goes back as it was before the claim.
RELEASE = """
WITH x AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS x(job_id, run_id)
), jobs AS (
    UPDATE scheduled_jobs s SET
        lease_owner = NULL, lease_expires_at = NULL, current_run_id = NULL,
        attempt = greatest(s.attempt - 1, 0),
        scheduled_for = CASE WHEN s.attempt <= 1 THEN NULL ELSE s.scheduled_for END,
        next_run_at = CASE WHEN s.needs_schedule THEN now() ELSE s.next_run_at END,
        updated_at = now()
    FROM x
    WHERE s.id = ANY($1::bigint[]) AND s.id = x.job_id AND s.current_run_id = x.run_id
      AND s.lease_owner IS NOT DISTINCT FROM $3
    RETURNING x.run_id
)
DELETE FROM job_runs r USING jobs WHERE r.id = ANY($2::bigint[]) AND r.id = jobs.run_id
RETURNING r.id AS run_id
"""


# pending: a run in flight, a retry, or an occurrence due at or before the dependant's.
DEPENDENCY_STATES = """
SELECT name, last_status,
       (lease_owner IS NOT NULL
        OR (scheduled_for IS NOT NULL AND scheduled_for <= $2)
        OR (enabled AND next_run_at <= $2)) AS pending
FROM scheduled_jobs WHERE name = ANY($1::text[])
"""

PRUNE = """
WITH old AS (
    SELECT id FROM job_runs
    WHERE claimed_at < now() - $1 * interval '1 second'
      AND finished_at < now() - $1 * interval '1 second'
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM job_runs r USING old WHERE r.id = old.id RETURNING 1
)
SELECT count(*) FROM gone
"""

# -- migrations -------------------------------------------------------------------------------
LOCK_MIGRATIONS = "SELECT pg_advisory_lock(hashtext('runbroker.migrate'))"
UNLOCK_MIGRATIONS = "SELECT pg_advisory_unlock(hashtext('runbroker.migrate'))"
CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS runbroker_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
SCHEMA_VERSION = "SELECT max(version) FROM runbroker_migrations"
APPLIED_MIGRATIONS = "SELECT version, name, checksum FROM runbroker_migrations ORDER BY version"
RECORD_MIGRATION = "INSERT INTO runbroker_migrations (version, name, checksum) VALUES ($1, $2, $3)"

# -- jobs commands ----------------------------------------------------------------------------

INSERT_JOB = """
INSERT INTO scheduled_jobs (name, task_type, payload, schedule, time_zone, enabled, next_run_at,
                            max_attempts, misfire, depends_on, following_run_at)
VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7, $8, $9, $10::jsonb, $11)
RETURNING id, name, task_type, payload, schedule, time_zone, enabled, next_run_at,
    scheduled_for, attempt, max_attempts, misfire, depends_on, lease_owner, lease_expires_at,
    last_run_at, last_status, last_error
"""
LOCK_JOB_NAMES = "SELECT name FROM scheduled_jobs WHERE name = ANY($1::text[]) FOR KEY SHARE"
LIST_JOBS = """
SELECT id, name, task_type, payload, schedule, time_zone, enabled, next_run_at,
    scheduled_for, attempt, max_attempts, misfire, depends_on, lease_owner, lease_expires_at,
    last_run_at, last_status, last_error FROM scheduled_jobs ORDER BY name
"""
DELETE_JOB = "DELETE FROM scheduled_jobs WHERE name = $1 RETURNING id"
SET_ENABLED = """
UPDATE scheduled_jobs SET enabled = $2, updated_at = now() WHERE name = $1
RETURNING id, name, task_type, payload, schedule, time_zone, enabled, next_run_at,
    scheduled_for, attempt, max_attempts, misfire, depends_on, lease_owner, lease_expires_at,
    last_run_at, last_status, last_error
"""
LOCK_JOB = "SELECT id, enabled, lease_owner FROM scheduled_jobs WHERE name = $1 FOR UPDATE"
RUN_NOW = """
UPDATE scheduled_jobs SET next_run_at = now(), updated_at = now() WHERE id = $1
RETURNING id, name, task_type, payload, schedule, time_zone, enabled, next_run_at,
    scheduled_for, attempt, max_attempts, misfire, depends_on, lease_owner, lease_expires_at,
    last_run_at, last_status, last_error
"""
JOB_ID = "SELECT id FROM scheduled_jobs WHERE name = $1"
HISTORY = """
SELECT r.id, j.name AS job, r.scheduled_for, r.attempt, r.status, r.owner, r.claimed_at,
       r.started_at, r.finished_at, r.error, r.output
FROM job_runs r JOIN scheduled_jobs j ON j.id = r.job_id
WHERE $1::text IS NULL OR j.name = $1
ORDER BY r.id DESC
LIMIT $2
"""
