"""Replicas share due jobs: each holds only what its one executor can start soon, so more
replicas run more at once instead of one claiming everything while the others idle."""

from __future__ import annotations

import asyncio

import asyncpg

from daemon.core.runqueue import Run, RunResult
from daemon.pg.store.postgres import PostgresStore
from tests.integration.jobrows import add_apart
from tests.support.eventually import eventually_async
from tests.support.pgfakes import Handler, running


async def test_three_replicas_split_six_due_jobs_two_each(
    db_dsn: str, sql: asyncpg.Connection
) -> None:
    await add_apart(db_dsn, *(f"long{i}" for i in range(6)), task="slow")
    release = asyncio.Event()  # every run holds until all six are claimed and counted

    async def slow(_run: Run) -> RunResult:
        await release.wait()
        return RunResult(ok=True)

    handlers: dict[str, Handler] = {"slow": slow}
    # The defaults: BATCH_SIZE 20 and a queue of 16 would let one replica take all six.
    async with (
        running(PostgresStore(db_dsn), owner="r1", handlers=handlers),
        running(PostgresStore(db_dsn), owner="r2", handlers=handlers),
        running(PostgresStore(db_dsn), owner="r3", handlers=handlers),
    ):
        await eventually_async(
            lambda: sql.fetchval("SELECT count(*) = 6 FROM job_runs"), "all six to be claimed"
        )
        held = dict(await sql.fetch("SELECT owner, count(*) FROM job_runs GROUP BY owner"))
        release.set()
        await eventually_async(
            lambda: sql.fetchval(
                "SELECT count(*) = 6 FROM scheduled_jobs WHERE last_status = 'succeeded'"
            ),
            "all six to succeed",
        )
    assert held == {"r1": 2, "r2": 2, "r3": 2}  # one running and one next, on each replica
