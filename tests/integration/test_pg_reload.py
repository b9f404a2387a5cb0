"""A reload of the tasks file reaches the Postgres runner at once: it reads the daemon's one
registry at each claim, so a job naming a task the reload added runs, on a real PostgreSQL."""

from __future__ import annotations

import asyncpg

from daemon.core.tasks import Task, TaskRegistry
from daemon.pg.store.postgres import PostgresStore
from tests.integration.jobrows import add
from tests.support.eventually import eventually_async
from tests.unit.pgfakes import running


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
