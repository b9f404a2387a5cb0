"""PostgresStore on a real PostgreSQL: migrations, claims, leases, finishes, NOTIFY, indexes."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import asyncpg
import pytest

from daemon.pg.plan import plan_claim
from daemon.pg.store.base import (
    ClaimPlan,
    Dependency,
    DueJob,
    Release,
    StoreSchemaMissing,
    WriteBatch,
)
from daemon.pg.store.migrate import as_tuples, load_migrations
from daemon.pg.store.postgres import PostgresStore
from daemon.pg.store.queries.claim import SELECT_DUE
from tests.integration.jobrows import add, success


def planner(job: DueJob, now: datetime) -> ClaimPlan:
    return plan_claim(job, now, default_max_attempts=3, misfire_grace_s=60.0)


async def test_migrate_is_idempotent_and_safe_from_several_replicas(empty_dsn: str) -> None:
    stores = [PostgresStore(empty_dsn) for _ in range(4)]
    try:
        migrations = as_tuples(load_migrations())
        results = await asyncio.gather(*(s.migrator.migrate(migrations) for s in stores))
        assert sorted(len(r) for r in results) == [0, 0, 0, len(migrations)]
        assert await stores[0].migrator.migrate(migrations) == []
        jobs = await stores[0].admin.list_jobs()
        assert jobs == []
    finally:
        for s in stores:
            await s.close()


async def test_unmigrated_database_says_to_run_migrate(empty_dsn: str) -> None:
    store = PostgresStore(empty_dsn)
    try:
        with pytest.raises(StoreSchemaMissing, match="runbroker migrate"):
            await store.claim("me", 5, 30.0, planner)
    finally:
        await store.close()


async def test_claim_inserts_the_run_and_leases_the_job_in_one_go(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "a")
    (claimed,) = await store.claim("me", 10, 30.0, planner)
    assert claimed.attempt == 1
    assert await store.claim("other", 10, 30.0, planner) == []
    job = await sql.fetchrow("SELECT * FROM scheduled_jobs WHERE name = 'a'")
    assert job["lease_owner"] == "me"
    assert job["current_run_id"] == claimed.run_id
    assert job["lease_expires_at"] > job["next_run_at"]
    run = await sql.fetchrow("SELECT * FROM job_runs WHERE id = $1", claimed.run_id)
    assert (run["status"], run["attempt"], run["owner"]) == ("queued", 1, "me")


async def test_concurrent_claimers_never_share_a_job(db_dsn: str, sql: asyncpg.Connection) -> None:
    stores = [PostgresStore(db_dsn) for _ in range(5)]
    try:
        for i in range(100):
            await add(stores[0], f"j{i:03d}")

        async def drain(store: PostgresStore, owner: str) -> list[int]:
            got: list[int] = []
            while batch := await store.claim(owner, 7, 30.0, planner):
                got.extend(c.job.id for c in batch)
            return got

        results = await asyncio.gather(*(drain(s, f"o{i}") for i, s in enumerate(stores)))
        every = [job_id for r in results for job_id in r]
        assert len(every) == 100
        assert len(set(every)) == 100
        assert await sql.fetchval("SELECT count(*) FROM job_runs") == 100
    finally:
        for s in stores:
            await s.close()


async def test_finish_is_guarded_by_the_owner(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "a")
    (c,) = await store.claim("me", 1, 30.0, planner)
    at = await store.admin.db_now()
    lost = await store.write("intruder", WriteBatch(finishes=[success(c, at)]))
    assert lost.lost_run_ids == {c.run_id}
    done = await store.write("me", WriteBatch(finishes=[success(c, at)]))
    assert done.lost_run_ids == frozenset()
    job = await sql.fetchrow("SELECT * FROM scheduled_jobs WHERE id = $1", c.job.id)
    assert job["lease_owner"] is None
    assert job["next_run_at"] == c.scheduled_for + timedelta(hours=1)
    assert job["last_status"] == "succeeded"
    run = await sql.fetchrow("SELECT * FROM job_runs WHERE id = $1", c.run_id)
    assert (run["status"], run["output"]) == ("succeeded", '{"ok": 1}')


async def test_claim_and_finish_carry_payload_and_times_exactly(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    at = (await store.admin.db_now()).replace(microsecond=123457) - timedelta(seconds=5)
    deps = (Dependency("b", "skip"),)
    await add(store, "b", next_run_at=at + timedelta(days=1))  # not due
    await add(store, "a", next_run_at=at, payload={"k": [1, "x"]}, depends_on=deps)
    (c,) = await store.claim("me", 1, 30.0, planner)
    assert (c.scheduled_for, c.job.next_run_at) == (at, at)
    assert (c.job.payload, c.job.depends_on) == ({"k": [1, "x"]}, deps)
    started, finished = at + timedelta(microseconds=1), at + timedelta(seconds=2, microseconds=-1)
    finish = success(c, started, finished_at=finished, output={"n": 1.5})
    assert (await store.write("me", WriteBatch(finishes=[finish]))).lost_run_ids == frozenset()
    run = await sql.fetchrow("SELECT * FROM job_runs WHERE id = $1", c.run_id)
    assert (run["scheduled_for"], run["started_at"], run["finished_at"]) == (at, started, finished)
    assert run["output"] == '{"n": 1.5}'
    job = await sql.fetchrow("SELECT * FROM scheduled_jobs WHERE id = $1", c.job.id)
    assert (job["next_run_at"], job["last_run_at"]) == (at + timedelta(hours=1), finished)


async def test_outlook_sees_the_earliest_lease_expiry_and_only_while_claiming(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "a")
    await add(store, "b", next_run_at=await store.admin.db_now() + timedelta(seconds=100))
    (c,) = await store.claim("me", 5, 30.0, planner)
    assert c.job.name == "a"
    due_in_s = (await store.outlook()).due_in_s
    assert due_in_s is not None
    assert 25.0 < due_in_s <= 30.0  # a's lease, before b at 100 s
    await sql.execute(
        "UPDATE scheduled_jobs SET lease_expires_at = now() + interval '500 s' "
        "WHERE lease_owner IS NOT NULL"
    )
    due_in_s = (await store.outlook()).due_in_s
    assert due_in_s is not None
    assert 95.0 < due_in_s <= 100.0  # now b comes first
    await sql.execute("UPDATE runbroker_settings SET value = 'true' WHERE key = 'scheduler.paused'")
    assert (await store.outlook()).due_in_s is None


async def test_expired_lease_is_reclaimed_and_the_old_run_abandoned(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "a")
    (first,) = await store.claim("dead", 1, 30.0, planner)
    assert await store.claim("alive", 1, 30.0, planner) == []
    await sql.execute("UPDATE scheduled_jobs SET lease_expires_at = now() - interval '1 second'")
    (second,) = await store.claim("alive", 1, 30.0, planner)
    assert (second.attempt, second.scheduled_for) == (2, first.scheduled_for)
    old = await sql.fetchrow("SELECT * FROM job_runs WHERE id = $1", first.run_id)
    assert old["status"] == "abandoned"
    assert "dead" in old["error"]
    at = await store.admin.db_now()
    late = await store.write("dead", WriteBatch(finishes=[success(first, at)]))
    assert late.lost_run_ids == {first.run_id}  # the dead replica's late result is refused


async def test_release_gives_the_job_back_as_it_was(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "a")
    before = await sql.fetchrow("SELECT next_run_at, attempt FROM scheduled_jobs")
    (c,) = await store.claim("me", 1, 30.0, planner)
    await store.write("me", WriteBatch(releases=[Release(c.job.id, c.run_id)]))
    after = await sql.fetchrow("SELECT * FROM scheduled_jobs")
    assert (after["next_run_at"], after["attempt"]) == tuple(before)
    assert (after["lease_owner"], after["scheduled_for"]) == (None, None)
    assert await sql.fetchval("SELECT count(*) FROM job_runs") == 0
    (again,) = await store.claim("other", 1, 30.0, planner)
    assert again.attempt == 1


async def test_heartbeat_extends_only_our_leases_and_tells_a_removed_job(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "a")
    await add(store, "b")
    await add(store, "c")
    mine, theirs, removed = await store.claim("me", 3, 1.0, planner)
    await sql.execute(
        "UPDATE scheduled_jobs SET lease_owner = 'thief' WHERE id = $1", theirs.job.id
    )
    await sql.execute("DELETE FROM scheduled_jobs WHERE id = $1", removed.job.id)
    renewal = await store.heartbeat("me", [mine.job.id, theirs.job.id, removed.job.id], 300.0)
    assert (renewal.kept, renewal.gone) == ({mine.job.id}, {removed.job.id})
    expires = await sql.fetchval(
        "SELECT lease_expires_at - now() FROM scheduled_jobs WHERE id = $1", mine.job.id
    )
    assert expires > timedelta(seconds=200)


async def test_run_key_is_unique_per_occurrence_and_attempt(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "a")
    (c,) = await store.claim("me", 1, 30.0, planner)
    with pytest.raises(asyncpg.UniqueViolationError):
        await sql.execute(
            "INSERT INTO job_runs (job_id, scheduled_for, attempt) VALUES ($1, $2, 1)",
            c.job.id,
            c.scheduled_for,
        )


async def test_notify_on_insert_run_now_and_settings_but_not_on_heartbeat(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    got: asyncio.Queue[str] = asyncio.Queue()
    sub = await store.listen(got.put_nowait)
    try:
        await add(store, "a", next_run_at=(await store.admin.db_now()) + timedelta(hours=1))
        assert await asyncio.wait_for(got.get(), 5) == "jobs"
        await store.admin.run_now("a")
        assert {await asyncio.wait_for(got.get(), 5) for _ in range(2)} == {"jobs", "run-now"}
        (c,) = await store.claim("me", 1, 30.0, planner)
        await store.heartbeat("me", [c.job.id], 30.0)  # a claim and a heartbeat: silent
        await sql.execute(
            "UPDATE runbroker_settings SET value = 'true' WHERE key = 'scheduler.paused'"
        )
        assert await asyncio.wait_for(got.get(), 5) == "settings"
        assert got.empty()
    finally:
        await sub.close()
    assert sub.lost


async def test_finish_release_and_hand_edits_notify_once_each(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "a")
    await add(store, "b")
    got: asyncio.Queue[str] = asyncio.Queue()
    sub = await store.listen(got.put_nowait)
    try:
        a, b = await store.claim("me", 2, 30.0, planner)  # silent: no timing changed
        await store.write("me", WriteBatch(finishes=[success(a, await store.admin.db_now())]))
        assert await asyncio.wait_for(got.get(), 5) == "jobs"  # the finish's own notify
        await store.write("me", WriteBatch(releases=[Release(b.job.id, b.run_id)]))
        assert await asyncio.wait_for(got.get(), 5) == "jobs"  # a released lease
        await sql.execute("UPDATE scheduled_jobs SET payload = '{\"x\": 1}'")
        await sql.execute("UPDATE scheduled_jobs SET enabled = false WHERE name = 'a'")
        assert await asyncio.wait_for(got.get(), 5) == "jobs"  # enabled, not the payload
        await sql.execute("UPDATE scheduled_jobs SET next_run_at = now() WHERE name = 'b'")
        assert await asyncio.wait_for(got.get(), 5) == "jobs"
        await sql.execute("SELECT pg_notify('runbroker', 'marker')")
        assert await asyncio.wait_for(got.get(), 5) == "marker"  # nothing else came between
    finally:
        await sub.close()


async def test_deleting_or_truncating_jobs_takes_their_runs(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    for name in ("a", "b", "c"):
        await add(store, name)
    claimed = await store.claim("me", 3, 30.0, planner)
    at = await store.admin.db_now()
    await store.write("me", WriteBatch(finishes=[success(c, at) for c in claimed]))
    await sql.execute("DELETE FROM scheduled_jobs WHERE name IN ('a', 'b')")
    remaining = await sql.fetch("SELECT DISTINCT job_id FROM job_runs")
    assert [r["job_id"] for r in remaining] == [c.job.id for c in claimed if c.job.name == "c"]
    await sql.execute("TRUNCATE scheduled_jobs")
    assert await sql.fetchval("SELECT count(*) FROM job_runs") == 0


async def test_paused_and_disabled_settings_stop_claims(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "a")
    await sql.execute(
        "UPDATE runbroker_settings SET value = '\"yes\"' WHERE key = 'scheduler.paused'"
    )
    assert (await store.scheduler_flags()).paused
    assert await store.claim("me", 5, 30.0, planner) == []
    await sql.execute(
        "UPDATE runbroker_settings SET value = 'false' WHERE key = 'scheduler.paused'"
    )
    await sql.execute(
        "UPDATE runbroker_settings SET value = 'false' WHERE key = 'scheduler.enabled'"
    )
    flags = await store.scheduler_flags()
    assert (flags.paused, flags.enabled, flags.claiming) == (False, False, False)
    assert await store.claim("me", 5, 30.0, planner) == []
    # A word with blanks around it, as a hand-edited row may have: the claim reads it as
    # Python does, or the status would say paused while the replicas go on claiming.
    await sql.execute(
        "UPDATE runbroker_settings SET value = 'true' WHERE key = 'scheduler.enabled';"
        "UPDATE runbroker_settings SET value = to_jsonb(E' Yes\\n'::text)"
        " WHERE key = 'scheduler.paused'"
    )
    assert (await store.scheduler_flags()).paused
    assert await store.claim("me", 5, 30.0, planner) == []
    await sql.execute(
        "UPDATE runbroker_settings SET value = 'false' WHERE key = 'scheduler.paused';"
        "UPDATE runbroker_settings SET value = to_jsonb(E'\\toff '::text)"
        " WHERE key = 'scheduler.enabled'"
    )
    assert not (await store.scheduler_flags()).enabled
    assert await store.claim("me", 5, 30.0, planner) == []
    await sql.execute(
        "UPDATE runbroker_settings SET value = 'true' WHERE key = 'scheduler.enabled';"
        "UPDATE runbroker_settings SET value = '2.5' WHERE key = 'scheduler.interval_seconds'"
    )
    assert (await store.scheduler_flags()).interval_s == 2.5
    assert len(await store.claim("me", 5, 30.0, planner)) == 1


async def test_a_row_written_by_hand_is_scheduled_by_the_next_claim(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await sql.execute(
        "INSERT INTO scheduled_jobs (name, task_type, schedule, time_zone) VALUES "
        "('hand', 'default', 'daily 03:00', 'Europe/Berlin'),"
        "('broken', 'default', 'daily 27:00', 'UTC')"
    )
    assert await store.claim("me", 5, 30.0, planner) == []  # scheduled, not run
    rows = {r["name"]: r for r in await sql.fetch("SELECT * FROM scheduled_jobs ORDER BY name")}
    hand = rows["hand"]
    assert hand["needs_schedule"] is False
    assert hand["next_run_at"] > await store.admin.db_now()
    assert hand["next_run_at"].minute == 0
    assert rows["broken"]["enabled"] is False
    assert "invalid schedule" in rows["broken"]["last_error"]
    await sql.execute("UPDATE scheduled_jobs SET schedule = 'every 1m' WHERE name = 'hand'")
    assert await sql.fetchval("SELECT needs_schedule FROM scheduled_jobs WHERE name = 'hand'")


async def test_due_query_is_an_index_scan(store: PostgresStore, sql: asyncpg.Connection) -> None:
    await sql.execute(
        "INSERT INTO scheduled_jobs (name, task_type, schedule, next_run_at, enabled) "
        "SELECT 'j' || g, 'default', 'every 1h', now() + g * interval '1 second', g % 10 <> 0 "
        "FROM generate_series(1, 20000) g"
    )
    await sql.execute("ANALYZE scheduled_jobs")
    plan = "\n".join(r[0] for r in await sql.fetch("EXPLAIN " + SELECT_DUE, 20))
    assert "scheduled_jobs_due_idx" in plan
    assert "Seq Scan on scheduled_jobs" not in plan


async def test_dependency_states_and_prune(store: PostgresStore, sql: asyncpg.Connection) -> None:
    await add(store, "up")
    await add(store, "down", depends_on=(Dependency("up"),))
    now = await store.admin.db_now()
    states = await store.dependency_states(["up", "ghost"], now)
    assert states["up"].pending  # due at or before "now"
    assert not states["ghost"].exists
    (c, _) = await store.claim("me", 2, 30.0, planner)
    await store.write("me", WriteBatch(finishes=[success(c, now)]))
    states = await store.dependency_states(["up"], now)
    assert (states["up"].pending, states["up"].last_status) == (False, "succeeded")
    await sql.execute(
        "UPDATE job_runs SET claimed_at = now() - interval '40 days',"
        " finished_at = now() - interval '40 days' WHERE id = $1",
        c.run_id,
    )
    assert await store.prune(30 * 86400.0) == 1
    assert await sql.fetchval("SELECT count(*) FROM job_runs") == 1  # the queued one stays
