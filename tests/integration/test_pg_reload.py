"""A reload of the tasks file reaches the Postgres runner at once: it reads the daemon's one
registry at each claim, so a job naming a task the reload added runs, on a real PostgreSQL."""

from __future__ import annotations

import asyncio

import asyncpg

from daemon.core.tasks import Task, TaskRegistry
from daemon.pg.store.postgres import PostgresStore
from tests.integration.jobrows import add
from tests.support.eventually import eventually_async
from tests.support.pgfakes import running


async def test_a_job_of_a_task_a_reload_added_is_claimed_and_runs(
    db_dsn: str, sql: asyncpg.Connection
) -> None:
    registry = TaskRegistry({"default": Task("default", command=("true",))})
    store = PostgresStore(db_dsn)
    async with running(store, tasks=registry, poll_interval_s=3600.0) as h:
        await eventually_async(lambda: h.runner.listening, "the runner to listen")
        await add(store, "early", task="report")
        early = await eventually_async(
            lambda: sql.fetchval("SELECT error FROM job_runs WHERE status = 'failed'"),
            "the job of an undefined task to fail",
        )
        assert early.startswith("unknown task 'report': this container defines default")
        registry.replace({**registry.tasks, "report": Task("report", command=("true",))})
        await add(store, "later", task="report")
        await eventually_async(
            lambda: sql.fetchval(
                "SELECT last_status = 'succeeded' FROM scheduled_jobs WHERE name = 'later'"
            ),
            "the job of the reloaded task to succeed",
        )
    assert [run.request.task for run in h.executor.started] == ["report"]


async def test_a_queued_job_of_a_task_a_reload_removed_fails_once_not_retried(
    db_dsn: str, sql: asyncpg.Connection
) -> None:
    registry = TaskRegistry(
        {"slow": Task("slow", command=("true",)), "report": Task("report", command=("true",))}
    )
    gate = asyncio.Event()
    store = PostgresStore(db_dsn)
    async with running(store, tasks=registry, gate=gate, poll_interval_s=3600.0) as h:
        await eventually_async(lambda: h.runner.listening, "the runner to listen")
        await add(store, "blocker", task="slow")
        await eventually_async(lambda: h.executor.started, "the blocker to start")
        await add(store, "queued", task="report")
        await eventually_async(lambda: h.queue.is_pending("report"), "report to be queued")
        registry.replace({"slow": registry.tasks["slow"]})  # a reload removes report
        gate.set()
        error = await eventually_async(
            lambda: sql.fetchval(
                "SELECT r.error FROM job_runs r JOIN scheduled_jobs j ON j.id = r.job_id"
                " WHERE j.name = 'queued' AND r.status = 'failed'"
            ),
            "the queued job's run to fail",
        )
        assert error.startswith("task 'report' was removed by a reload")
        row = await sql.fetchrow(
            "SELECT next_run_at > now() + interval '30 minutes' AS later,"
            " (SELECT count(*) FROM job_runs r WHERE r.job_id = j.id) AS runs"
            " FROM scheduled_jobs j WHERE name = 'queued'"
        )
        assert row["later"], "retried (a retry would fail as 'unknown task', losing the reason)"
        assert row["runs"] == 1
        assert any("removed by a reload" in w for w in h.runner.health_warnings())
