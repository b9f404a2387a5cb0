"""Replicas sharing due jobs: N jobs of RUN_S seconds each, due at once, on R replicas.

    python bench/bench_replicas.py [--jobs 12] [--replicas 3] [--run-s 1.0]

Each replica is a process of its own with the daemon's real parts (PgRunner, RunQueue,
Executor) and the default settings (BATCH_SIZE 20, a queue of 16), running a Python handler
that sleeps RUN_S. It prints the time from the jobs being due to the last run recorded, the
ideal (N * RUN_S / R, rounded up to whole rounds) and how many runs each replica ran. It prints;
it does not assert. ``RUNBROKER_BENCH_DSN`` (default
postgresql://postgres@127.0.0.1:5432/postgres) names the server; a fresh database is made and
dropped. Not run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import uvloop
from bench_workers import serve_replica  # the same replica, run the same way

from daemon.core.tasks import RunContext, Task
from daemon.log.logs import configure_logging
from daemon.pg.store.migrate import as_tuples, load_migrations
from daemon.pg.store.postgres import PostgresStore
from daemon.settings import Settings

ADMIN_DSN = os.environ.get("RUNBROKER_BENCH_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


async def replica(dsn: str, name: str, run_s: float) -> None:
    """One replica until SIGTERM: its runs sleep ``run_s``."""

    async def sleeper(_run: RunContext) -> dict[str, Any] | None:
        await asyncio.sleep(run_s)
        return None

    await serve_replica(dsn, Settings(), Task(name="sleep", handler=sleeper), name)


async def measure(jobs: int, replicas: int, run_s: float) -> None:
    name = f"bench_replicas_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(ADMIN_DSN)
    await admin.execute(f'CREATE DATABASE "{name}"')
    dsn = urlunsplit(urlsplit(ADMIN_DSN)._replace(path="/" + name))
    procs: list[subprocess.Popen[str]] = []
    try:
        store = PostgresStore(dsn)
        await store.migrator.migrate(as_tuples(load_migrations()))
        await store.close()
        for i in range(replicas):
            argv = [sys.executable, __file__, "--replica", dsn, f"r{i + 1}", str(run_s)]
            procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))  # noqa: ASYNC220
        for proc in procs:
            assert proc.stdout is not None
            proc.stdout.readline()  # "ready"
        conn = await asyncpg.connect(dsn)
        due = await conn.fetchval(
            "INSERT INTO scheduled_jobs (name, task_type, schedule, next_run_at)"
            " SELECT 'j' || i, 'sleep', 'every 1h', now() FROM generate_series(1, $1) AS i"
            " RETURNING now()",
            jobs,
        )
        started = time.monotonic()
        finished = "SELECT count(*) FROM job_runs WHERE finished_at IS NOT NULL"
        while await conn.fetchval(finished) < jobs:  # noqa: ASYNC110 (a bench polls the table)
            await asyncio.sleep(0.05)
        wall_s = time.monotonic() - started
        last = await conn.fetchval("SELECT max(finished_at) FROM job_runs")
        split = await conn.fetch(
            "SELECT owner, count(*) AS runs FROM job_runs GROUP BY owner ORDER BY owner"
        )
        await conn.close()
        ideal_s = math.ceil(jobs / replicas) * run_s
        print(f"{jobs} jobs of {run_s:g} s on {replicas} replicas (default BATCH_SIZE and queue)")
        print(
            f"  due to last finished: {(last - due).total_seconds():.2f} s (polled: {wall_s:.2f} s)"
        )
        print(
            f"  ideal (N / replicas, in whole rounds): {ideal_s:.2f} s;"
            f" one replica alone: {jobs * run_s:.2f} s"
        )
        print("  runs per replica: " + ", ".join(f"{r['owner']} {r['runs']}" for r in split))
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=30)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def main() -> None:
    if sys.argv[1:2] == ["--replica"]:
        configure_logging("json", "warning", stream=sys.stderr)
        uvloop.run(replica(sys.argv[2], sys.argv[3], float(sys.argv[4])))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--run-s", type=float, default=1.0)
    args = parser.parse_args()
    asyncio.run(measure(args.jobs, args.replicas, args.run_s))


if __name__ == "__main__":
    main()
