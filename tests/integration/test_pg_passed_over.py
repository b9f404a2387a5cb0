"""The occurrences a claim passes over, recorded in job_runs in the claim's transaction: one
row per claim, by PostgreSQL and by the in-memory store alike; hand-written rows stay as they
are."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import asyncpg
import pytest

from daemon.core.rfc3339 import rfc3339_utc
from daemon.pg.plan import plan_claim
from daemon.pg.store.base import Claimed, ClaimPlan, DueJob, Misfire, Release, WriteBatch
from daemon.pg.store.memory import MemoryStore
from daemon.pg.store.migrate import as_tuples, load_migrations
from daemon.pg.store.postgres import PostgresStore
from tests.integration.jobrows import add

BEHIND = timedelta(minutes=10, seconds=30)  # every 1m: eleven occurrences due, the last 30 s ago
Row = tuple[str, int, datetime, int, str | None]


def planner(job: DueJob, now: datetime) -> ClaimPlan:
    return plan_claim(job, now, default_max_attempts=3, misfire_grace_s=60.0)


async def pg_rows(sql: asyncpg.Connection) -> list[Row]:
    rows = await sql.fetch(
        "SELECT status, attempt, scheduled_for, occurrences, error FROM job_runs ORDER BY attempt"
    )
    return [tuple(r) for r in rows]


def memory_rows(memory: MemoryStore) -> list[Row]:
    runs = sorted(memory.runs.values(), key=lambda r: r.attempt)
    return [(r.status, r.attempt, r.scheduled_for, r.occurrences, r.error) for r in runs]


async def both_behind(
    store: PostgresStore, misfire: Misfire, **kw: Any
) -> tuple[datetime, MemoryStore]:
    """Job ``late`` (every 1m) BEHIND in PostgreSQL and in a memory store on its clock: the
    first missed occurrence."""
    now = await store.admin.db_now()
    first = now - BEHIND
    await add(store, "late", schedule="every 1m", next_run_at=first, misfire=misfire, **kw)
    memory = MemoryStore(clock=lambda: now)
    memory.add("late", "default", "every 1m", first, misfire=misfire)
    return first, memory


def note_coalesced(first: datetime, run_for: datetime) -> str:
    z = rfc3339_utc
    return f"10 occurrences from {z(first)} run once as {z(run_for)}"


async def test_coalesce_runs_once_and_records_the_occurrences_it_passed_over(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    first, memory = await both_behind(store, "coalesce")
    latest = first + timedelta(minutes=10)
    (pg_claimed,) = await store.claim("me", 5, 30.0, planner)
    (mem_claimed,) = await memory.claim("me", 5, 30.0, planner)
    for claimed in (pg_claimed, mem_claimed):
        assert (claimed.scheduled_for, claimed.attempt) == (latest, 1)
    expected = [
        ("coalesced", 0, first, 10, note_coalesced(first, latest)),
        ("queued", 1, latest, 1, None),
    ]
    assert await pg_rows(sql) == expected
    assert memory_rows(memory) == expected
    passed = await sql.fetchrow("SELECT * FROM job_runs WHERE attempt = 0")
    assert (passed["owner"], passed["started_at"]) == ("me", None)
    assert passed["finished_at"] == passed["claimed_at"]  # pruned as any finished run


async def test_skip_runs_nothing_and_records_every_occurrence_missed(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    first, memory = await both_behind(store, "skip")
    assert await store.claim("me", 5, 30.0, planner) == []
    assert await memory.claim("me", 5, 30.0, planner) == []
    (pg_row,) = await pg_rows(sql)
    assert memory_rows(memory) == [pg_row]
    assert pg_row[:4] == ("missed", 0, first, 11)
    assert (pg_row[4] or "").startswith("11 occurrences from")
    job = await sql.fetchrow("SELECT next_run_at, lease_owner FROM scheduled_jobs")
    assert tuple(job) == (first + timedelta(minutes=11), None)


async def test_a_claim_made_again_after_a_release_keeps_one_row_of_what_it_passed_over(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    first, memory = await both_behind(store, "coalesce")
    for claimer in (store, memory):
        (claimed,) = await claimer.claim("me", 5, 30.0, planner)
        release = Release(claimed.job.id, claimed.run_id)
        await claimer.write("me", WriteBatch(releases=[release]))
        again: list[Claimed] = await claimer.claim("other", 5, 30.0, planner)
        assert [c.scheduled_for for c in again] == [first + timedelta(minutes=10)]
    rows = await pg_rows(sql)
    assert memory_rows(memory) == rows
    assert [(r[0], r[1], r[3]) for r in rows] == [("coalesced", 0, 10), ("queued", 1, 1)]
    assert await sql.fetchval("SELECT owner FROM job_runs WHERE attempt = 0") == "other"


async def test_the_plain_claim_passes_over_nothing(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    now = await store.admin.db_now()
    await add(store, "fresh", next_run_at=now, following_run_at=now + timedelta(hours=1))
    (claimed,) = await store.claim("me", 5, 30.0, planner)
    assert await pg_rows(sql) == [("queued", 1, claimed.scheduled_for, 1, None)]


async def test_hand_written_rows_stay_and_the_checks_keep_the_attempts_apart(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    first, _ = await both_behind(store, "coalesce")
    job_id = await sql.fetchval("SELECT id FROM scheduled_jobs")
    await sql.execute(  # an occurrence run by hand, recorded by hand
        "INSERT INTO job_runs (job_id, scheduled_for, attempt, status, error)"
        " VALUES ($1, $2, 1, 'succeeded', 'by hand')",
        job_id,
        first,
    )
    await store.claim("me", 5, 30.0, planner)
    rows = await pg_rows(sql)
    assert [(r[0], r[1], r[2]) for r in rows[:2]] == [
        ("coalesced", 0, first),
        ("succeeded", 1, first),
    ]
    assert rows[1][4] == "by hand"
    for status, attempt in (("coalesced", 1), ("missed", 2), ("succeeded", 0)):
        with pytest.raises(asyncpg.CheckViolationError):
            await sql.execute(
                "INSERT INTO job_runs (job_id, scheduled_for, attempt, status)"
                " VALUES ($1, now(), $2, $3)",
                job_id,
                attempt,
                status,
            )
    with pytest.raises(asyncpg.CheckViolationError):
        await sql.execute("UPDATE job_runs SET occurrences = 0 WHERE attempt = 0")


async def test_jobs_history_shows_how_many_occurrences_a_row_stands_for(
    store: PostgresStore,
) -> None:
    await both_behind(store, "coalesce")
    await store.claim("me", 5, 30.0, planner)
    runs = await store.admin.history("late", 10)
    assert sorted((r.status, r.attempt, r.occurrences) for r in runs) == [
        ("coalesced", 0, 10),
        ("queued", 1, 1),
    ]


async def test_migration_0005_keeps_the_runs_recorded_before_it(empty_dsn: str) -> None:
    migrations = as_tuples(load_migrations())
    assert migrations[4][1] == "0005_passed_over_slots"
    store = PostgresStore(empty_dsn)
    sql = await asyncpg.connect(empty_dsn)
    try:
        await store.migrator.migrate(migrations[:4])
        job_id = await sql.fetchval(
            "INSERT INTO scheduled_jobs (name, task_type, schedule) VALUES ('old', 'default',"
            " 'every 1h') RETURNING id"
        )
        await sql.execute(
            "INSERT INTO job_runs (job_id, scheduled_for, attempt, status)"
            " VALUES ($1, now(), 2, 'failed')",
            job_id,
        )
        assert len(await store.migrator.migrate(migrations)) == len(migrations) - 4
        (run,) = await store.admin.history("old", 10)
        assert (run.status, run.attempt, run.occurrences) == ("failed", 2, 1)
    finally:
        await sql.close()
        await store.close()


async def test_a_row_written_by_hand_ages_behind_is_claimed_and_says_at_least(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await sql.execute(
        "INSERT INTO scheduled_jobs (name, task_type, schedule, next_run_at)"
        " VALUES ('ancient', 'default', 'every 1s', '0002-01-01 00:00:00+00')"
    )
    (claimed,) = await store.claim("me", 5, 30.0, planner)
    passed = await sql.fetchrow("SELECT status, occurrences, error FROM job_runs WHERE attempt = 0")
    assert (passed["status"], passed["occurrences"]) == ("coalesced", 2**31 - 1)
    assert passed["error"].startswith(f"at least {2**31 - 1} occurrences from 0002-01-01T00:00:00Z")
    assert claimed.attempt == 1
