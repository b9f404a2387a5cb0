"""Postgres runner benchmark, side by side with pgqueuer 1.6.0 on the same server, same run.

    python bench/bench_pgrunner.py [--jobs 5000] [--latency-samples 200] [--big-rows 1000000]

1. No-op jobs drained per second, one replica and three (separate processes): runbroker
   claims N scheduled jobs due at once and records N runs; pgqueuer dequeues N queued jobs.
2. Due-to-started latency with NOTIFY, one job at a time into an idle replica: p50 / p99.
3. The due query's cost (EXPLAIN ANALYZE) with 1,000 and 1,000,000 rows in scheduled_jobs.

Each part gets a fresh database, dropped afterwards. ``RUNBROKER_BENCH_DSN`` (default
postgresql://postgres@127.0.0.1:5432/postgres) names the server. Not run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from daemon.pg.store.migrate import as_tuples, load_migrations
from daemon.pg.store.postgres import PostgresStore
from daemon.pg.store.queries.claim import OUTLOOK, SELECT_DUE

ADMIN_DSN = os.environ.get("RUNBROKER_BENCH_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def dsn_for(database: str) -> str:
    return urlunsplit(urlsplit(ADMIN_DSN)._replace(path="/" + database))


@asynccontextmanager
async def fresh_database(kind: str) -> AsyncIterator[str]:
    name = f"bench_{kind}_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(ADMIN_DSN)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        dsn = dsn_for(name)
        if kind == "rb":
            store = PostgresStore(dsn)
            await store.migrator.migrate(as_tuples(load_migrations()))
            await store.close()
        else:
            from pgqueuer.db import AsyncpgDriver
            from pgqueuer.queries import Queries

            conn = await asyncpg.connect(dsn)
            await Queries(AsyncpgDriver(conn)).install()
            await conn.close()
        yield dsn
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


class Workers:
    """Worker processes (``bench_workers.py``); each prints ``ready`` and, at exit, JSON."""

    def __init__(self, kind: str, dsn: str, count: int, batch: int) -> None:
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_workers.py")
        self.procs = [
            subprocess.Popen(
                [sys.executable, script, kind, dsn, str(batch), f"w{i}"],
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(count)
        ]

    def wait_ready(self) -> None:
        for proc in self.procs:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"worker did not start: {line!r}")

    def stop(self) -> list[float]:
        latencies: list[float] = []
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            out, _ = proc.communicate(timeout=30)
            for line in out.splitlines():
                if line.startswith("{"):
                    latencies.extend(json.loads(line)["latencies_ms"])
        return latencies


COUNT_DONE = {
    "rb": "SELECT count(*) FROM job_runs WHERE status = 'succeeded'",
    "pgq": "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'",
}
# After a drain: every job recorded exactly once, nothing left claimed or queued.
VERIFY = {
    "rb": """
        SELECT (SELECT count(*) FROM scheduled_jobs) AS jobs,
               (SELECT count(*) FROM job_runs) AS records,
               (SELECT count(DISTINCT job_id) FROM job_runs) AS distinct_jobs,
               (SELECT count(*) FROM job_runs WHERE status <> 'succeeded') AS not_ok,
               (SELECT count(*) FROM scheduled_jobs
                WHERE lease_owner IS NOT NULL OR next_run_at IS NOT NULL
                   OR last_status IS DISTINCT FROM 'succeeded') AS left_over
    """,
    "pgq": """
        SELECT (SELECT count(DISTINCT job_id) FROM pgqueuer_log) AS jobs,
               (SELECT count(*) FROM pgqueuer_log WHERE status = 'successful') AS records,
               (SELECT count(DISTINCT job_id) FROM pgqueuer_log
                WHERE status = 'successful') AS distinct_jobs,
               (SELECT count(*) FROM pgqueuer_log
                WHERE status NOT IN ('queued', 'picked', 'successful')) AS not_ok,
               (SELECT count(*) FROM pgqueuer) AS left_over
    """,
}
# One-shot jobs due now, as ``runbroker jobs add --at`` writes them: following_run_at says
# there is no later occurrence, so each is claimed by the one-statement plain claim.
RB_ENQUEUE = (
    "INSERT INTO scheduled_jobs (name, task_type, schedule, next_run_at, following_run_at) "
    "SELECT 'j' || g || '_' || $2::text, 'noop', 'at 2000-01-01T00:00:00Z', now(), 'infinity' "
    "FROM generate_series(1, $1) g"
)
# The same rows written by hand without following_run_at: every claim goes through the
# planner's transaction (``--hand-written``).
RB_ENQUEUE_BY_HAND = RB_ENQUEUE.replace(", following_run_at)", ")").replace(", 'infinity'", "")
POLL_S = 0.01  # the end of a drain is seen within this (the same for both sides)
HAND_WRITTEN = False  # --hand-written


async def pgq_enqueue(conn: asyncpg.Connection, jobs: int) -> None:
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    await Queries(AsyncpgDriver(conn)).enqueue(["noop"] * jobs, [None] * jobs, [0] * jobs)


async def wait_count(conn: asyncpg.Connection, kind: str, target: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while await conn.fetchval(COUNT_DONE[kind]) < target:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{kind}: only {await conn.fetchval(COUNT_DONE[kind])} done")
        await asyncio.sleep(POLL_S)


async def verify(conn: asyncpg.Connection, kind: str, jobs: int) -> None:
    row = await conn.fetchrow(VERIFY[kind])
    expected = {"jobs": jobs, "records": jobs, "distinct_jobs": jobs, "not_ok": 0, "left_over": 0}
    if dict(row) != expected:
        raise RuntimeError(f"{kind}: drain not exact: {dict(row)} != {expected}")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process on this machine (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def cpu_snapshot(conn: asyncpg.Connection, workers: Workers) -> tuple[float, float]:
    """CPU seconds so far of the worker processes and of the database's other backends."""
    pids = await conn.fetch(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid()"
    )
    return (
        sum(cpu_s(proc.pid) for proc in workers.procs),
        sum(cpu_s(row["pid"]) for row in pids),
    )


@dataclass
class Drain:
    rate: float  # jobs/s
    worker_us: float  # worker CPU per job (all replicas)
    db_us: float  # database backend CPU per job (all the workers' connections)


async def throughput(kind: str, replicas: int, jobs: int, batch: int) -> Drain:
    """Jobs per second from the first enqueue to the last recorded result, all checked."""
    async with fresh_database(kind) as dsn:
        workers = Workers(kind, dsn, replicas, batch)
        try:
            workers.wait_ready()
            conn = await asyncpg.connect(dsn)
            try:
                cpu0 = await cpu_snapshot(conn, workers)
                t0 = time.perf_counter()
                if kind == "rb":
                    rows = RB_ENQUEUE_BY_HAND if HAND_WRITTEN else RB_ENQUEUE
                    await conn.execute(rows, jobs, "x")
                else:
                    await pgq_enqueue(conn, jobs)
                await wait_count(conn, kind, jobs, 300)
                elapsed_s = time.perf_counter() - t0
                cpu1 = await cpu_snapshot(conn, workers)
                await asyncio.sleep(0.2)  # a duplicate written late would show up now
                await verify(conn, kind, jobs)
            finally:
                await conn.close()
        finally:
            workers.stop()
    per_job_us = 1e6 / jobs
    return Drain(
        jobs / elapsed_s, (cpu1[0] - cpu0[0]) * per_job_us, (cpu1[1] - cpu0[1]) * per_job_us
    )


async def latency(kind: str, samples: int) -> list[float]:
    async with fresh_database(kind) as dsn:
        workers = Workers(kind, dsn, 1, 10)
        try:
            workers.wait_ready()
            conn = await asyncpg.connect(dsn)
            try:
                for i in range(samples):
                    if kind == "rb":
                        await conn.execute(RB_ENQUEUE, 1, str(i))
                    else:
                        await pgq_enqueue(conn, 1)
                    await wait_count(conn, kind, i + 1, 30)
            finally:
                await conn.close()
        finally:
            values = workers.stop()
    return values


async def explain_best(conn: asyncpg.Connection, sql: str, *args: object) -> tuple[float, str]:
    """EXPLAIN ANALYZE, best of 5: (execution ms, plan text)."""
    best_ms, plan_text = float("inf"), ""
    for _ in range(5):
        async with conn.transaction():
            lines = [r[0] for r in await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + sql, *args)]
            ms = float(lines[-1].split(":")[1].split()[0])  # "Execution Time: x ms"
            if ms < best_ms:
                best_ms, plan_text = ms, "\n".join(lines)
    return best_ms, plan_text


async def due_query_cost(rows: int) -> tuple[float, str, float, str]:
    """The due query's and the claim loop's outlook's cost with ``rows`` jobs, 20 due and
    30 leased (runs in flight, as the claim leaves them: next_run_at in the past)."""
    async with fresh_database("rb") as dsn:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("ALTER TABLE scheduled_jobs DISABLE TRIGGER USER")
            await conn.execute(
                "INSERT INTO scheduled_jobs (name, task_type, schedule, next_run_at, enabled) "
                "SELECT 'j' || g, 'noop', 'every 1h', "
                "  now() + (CASE WHEN g <= 50 THEN -1 ELSE g END) * interval '1 second', "
                "  g % 10 <> 0 "
                "FROM generate_series(1, $1) g",
                rows,
            )
            await conn.execute(
                "UPDATE scheduled_jobs SET lease_owner = 'other', "
                "lease_expires_at = now() + interval '1 minute' WHERE id IN ("
                "SELECT id FROM scheduled_jobs WHERE enabled ORDER BY id LIMIT 30)"
            )
            await conn.execute("ALTER TABLE scheduled_jobs ENABLE TRIGGER USER")
            await conn.execute("VACUUM ANALYZE scheduled_jobs")
            due_ms, due_plan = await explain_best(conn, SELECT_DUE, 20)
            outlook_ms, outlook_plan = await explain_best(conn, OUTLOOK)
            return due_ms, due_plan, outlook_ms, outlook_plan
        finally:
            await conn.close()


async def drain(jobs: int, batch: int, reps: int) -> None:
    """Each repetition measures both sides back to back, in alternating order; the ratio is
    taken within a repetition, and the medians over repetitions are reported."""
    print(f"# drain {jobs} no-op jobs (batch {batch}), jobs/s, {reps} repetitions")
    rates: dict[tuple[str, int], list[float]] = {}
    ratios: dict[int, list[float]] = {}
    for rep in range(reps):
        for replicas in (1, 3):
            order = ("rb", "pgq") if (rep + replicas // 3) % 2 == 0 else ("pgq", "rb")
            got = {kind: await throughput(kind, replicas, jobs, batch) for kind in order}
            for kind, drained in got.items():
                rates.setdefault((kind, replicas), []).append(drained.rate)
            ratio = got["rb"].rate / got["pgq"].rate
            ratios.setdefault(replicas, []).append(ratio)
            cpu = "  ".join(
                f"{kind} cpu/job: worker {got[kind].worker_us:.0f}us db {got[kind].db_us:.0f}us"
                for kind in ("rb", "pgq")
            )
            print(
                f"rep {rep + 1} replicas={replicas} ({' then '.join(order)}): "
                f"rb {got['rb'].rate:7.0f}  pgq {got['pgq'].rate:7.0f}  ratio {ratio:.2f}x"
                f"   [{cpu}]",
                flush=True,
            )
    print(f"\n# drain, median of {reps} (min-max)")
    for replicas in (1, 3):
        for kind in ("rb", "pgq"):
            values = rates[kind, replicas]
            print(
                f"{kind:4} replicas={replicas}: {statistics.median(values):7.0f} jobs/s "
                f"({min(values):.0f}-{max(values):.0f})"
            )
        values = ratios[replicas]
        print(
            f"ratio runbroker/pgqueuer, {replicas} replica(s): "
            f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"
        )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--latency-samples", type=int, default=200)
    parser.add_argument("--big-rows", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=5, help="drain repetitions")
    parser.add_argument("--parts", default="drain,latency,query", help="comma-separated")
    parser.add_argument(
        "--hand-written",
        action="store_true",
        help="drain rows written without following_run_at (the planner's claim path)",
    )
    args = parser.parse_args()
    global HAND_WRITTEN
    HAND_WRITTEN = args.hand_written
    parts = set(args.parts.split(","))

    if "drain" in parts:
        await drain(args.jobs, args.batch, args.reps)

    if "latency" in parts:
        print(f"\n# due-to-started latency with NOTIFY, {args.latency_samples} samples, ms")
    for kind in ("rb", "pgq") if "latency" in parts else ():
        values = await latency(kind, args.latency_samples)
        print(
            f"{kind:4} p50={pct(values, 0.5):6.2f}  p99={pct(values, 0.99):6.2f}  "
            f"mean={statistics.fmean(values):6.2f}  n={len(values)}"
        )

    if "query" not in parts:
        return
    print("\n# due query and outlook (EXPLAIN ANALYZE, best of 5)")
    plan = ""
    for rows in (1000, args.big_rows):
        ms, plan, outlook_ms, outlook_plan = await due_query_cost(rows)
        scan = "index scan" if "scheduled_jobs_due_idx" in plan else "NOT an index scan"
        seq = "a Seq Scan" if "Seq Scan on scheduled_jobs" in outlook_plan else "index scans"
        print(f"rows={rows:>9}: due {ms:.3f} ms, {scan}; outlook {outlook_ms:.3f} ms, {seq}")
    print(plan)
    print(outlook_plan)


if __name__ == "__main__":
    asyncio.run(main())
