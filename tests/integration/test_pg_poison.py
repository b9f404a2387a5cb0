"""A run's record that PostgreSQL would refuse (a NUL, a lone surrogate, NaN) affects that run
alone: every other record of its batch is written, and nothing that succeeded runs again. A NUL
and a lone surrogate are replaced; an output with NaN or an infinity is not JSON by the rule of
a run's output (``is_json_output``), and is dropped."""

from __future__ import annotations

import json

import asyncpg

from daemon.core.runqueue import Run, RunResult
from daemon.pg.store.postgres import PostgresStore
from tests.integration.jobrows import add
from tests.support.eventually import eventually_async
from tests.support.pgfakes import Handler, running

GOOD_JOBS = 40


async def nul_output(_run: Run) -> RunResult:
    return RunResult(ok=True, output={"x": "a\x00b", "k\x00": [None]})


async def nan_output(_run: Run) -> RunResult:
    return RunResult(ok=True, output={"x": [float("nan")], "y": float("inf")})


async def lone_surrogate(_run: Run) -> RunResult:
    return RunResult(ok=True, output={"x": "\ud800", "pair": "\ud83d\ude00"})


async def nul_error(_run: Run) -> RunResult:
    return RunResult(ok=False, reason="exit status 3: bad \x00 byte \udcff")


async def test_forty_jobs_and_poisoned_records_only_the_poisoned_runs_are_touched(
    db_dsn: str, sql: asyncpg.Connection
) -> None:
    store = PostgresStore(db_dsn)
    for i in range(GOOD_JOBS):
        await add(store, f"good{i:02d}")
    for task in ("nul", "nan", "surrogate", "nulerror"):
        await add(store, f"poison-{task}", task=task, max_attempts=1)
    handlers: dict[str, Handler] = {
        "nul": nul_output,
        "nan": nan_output,
        "surrogate": lone_surrogate,
        "nulerror": nul_error,
    }
    tasks = ("default", *handlers)
    async with running(store, tasks=tasks, handlers=handlers, batch_size=50, queue_capacity=64):
        await eventually_async(
            lambda: sql.fetchval(
                "SELECT count(*) = 0 FROM scheduled_jobs WHERE last_run_at IS NULL"
            ),
            "every job to be recorded",
        )
    runs = await sql.fetch(
        "SELECT j.name, r.status, r.attempt, r.output::text AS output, r.error"
        " FROM job_runs r JOIN scheduled_jobs j ON j.id = r.job_id ORDER BY j.name"
    )
    by_job = {row["name"]: row for row in runs}
    assert len(runs) == GOOD_JOBS + 4  # one run each: nothing ran again
    for i in range(GOOD_JOBS):
        row = by_job[f"good{i:02d}"]
        assert (row["status"], row["attempt"], row["error"]) == ("succeeded", 1, None)
    nul = by_job["poison-nul"]
    assert nul["status"] == "succeeded"
    assert json.loads(nul["output"]) == {"x": "a\ufffdb", "k\ufffd": [None]}
    surrogate = by_job["poison-surrogate"]
    assert json.loads(surrogate["output"]) == {"x": "\ufffd", "pair": "\U0001f600"}
    nan = by_job["poison-nan"]
    assert (nan["status"], nan["output"]) == ("succeeded", None)
    failed = by_job["poison-nulerror"]
    assert (failed["status"], failed["error"]) == (
        "failed",
        "exit status 3: bad \ufffd byte \ufffd",
    )
