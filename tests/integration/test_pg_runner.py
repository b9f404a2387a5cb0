"""PgRunner on a real PostgreSQL, with a fake executor: wake-ups, replicas, crashes, outages."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import asyncpg
import pytest

from daemon.core.runqueue import Run, RunQueue, RunResult
from daemon.pg.runner import PgRunner
from daemon.pg.store.base import Dependency
from daemon.pg.store.postgres import PostgresStore
from tests.integration.conftest import CountingStore
from tests.integration.jobrows import add, add_apart
from tests.support.eventually import eventually_async
from tests.support.pgfakes import FakeExecutor, fail, make_settings, running


async def test_notify_wakes_an_idle_runner_at_once(db_dsn: str, sql: asyncpg.Connection) -> None:
    async with running(PostgresStore(db_dsn), poll_interval_s=3600.0) as h:
        await eventually_async(lambda: h.runner.listening, "the runner to listen")
        await add_apart(db_dsn, "now")
        t0 = time.monotonic()
        await eventually_async(
            lambda: sql.fetchval("SELECT last_status = 'succeeded' FROM scheduled_jobs"),
            "the job to succeed",
            timeout_s=5.0,
        )
        assert time.monotonic() - t0 < 2.0  # the fallback poll is an hour away


async def test_timer_fires_at_the_earliest_next_run(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "soon", delay_s=0.5)
    async with running(store, poll_interval_s=3600.0):
        await eventually_async(
            lambda: sql.fetchval("SELECT last_status = 'succeeded' FROM scheduled_jobs"),
            "the job to succeed",
            timeout_s=5.0,
        )
    lag = await sql.fetchval("SELECT extract(epoch FROM started_at - scheduled_for) FROM job_runs")
    assert 0 <= lag < 0.5


async def test_three_replicas_run_every_occurrence_exactly_once(
    db_dsn: str, sql: asyncpg.Connection
) -> None:
    await add_apart(db_dsn, *(f"j{i:03d}" for i in range(150)))
    async with (
        running(PostgresStore(db_dsn), owner="r1", batch_size=5),
        running(PostgresStore(db_dsn), owner="r2", batch_size=5),
        running(PostgresStore(db_dsn), owner="r3", batch_size=5),
    ):
        await eventually_async(
            lambda: sql.fetchval(
                "SELECT count(*) = 150 FROM scheduled_jobs WHERE last_status = 'succeeded'"
            ),
            "all 150 jobs to succeed",
        )
    runs = await sql.fetch("SELECT job_id, status, owner FROM job_runs")
    assert len(runs) == 150
    assert len({r["job_id"] for r in runs}) == 150
    assert {r["status"] for r in runs} == {"succeeded"}
    assert len({r["owner"] for r in runs}) >= 2  # the work was shared


async def test_a_crashed_replicas_run_is_abandoned_and_retried_elsewhere(
    db_dsn: str, store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "crashy")
    never = asyncio.Event()
    crashed = asyncio.create_task(_run_until_cancelled(PostgresStore(db_dsn), never, lease_s=1.0))
    try:
        await eventually_async(
            lambda: sql.fetchval("SELECT count(*) = 1 FROM job_runs"), "the run to be claimed"
        )
    finally:
        crashed.cancel()  # the replica dies: no release, no finish
        await asyncio.gather(crashed, return_exceptions=True)
    t0 = time.monotonic()
    async with running(store, owner="survivor", lease_s=1.0):
        await eventually_async(
            lambda: sql.fetchval("SELECT last_status = 'succeeded' FROM scheduled_jobs"),
            "the job to succeed",
        )
    assert time.monotonic() - t0 < 5.0
    runs = await sql.fetch("SELECT attempt, status, owner FROM job_runs ORDER BY attempt")
    assert [(r["attempt"], r["status"], r["owner"]) for r in runs] == [
        (1, "abandoned", "doomed"),
        (2, "succeeded", "survivor"),
    ]


async def _run_until_cancelled(store: PostgresStore, gate: asyncio.Event, **kw: object) -> None:
    """A replica whose job hangs until the task is cancelled: then it just dies, like SIGKILL
    (no release, no finish, no graceful stop of the executor)."""
    config = make_settings(**kw)
    queue = RunQueue(config.queue_capacity)
    executor = FakeExecutor(queue, release_gate=gate)
    runner = PgRunner(
        store=store, queue=queue, settings=config, known_tasks={"default"}, owner="doomed"
    )
    async with asyncio.TaskGroup() as group:
        group.create_task(executor.run_forever())
        group.create_task(runner.run(asyncio.Event()))


async def test_lost_connections_are_retried_and_the_result_recorded(
    db_dsn: str, store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "during")
    gate = asyncio.Event()
    async with running(store, gate=gate, poll_interval_s=3600.0) as h:
        await eventually_async(lambda: len(h.executor.started) == 1, "the run to start")
        killed = await sql.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = 'runbroker'"
        )
        assert killed >= 1
        gate.set()
        await eventually_async(
            lambda: sql.fetchval("SELECT last_status = 'succeeded' FROM scheduled_jobs"),
            "the job to succeed",
        )
        # LISTEN is back too: a new job wakes the runner although the poll is an hour away.
        await add_apart(db_dsn, "after")
        await eventually_async(
            lambda: sql.fetchval(
                "SELECT last_status = 'succeeded' FROM scheduled_jobs WHERE name = 'after'"
            ),
            "the job added after the outage to succeed",
            timeout_s=PING_TIMEOUT_S,
        )


PING_TIMEOUT_S = 15.0  # the listener notices a dead connection within its 10 s ping


async def test_paused_setting_stops_claims_until_cleared(
    db_dsn: str, sql: asyncpg.Connection
) -> None:
    await sql.execute("UPDATE runbroker_settings SET value = 'true' WHERE key = 'scheduler.paused'")
    store = CountingStore(db_dsn)
    async with running(store, poll_interval_s=3600.0) as h:
        await eventually_async(lambda: h.runner.listening, "the runner to listen")
        await add(store, "held")
        turns = store.turns
        await sql.execute("SELECT pg_notify('runbroker', 'jobs')")  # sent after the insert
        await eventually_async(lambda: store.turns > turns, "the runner to look again")
        assert await sql.fetchval("SELECT count(*) FROM job_runs") == 0
        await sql.execute(
            "UPDATE runbroker_settings SET value = 'false' WHERE key = 'scheduler.paused'"
        )
        await eventually_async(
            lambda: sql.fetchval("SELECT last_status = 'succeeded' FROM scheduled_jobs"),
            "the job to succeed",
            timeout_s=5.0,
        )


async def test_dependency_chain_with_both_policies(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "extract", task="bad", max_attempts=1)
    await add(store, "load", depends_on=(Dependency("extract"),))
    await add(store, "report", depends_on=(Dependency("extract", "skip"),))
    await add(store, "cleanup", depends_on=(Dependency("report"),))
    async with running(store, handlers={"bad": fail}) as h:
        await eventually_async(
            lambda: sql.fetchval(
                "SELECT bool_and(last_status IS NOT NULL AND lease_owner IS NULL) "
                "FROM scheduled_jobs"
            ),
            "every job to be decided and released",
        )
    rows = {
        r["name"]: (r["last_status"], r["last_error"])
        for r in await sql.fetch("SELECT name, last_status, last_error FROM scheduled_jobs")
    }
    assert rows == {
        "extract": ("failed", "exit status 3"),
        "load": ("failed", "dependency extract failed"),
        "report": ("succeeded", None),
        "cleanup": ("succeeded", None),
    }
    ran = [r.request.job for r in h.executor.started]
    assert ran == ["extract", "report", "cleanup"]


async def test_failing_job_is_retried_then_failed_and_rescheduled(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "flaky", task="bad")
    async with running(store, handlers={"bad": fail}, retry_attempts=3, retry_backoff_s=0.01):
        await eventually_async(
            lambda: sql.fetchval("SELECT count(*) = 3 FROM job_runs WHERE status = 'failed'"),
            "three failed attempts",
        )
        await eventually_async(
            lambda: sql.fetchval("SELECT attempt = 0 FROM scheduled_jobs"),
            "the job to be rescheduled",
        )
    job = await sql.fetchrow("SELECT * FROM scheduled_jobs")
    first = await sql.fetchval("SELECT scheduled_for FROM job_runs WHERE attempt = 1")
    assert job["next_run_at"] == first + timedelta(hours=1)
    assert job["last_status"] == "failed"


async def test_shutdown_releases_unstarted_runs_for_other_replicas(
    store: PostgresStore, sql: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("daemon.pg.horizon.UNMEASURED_RUN_S", 0.0)  # all three held at once
    for name in ("a", "b", "c"):
        await add(store, name)
    gate = asyncio.Event()

    async def slow(_run: Run) -> RunResult:
        return RunResult(ok=True)

    async with running(store, gate=gate, handlers={"default": slow}) as h:
        await eventually_async(
            lambda: sql.fetchval("SELECT count(*) = 3 FROM job_runs"), "three runs claimed"
        )
        await eventually_async(lambda: len(h.executor.started) == 1, "the run to start")
        h.stopping.set()
        await eventually_async(
            lambda: sql.fetchval("SELECT count(*) = 1 FROM job_runs"),
            "the two unstarted runs to be released",
            timeout_s=2.0,
        )
        gate.set()
    leased = await sql.fetchval("SELECT count(*) FROM scheduled_jobs WHERE lease_owner IS NOT NULL")
    assert leased == 0
    assert await sql.fetchval("SELECT count(*) FROM job_runs WHERE status = 'succeeded'") == 1


async def test_a_schema_older_than_the_code_is_unhealthy_until_migrated(
    db_dsn: str, sql: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    latest = await sql.fetchrow(
        "DELETE FROM runbroker_migrations WHERE version = "
        "(SELECT max(version) FROM runbroker_migrations) RETURNING *"
    )
    monkeypatch.setattr("daemon.pg.loops.SCHEMA_RECHECK_S", 0.05)
    async with running(PostgresStore(db_dsn)) as h:

        async def says_older() -> bool:
            problem = h.runner.health_problem()
            return problem is not None and "is older than this runbroker's" in problem

        await eventually_async(says_older, "health to say the schema is older")
        problem = h.runner.health_problem()
        assert problem is not None
        assert problem.startswith(f"database schema version {latest['version'] - 1:04d}")
        assert "run `runbroker migrate`" in problem
        await sql.execute(
            "INSERT INTO runbroker_migrations (version, name, checksum) VALUES ($1, $2, $3)",
            latest["version"], latest["name"], latest["checksum"],
        )  # fmt: skip
        await eventually_async(
            lambda: h.runner.health_problem() is None, "health once migrated again"
        )
