"""Rows written by hand that the runner cannot use fail on their own; every other job runs.

Writing ``scheduled_jobs`` by hand is documented, and jsonb holds what Python's decoder cannot
follow (a payload nested 3,000 deep), a zone or spec may be wrong, a task unknown, a time
'-infinity' (out-of-range times: the last test). Each such row must fail, be disabled or be
rescheduled with its reason, alone: the claim of the batch it is in, ``jobs list`` and the other
jobs go on.
"""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg

from daemon.pg.admin.view import jobs_table
from daemon.pg.store.postgres import PostgresStore
from tests.support.eventually import eventually_async
from tests.support.pgfakes import running

DEEP = "(repeat('[', 3000) || repeat(']', 3000))::jsonb"

BAD_ROWS = f"""
INSERT INTO scheduled_jobs (name, task_type, schedule, time_zone, payload, depends_on,
                            next_run_at, following_run_at, scheduled_for, attempt)
VALUES
  ('deep-planned', 'default', 'every 1h', 'UTC', {DEEP}, '[]', now(), NULL, NULL, 0),
  ('deep-plain', 'default', 'every 1h', 'UTC', {DEEP}, '[]', now(), 'infinity', NULL, 0),
  ('deep-deps', 'default', 'every 1h', 'UTC', '{{}}',
   ('[' || repeat('[', 3000) || repeat(']', 3000) || ']')::jsonb, now(), NULL, NULL, 0),
  ('bad-zone', 'default', 'every 1h', 'Mars/Olympus', '{{}}', '[]', now(), NULL, NULL, 0),
  ('bad-spec', 'default', 'every banana', 'UTC', '{{}}', '[]', now(), NULL, NULL, 0),
  ('no-task', 'nosuchtask', 'every 1h', 'UTC', '{{}}', '[]', now(), NULL, NULL, 0),
  ('spent', 'default', 'every 1h', 'UTC', '{{}}', '[]', now(), NULL, now(), 2147483647),
  ('bc-retry', 'default', 'every 1h', 'UTC', '{{}}', '[]', now(), NULL, '0044-03-15 BC', 1)
"""  # noqa: S608 (built from the constant above)


async def test_unusable_rows_fail_alone_and_every_other_job_runs(
    db_dsn: str, sql: asyncpg.Connection
) -> None:
    await sql.execute(BAD_ROWS)
    await sql.execute(
        "INSERT INTO scheduled_jobs (name, task_type, schedule, next_run_at) VALUES "
        "('good', 'default', 'every 1h', now()), "
        "('good-once', 'default', 'at 2001-01-01T00:00:00Z', now())"
    )
    store = PostgresStore(db_dsn)
    async with running(store, batch_size=20, queue_capacity=20) as h:
        await eventually_async(
            lambda: sql.fetchval(
                "SELECT count(*) = 2 FROM scheduled_jobs "
                "WHERE name LIKE 'good%' AND last_status = 'succeeded'"
            ),
            "both good jobs to succeed",
        )
        await eventually_async(
            lambda: sql.fetchval(
                "SELECT count(*) = 0 FROM scheduled_jobs"
                " WHERE last_status IS NULL AND last_error IS NULL"
            ),
            "every job to have a status",
        )
        await eventually_async(
            lambda: sql.fetchval("SELECT count(*) = 0 FROM job_runs WHERE finished_at IS NULL"),
            "every run to finish",
        )
        assert h.runner.health_problem() is None
        warnings = "\n".join(h.runner.health_warnings())
        status = h.runner.status()
    ran = [r.request.job or "" for r in h.executor.started]
    assert sorted(ran) == ["good", "good-once"]
    jobs = {
        row["name"]: row
        for row in await sql.fetch(
            "SELECT name, enabled, last_status, last_error, next_run_at FROM scheduled_jobs"
        )
    }
    runs = {
        row["name"]: row
        for row in await sql.fetch(
            "SELECT j.name, r.status, r.error, r.attempt FROM job_runs r "
            "JOIN scheduled_jobs j ON j.id = r.job_id"
        )
    }
    for name in ("deep-planned", "deep-plain", "deep-deps"):
        assert runs[name]["status"] == "failed", name
        assert runs[name]["attempt"] == 1  # not retried: the row will not get better
        assert "nested too deeply" in runs[name]["error"], runs[name]["error"]
        assert jobs[name]["next_run_at"] is not None  # the schedule goes on
        assert name in warnings
    assert "payload" in runs["deep-plain"]["error"]
    assert "depends_on" in runs["deep-deps"]["error"]
    for name, says in (("bad-zone", "Mars/Olympus"), ("bad-spec", "banana")):
        assert not jobs[name]["enabled"]
        assert jobs[name]["last_status"] == "failed"
        assert says in jobs[name]["last_error"]
        assert name not in runs
        assert name in warnings
    assert runs["no-task"]["status"] == "failed"
    assert "unknown task 'nosuchtask'" in runs["no-task"]["error"]
    assert "no-task" in warnings
    # a retry of an occurrence BC: its time is out of range, so the job goes on from now
    assert "bc-retry" not in runs
    assert "scheduled_for is out of range" in jobs["bc-retry"]["last_error"]
    assert jobs["bc-retry"]["next_run_at"] > datetime.now(UTC)
    assert "bc-retry" in warnings
    assert jobs["spent"]["last_status"] == "failed"
    assert "spent" not in runs
    assert {entry["job"] for entry in status["unusable_jobs"]} >= {"deep-plain", "bad-zone"}
    # The administration side reads the rows too.
    admin = PostgresStore(db_dsn)
    try:
        listed = await admin.admin.list_jobs()
        history = await admin.admin.history(None, 100)
    finally:
        await admin.close()
    assert len(listed) == 10
    assert "deep-plain" in jobs_table(listed)
    assert len(history) == await sql.fetchval("SELECT count(*) FROM job_runs")


# Every out-of-range time a hand-written next_run_at can hold, with and without the following
# occurrence that sends a row through the claim's one-statement path.
OUT_OF_RANGE = ["0044-03-15 BC", "-infinity", "0001-01-01 00:00:00+00", "0001-01-01 12:00:00+00"]
NEVER_DUE = ["infinity", "294276-12-31 23:59:59+00", "10000-01-01 00:00:00+00"]


async def test_out_of_range_next_run_at_values_are_rescheduled_alone_and_every_other_job_runs(
    db_dsn: str, sql: asyncpg.Connection
) -> None:
    for index, value in enumerate(OUT_OF_RANGE + NEVER_DUE):
        for following in (None, "infinity"):
            await sql.execute(
                "INSERT INTO scheduled_jobs (name, task_type, schedule, time_zone, next_run_at,"
                " following_run_at) VALUES ($1, 'default', 'cron 0 * * * *', $2,"
                " $3::text::timestamptz, $4::text::timestamptz)",
                f"odd{index}-{'planned' if following is None else 'plain'}",
                "America/New_York" if index % 2 else "UTC",
                value,
                following,
            )
    store = PostgresStore(db_dsn)
    async with running(store, batch_size=4, queue_capacity=20) as h:
        await sql.execute(  # due now, after the odd rows: they are claimed first
            "INSERT INTO scheduled_jobs (name, task_type, schedule, next_run_at) VALUES "
            "('good', 'default', 'every 1h', now()), ('good2', 'default', 'every 1h', now())"
        )
        await eventually_async(
            lambda: sql.fetchval(
                "SELECT count(*) = 2 FROM scheduled_jobs WHERE name LIKE 'good%'"
                " AND last_status = 'succeeded'"
            ),
            "the good jobs to succeed",
        )
        await eventually_async(
            lambda: sql.fetchval(
                "SELECT count(*) = 0 FROM scheduled_jobs WHERE next_run_at <= now()"
            ),
            "no row left due",
        )
        assert h.runner.health_problem() is None
        warnings = "\n".join(h.runner.health_warnings())
    assert {r.request.job for r in h.executor.started} == {"good", "good2"}
    assert (
        await sql.fetchval(
            "SELECT count(*) FROM job_runs WHERE job_id IN"
            " (SELECT id FROM scheduled_jobs WHERE name LIKE 'odd%')"
        )
        == 0
    )
    rescheduled = await sql.fetch(
        "SELECT name, next_run_at, last_error FROM scheduled_jobs WHERE name LIKE 'odd%'"
        " AND next_run_at > now() AND next_run_at < now() + interval '1 hour 1 minute'"
    )
    assert len(rescheduled) == 2 * len(OUT_OF_RANGE)  # on to the next hour, each
    for row in rescheduled:
        assert "out of range" in row["last_error"]
        assert row["name"] in warnings
    admin = PostgresStore(db_dsn)
    try:
        listed = await admin.admin.list_jobs()  # the administration reads every row too
    finally:
        await admin.close()
    assert len(listed) == 2 * len(OUT_OF_RANGE + NEVER_DUE) + 2
    assert "infinity" in jobs_table(listed)
