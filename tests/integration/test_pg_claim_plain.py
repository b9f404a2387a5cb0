"""The plain-case claim (one statement, no planner) decides exactly what the planner would.

Random job rows in every state the claim meets: fresh occurrences with the following one known,
unknown or already past (missed), misfire skip inside and outside the grace, retries, expired
leases, schedules to recompute. One ``claim`` takes them all; each outcome is compared with
``plan_claim`` on the row as it was, and the plain ones must not have reached the planner.
Both sides take the rule from ``plain_case``: what this checks is the rule's SQL against its
Python, and ``following_run_at`` against the schedule it stands for.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import asyncpg
import pytest

from daemon.pg.plan import plan_claim, plan_finish, schedule_for
from daemon.pg.store.admin_records import NewJob
from daemon.pg.store.base import (
    NO_OCCURRENCE,
    ClaimIncomplete,
    ClaimPlan,
    DueJob,
    WriteBatch,
)
from daemon.pg.store.postgres import PostgresStore
from daemon.pg.store.postgres.rows import due_job
from daemon.pg.store.queries.claim import SELECT_DUE
from tests.integration.jobrows import add, success

GRACE_S = 60.0
SCHEDULES = [
    ("every 10m", "UTC"),
    ("every 1h", "UTC"),
    ("daily 03:00", "Europe/Berlin"),
    ("cron */5 * * * *", "America/New_York"),
    ("at 2001-02-03T04:05:06Z", "UTC"),
]
# how long ago the occurrence fell due: all far from the 60 s grace and the schedules' steps
AGES = [timedelta(seconds=2), timedelta(seconds=20), timedelta(minutes=4), timedelta(days=3)]


def oracle(job: DueJob, now: datetime) -> ClaimPlan:
    return plan_claim(job, now, default_max_attempts=3, misfire_grace_s=GRACE_S)


def random_row(rng: random.Random, i: int, now: datetime) -> dict[str, object]:
    spec, tz = rng.choice(SCHEDULES)
    next_run_at = now - rng.choice(AGES)
    following = schedule_for(spec, tz).next_after(next_run_at) or NO_OCCURRENCE
    row: dict[str, object] = {
        "name": f"j{i:03d}",
        "schedule": spec,
        "time_zone": tz,
        "next_run_at": next_run_at,
        "following_run_at": rng.choice([following, following, None]),
        "misfire": rng.choice(["coalesce", "skip"]),
        "scheduled_for": None,
        "attempt": 0,
        "needs_schedule": rng.random() < 0.1,
        "lease_owner": None,
        "lease_expires_at": None,
    }
    kind = rng.random()
    if kind < 0.15:  # a retry whose backoff is over
        row.update(scheduled_for=next_run_at - timedelta(minutes=1), attempt=rng.choice([1, 2]))
    elif kind < 0.25:  # a crashed replica's lease
        row.update(
            scheduled_for=next_run_at,
            attempt=1,
            lease_owner="dead",
            lease_expires_at=now - timedelta(seconds=1),
        )
    return row


async def insert(sql: asyncpg.Connection, rows: list[dict[str, object]]) -> None:
    columns = list(rows[0])
    await sql.executemany(
        f"INSERT INTO scheduled_jobs (task_type, {', '.join(columns)}) "  # noqa: S608
        f"VALUES ('default', {', '.join(f'${n + 1}' for n in range(len(columns)))})",
        [tuple(r[c] for c in columns) for r in rows],
    )


async def due_jobs(sql: asyncpg.Connection) -> dict[str, DueJob]:
    """Every due row as the claim reads it (the store's own query and decoding)."""
    async with sql.transaction():
        rows = await sql.fetch(SELECT_DUE, 1000)
    return {row["name"]: due_job(row) for row in rows}


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
async def test_plain_claims_match_the_planner(
    store: PostgresStore, sql: asyncpg.Connection, seed: int
) -> None:
    rng = random.Random(seed)
    now = await store.admin.db_now()
    rows = [random_row(rng, i, now) for i in range(60)]
    await insert(sql, rows)
    before = await due_jobs(sql)
    assert len(before) == len(rows)

    planned: list[str] = []

    def spy(job: DueJob, at: datetime) -> ClaimPlan:
        planned.append(job.name)
        return oracle(job, at)

    t0 = await store.admin.db_now()
    claimed = {
        c.job.name: c for c in await store.claim("me", 100, 30.0, spy, misfire_grace_s=GRACE_S)
    }
    t1 = await store.admin.db_now()

    by_name = {str(r["name"]): r for r in rows}
    plain_seen = 0
    for name, job in before.items():
        plan, late = oracle(job, t0), oracle(job, t1)
        decided = (plan.run, plan.scheduled_for, plan.attempt)
        assert (late.run, late.scheduled_for, late.attempt) == decided, f"{name}: on a boundary"
        row = by_name[name]
        plain = (
            plan.run
            and job.lease_owner is None
            and job.scheduled_for is None
            and not job.needs_schedule
            and row["following_run_at"] is not None
            and row["following_run_at"] > t1  # type: ignore[operator]
        )
        if plain:
            plain_seen += 1
            assert name not in planned, f"{name}: a plain occurrence went to the planner"
            assert (plan.scheduled_for, plan.attempt) == (job.next_run_at, 1)
        if plan.run:
            assert name in claimed, f"{name}: the planner runs it, the claim did not"
            assert (claimed[name].scheduled_for, claimed[name].attempt) == (
                plan.scheduled_for,
                plan.attempt,
            )
        else:
            assert name not in claimed, f"{name}: the planner does not run it, the claim did"
            assert name in planned
    assert plain_seen >= 5  # the random rows did exercise the plain case

    state = {
        r["name"]: r
        for r in await sql.fetch(
            "SELECT s.name, s.lease_owner, s.scheduled_for, s.attempt, r.status, "
            "r.scheduled_for AS run_for, r.attempt AS run_attempt, r.owner "
            "FROM scheduled_jobs s JOIN job_runs r ON r.id = s.current_run_id"
        )
    }
    assert set(state) == set(claimed)
    for name, c in claimed.items():
        got = state[name]
        assert (got["lease_owner"], got["scheduled_for"], got["attempt"]) == (
            "me",
            c.scheduled_for,
            c.attempt,
        )
        assert (got["status"], got["run_for"], got["run_attempt"], got["owner"]) == (
            "queued",
            c.scheduled_for,
            c.attempt,
            "me",
        )


async def test_following_run_at_is_written_by_add_and_finish_and_forgotten_by_hand_edits(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    async def following(name: str) -> object:
        return await sql.fetchval(
            "SELECT following_run_at::text FROM scheduled_jobs WHERE name = $1", name
        )

    now = await store.admin.db_now()
    await store.admin.add_job(
        NewJob(
            name="hourly",
            task="default",
            schedule="every 1h",
            tz="UTC",
            next_run_at=now,
            following_run_at=now + timedelta(hours=1),
        )
    )
    await add(store, "once", schedule="at 2001-02-03T04:05:06Z")
    (hourly, once) = sorted(await store.claim("me", 5, 30.0, oracle), key=lambda c: c.job.name)
    at = await store.admin.db_now()
    await store.write("me", WriteBatch(finishes=[success(hourly, at), success(once, at)]))
    expected = hourly.scheduled_for + timedelta(hours=2)
    assert (
        await sql.fetchval("SELECT following_run_at FROM scheduled_jobs WHERE name = 'hourly'")
        == expected
    )
    assert await following("once") is None  # no next run at all
    await sql.execute("UPDATE scheduled_jobs SET next_run_at = now() WHERE name = 'hourly'")
    assert await following("hourly") is None
    await sql.execute(
        "UPDATE scheduled_jobs SET next_run_at = now(), following_run_at = 'infinity' "
        "WHERE name = 'hourly'"
    )
    assert await following("hourly") == "infinity"  # said by the writer: kept
    await store.admin.run_now("hourly")
    assert await following("hourly") is None


async def test_a_failed_run_retries_through_the_planner(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "a", following_run_at=NO_OCCURRENCE)
    (c,) = await store.claim("me", 1, 30.0, oracle)
    failure = plan_finish(
        c,
        ok=False,
        cancelled=False,
        error="boom",
        output=None,
        started_at=None,
        finished_at=await store.admin.db_now(),
        default_max_attempts=3,
        backoff_base_s=0.0,
    )
    await store.write("me", WriteBatch(finishes=[failure]))
    assert await sql.fetchval("SELECT following_run_at FROM scheduled_jobs") is None
    planned: list[str] = []

    def spy(job: DueJob, at: datetime) -> ClaimPlan:
        planned.append(job.name)
        return oracle(job, at)

    (retry,) = await store.claim("me", 1, 30.0, spy)
    assert (retry.scheduled_for, retry.attempt, planned) == (c.scheduled_for, 2, ["a"])


async def test_a_rescheduled_row_forgets_a_stale_following_run_at(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    # written by hand: no next_run_at (so needs_schedule) and a following_run_at from nowhere
    await sql.execute(
        "INSERT INTO scheduled_jobs (name, task_type, schedule, following_run_at) "
        "VALUES ('hand', 'default', 'every 1h', 'infinity')"
    )
    assert await store.claim("me", 5, 30.0, oracle) == []  # scheduled, not run
    assert await sql.fetchval("SELECT following_run_at FROM scheduled_jobs") is None


async def test_plain_claims_survive_a_failing_planner_step(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "plain", following_run_at=NO_OCCURRENCE)
    await add(store, "by-hand")  # no following_run_at: the planner's path

    def broken(job: DueJob, at: datetime) -> ClaimPlan:
        raise RuntimeError("planner bug")

    with pytest.raises(ClaimIncomplete) as caught:
        await store.claim("me", 5, 30.0, broken)
    assert [c.job.name for c in caught.value.claimed] == ["plain"]
    assert isinstance(caught.value.__cause__, RuntimeError)
    leases = dict(await sql.fetch("SELECT name, lease_owner FROM scheduled_jobs"))
    assert leases == {"plain": "me", "by-hand": None}
    with pytest.raises(RuntimeError):  # nothing plain left: the failure itself
        await store.claim("me", 5, 30.0, broken)
