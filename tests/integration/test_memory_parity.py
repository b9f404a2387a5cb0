"""The in-memory store (``daemon.testing``'s job board stands on it) claims what PostgreSQL
claims, in the same order: the same rows, batch by batch, with the same occurrences.

Random rows in the states the claim filter meets: due and not yet due, disabled, leased by a
live replica, and leased by a dead one whose lease has ended (long after or just after its
occurrence: the claim orders by the occurrence, not by when the lease ended).
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import asyncpg
import pytest

from daemon.pg.plan import plan_claim
from daemon.pg.store.base import Claimed, ClaimPlan, DueJob
from daemon.pg.store.memory import MemoryStore
from daemon.pg.store.postgres import PostgresStore

LEASE_S = 30.0
BATCH = 7


def oracle(job: DueJob, now: datetime) -> ClaimPlan:
    return plan_claim(job, now, default_max_attempts=3, misfire_grace_s=0.0)


def random_rows(rng: random.Random, now: datetime, count: int) -> list[dict[str, object]]:
    """``count`` rows with distinct occurrences (PostgreSQL orders ties as it likes), each at
    least a second from ``now`` so that the two clocks cannot disagree on one."""
    offsets_s = rng.sample(range(-4000, 600), count)
    rows = []
    for i, offset_s in enumerate(offsets_s):
        next_run_at = now + timedelta(seconds=offset_s + (0.5 if offset_s >= 0 else -0.5))
        row: dict[str, object] = {
            "name": f"j{i:03d}",
            "next_run_at": next_run_at,
            "enabled": rng.random() > 0.1,
            "scheduled_for": None,
            "attempt": 0,
            "lease_owner": None,
            "lease_expires_at": None,
        }
        kind = rng.random()
        if kind < 0.25 and offset_s < 0:  # a dead replica's lease, ended a while ago or just now
            ended_ago_s = rng.choice([2, 100, 3000])
            row.update(
                scheduled_for=next_run_at,
                attempt=1,
                lease_owner="dead",
                lease_expires_at=now - timedelta(seconds=ended_ago_s),
            )
        elif kind < 0.35 and offset_s < 0:  # a live replica's run in flight
            row.update(
                scheduled_for=next_run_at,
                attempt=1,
                lease_owner="alive",
                lease_expires_at=now + timedelta(seconds=300),
            )
        rows.append(row)
    return rows


async def insert(sql: asyncpg.Connection, rows: list[dict[str, object]]) -> None:
    columns = list(rows[0])
    await sql.executemany(
        f"INSERT INTO scheduled_jobs (task_type, schedule, time_zone, {', '.join(columns)}) "  # noqa: S608
        f"VALUES ('default', 'every 1h', 'UTC', "
        f"{', '.join(f'${n + 1}' for n in range(len(columns)))})",
        [tuple(r[c] for c in columns) for r in rows],
    )


def mirror(rows: list[dict[str, object]], now: datetime) -> MemoryStore:
    memory = MemoryStore(clock=lambda: now)
    for row in rows:
        fields = dict(row)
        name = str(fields.pop("name"))
        next_run_at = fields.pop("next_run_at")
        assert isinstance(next_run_at, datetime)
        memory.add(name, "default", "every 1h", next_run_at, **fields)
    return memory


Batch = list[tuple[str, datetime, int]]
PassedRows = list[tuple[str, datetime, str, int, str | None]]


def passed_over_in(memory: MemoryStore) -> PassedRows:
    """The rows of occurrences passed over (attempt 0) the claims wrote, by job name."""
    names = {job.id: job.name for job in memory.jobs.values()}
    return sorted(
        (names[r.job_id], r.scheduled_for, r.status, r.occurrences, r.error)
        for r in memory.runs.values()
        if r.attempt == 0
    )


async def passed_over_in_postgres(sql: asyncpg.Connection) -> PassedRows:
    rows = await sql.fetch(
        "SELECT j.name, r.scheduled_for, r.status, r.occurrences, r.error"
        " FROM job_runs r JOIN scheduled_jobs j ON j.id = r.job_id WHERE r.attempt = 0"
    )
    return sorted(tuple(r) for r in rows)


def batch_of(claimed: list[Claimed]) -> Batch:
    return sorted((c.job.name, c.scheduled_for, c.attempt) for c in claimed)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_memory_claims_what_postgres_claims(
    store: PostgresStore, sql: asyncpg.Connection, seed: int
) -> None:
    now = await store.admin.db_now()
    rows = random_rows(random.Random(seed), now, 60)
    await insert(sql, rows)
    memory = mirror(rows, now)

    from_postgres: list[Batch] = []
    from_memory: list[Batch] = []
    while True:
        pg_batch = batch_of(await store.claim("me", BATCH, LEASE_S, oracle))
        mem_batch = batch_of(await memory.claim("me", BATCH, LEASE_S, oracle))
        from_postgres.append(pg_batch)
        from_memory.append(mem_batch)
        if not pg_batch and not mem_batch:
            break
    assert from_memory == from_postgres
    passed_over = passed_over_in(memory)
    assert passed_over == await passed_over_in_postgres(sql)
    assert passed_over  # the draw has rows far enough behind to pass over an occurrence
    claimed = sum(len(b) for b in from_postgres)
    # the draw has rows of every kind: some claimed, some left (future, disabled, live lease)
    assert 0 < claimed < len(rows)
    assert len(from_postgres) > 2  # the limit cut the due rows into batches: order mattered
