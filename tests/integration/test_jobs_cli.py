"""``runbroker jobs`` and ``runbroker migrate`` against a real database (argv in, exit code out)."""

from __future__ import annotations

import asyncio
import json

import asyncpg
import pytest

from daemon.pg.admin.commands import migrate_main
from daemon.pg.store.postgres import PostgresStore
from tests.integration.conftest import jobs, printed


async def test_migrate_reports_up_to_date(cli_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert await asyncio.to_thread(migrate_main, ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["applied"] == []
    assert out["version"] >= 2


async def test_add_list_and_json(
    cli_env: str, sql: asyncpg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await jobs("add", "extract", "--task", "e", "--every", "1h") == 0
    assert await jobs("add", "report", "--task", "r", "--every", "1h") == 0
    capsys.readouterr()
    code = await jobs(
        "add", "nightly", "--task", "backup", "--daily", "02:30", "--tz", "Europe/Berlin",
        "--payload", '{"bucket": "b1"}', "--depends-on", "extract", "--depends-on",
        "report:skip", "--max-attempts", "5", "--misfire", "skip", "--json",
    )  # fmt: skip
    assert code == 0
    added = json.loads(capsys.readouterr().out)
    assert added["schedule"] == "daily 02:30"
    assert added["depends_on"] == [
        {"job": "extract", "policy": "stop"},
        {"job": "report", "policy": "skip"},
    ]
    row = await sql.fetchrow("SELECT * FROM scheduled_jobs WHERE name = 'nightly'")
    assert (row["task_type"], row["time_zone"], row["max_attempts"]) == (
        "backup",
        "Europe/Berlin",
        5,
    )
    assert json.loads(row["payload"]) == {"bucket": "b1"}
    assert row["next_run_at"] > await sql.fetchval("SELECT now()")
    assert await jobs("add", "asap", "--task", "default", "--at", "now") == 0
    table = await printed(capsys, "list")
    assert "NEXT RUN" in table
    assert "nightly" in table
    assert "daily 02:30 (Europe/Berlin)" in table
    listed = json.loads(await printed(capsys, "list", "--json"))["jobs"]
    assert [j["name"] for j in listed] == ["asap", "extract", "nightly", "report"]
    assert listed[0]["next_run_at"] is not None


@pytest.mark.parametrize(
    "argv",
    [
        ["add", "x", "--task", "t", "--daily", "24:00"],
        ["add", "x", "--task", "t", "--every", "1m", "--tz", "Mars/Olympus"],
        ["add", "x", "--task", "t", "--cron", "61 * * * *"],
        ["add", "x", "--task", "t", "--every", "1m", "--payload", "{nope"],
        ["add", "x", "--task", "t", "--every", "1m", "--depends-on", "x"],
        ["add", "x", "--task", "t", "--every", "1m", "--depends-on", "y:sometimes"],
        ["add", "x", "--task", "t", "--at", "2001-01-01T00:00:00Z"],
        ["add", "x", "--task", "t", "--every", "1m", "--max-attempts", "0"],
        ["add", "x", "--task", "t", "--every", "1ms"],
        ["add", "x", "--task", "t", "--every", "49ms"],
        ["add", "x", "--task", "t", "--cron", "@every 10ms"],
        ["add", "x", "--task", "t"],
        ["add", "x", "--task", "t", "--every", "1m", "--daily", "03:00"],
        ["frobnicate"],
    ],
)
async def test_bad_input_exits_2_and_writes_nothing(
    cli_env: str, sql: asyncpg.Connection, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert await jobs(*argv) == 2
    assert capsys.readouterr().err.strip() != ""
    assert await sql.fetchval("SELECT count(*) FROM scheduled_jobs") == 0


async def test_unknown_jobs_exit_1_and_a_duplicate_add_is_refused_with_2(
    cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["remove", "ghost"], ["enable", "ghost"], ["run-now", "ghost"]):
        assert await jobs(*argv) == 1
        assert "no job named 'ghost'" in capsys.readouterr().err
    assert await jobs("history", "ghost", "--json") == 1
    assert json.loads(capsys.readouterr().out) == {"ok": False, "error": "no job named 'ghost'"}
    assert await jobs("add", "twice", "--task", "t", "--every", "1m") == 0
    assert await jobs("add", "twice", "--task", "t", "--every", "1m") == 2
    assert "already exists" in capsys.readouterr().err
    assert await jobs("add", "fast", "--task", "t", "--every", "50ms") == 0  # the floor itself


async def test_enable_disable_remove(cli_env: str, sql: asyncpg.Connection) -> None:
    assert await jobs("add", "j", "--task", "t", "--every", "1m") == 0
    assert await jobs("disable", "j") == 0
    assert await sql.fetchval("SELECT enabled FROM scheduled_jobs") is False
    assert await jobs("run-now", "j") == 1  # disabled jobs do not run
    assert await jobs("enable", "j") == 0
    assert await sql.fetchval("SELECT enabled FROM scheduled_jobs") is True
    assert await jobs("remove", "j") == 0
    assert await sql.fetchval("SELECT count(*) FROM scheduled_jobs") == 0


async def test_run_now_makes_it_due_and_notifies(cli_env: str, sql: asyncpg.Connection) -> None:
    assert await jobs("add", "later", "--task", "t", "--daily", "03:00") == 0
    store = PostgresStore(cli_env)
    heard: asyncio.Queue[str] = asyncio.Queue()
    sub = await store.listen(heard.put_nowait)
    try:
        assert await jobs("run-now", "later") == 0
        assert await asyncio.wait_for(heard.get(), 5.0) in {"jobs", "run-now"}
    finally:
        await sub.close()
        await store.close()
    assert await sql.fetchval("SELECT next_run_at <= now() FROM scheduled_jobs")


async def test_history_shows_runs(
    cli_env: str, sql: asyncpg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await jobs("add", "h", "--task", "t", "--every", "1m") == 0
    await sql.execute(
        "INSERT INTO job_runs (job_id, scheduled_for, attempt, status, started_at, finished_at,"
        " error) SELECT id, now(), 1, 'failed', now() - interval '2 seconds', now(), 'exit 3'"
        " FROM scheduled_jobs"
    )
    out = await printed(capsys, "history", "h")
    assert "failed" in out
    assert "2000ms" in out
    (run,) = json.loads(await printed(capsys, "history", "--json", "--limit", "5"))["runs"]
    assert (run["job"], run["status"], run["error"], run["duration_ms"]) == (
        "h",
        "failed",
        "exit 3",
        2000,
    )


async def test_without_a_database_url_it_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("RUNBROKER_DATABASE_URL", raising=False)
    assert await jobs("list") == 2
    assert "RUNBROKER_DATABASE_URL" in capsys.readouterr().err


async def test_unreachable_database_exits_1_without_showing_the_dsn(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RUNBROKER_DATABASE_URL", "postgresql://u:s3cret@127.0.0.1:1/x")
    assert await jobs("list") == 1
    err = capsys.readouterr().err
    assert "database unreachable" in err
    assert "s3cret" not in err


async def test_add_writes_the_occurrence_after_the_next(
    cli_env: str, sql: asyncpg.Connection
) -> None:
    assert await jobs("add", "often", "--task", "t", "--every", "7m") == 0
    assert await jobs("add", "once", "--task", "t", "--at", "2099-01-02T03:04:05Z") == 0
    rows = {
        r["name"]: r
        for r in await sql.fetch(
            "SELECT name, next_run_at, following_run_at::text AS following FROM scheduled_jobs"
        )
    }
    often = rows["often"]
    assert often["following"] == (
        await sql.fetchval(
            "SELECT ($1::timestamptz + interval '7 minutes')::text", often["next_run_at"]
        )
    )
    assert rows["once"]["following"] == "infinity"


async def test_list_shows_times_in_the_jobs_zone_and_a_retrys_own_time(
    cli_env: str, sql: asyncpg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    at = ["--at", "2027-01-01T09:00:00", "--tz", "Europe/Berlin"]
    added = await printed(capsys, "add", "berlin", "--task", "t", *at)
    assert "at 2027-01-01T09:00:00+01:00 (Europe/Berlin)" in added
    assert "next run 2027-01-01 09:00:00+01:00 (2027-01-01T08:00:00Z)" in added
    assert (
        await jobs("add", "flaky", "--task", "t", "--daily", "06:00", "--tz", "America/New_York")
        == 0
    )
    # As the runner leaves a failed attempt: the occurrence kept, the retry due later.
    await sql.execute(
        "UPDATE scheduled_jobs SET scheduled_for = '2026-07-01T10:00:00Z', attempt = 1, "
        "next_run_at = '2026-07-01T10:05:00Z', last_status = 'failed' WHERE name = 'flaky'"
    )
    lines = {line.split()[0]: line for line in (await printed(capsys, "list")).splitlines()}
    assert "at 2027-01-01T09:00:00+01:00 (Europe/Berlin)" in lines["berlin"]
    assert "2027-01-01 09:00:00+01:00" in lines["berlin"]
    assert "retrying" in lines["flaky"]
    assert "2026-07-01 06:05:00-04:00" in lines["flaky"]  # the retry, in New York time
    assert "06:00:00" not in lines["flaky"]  # not the occurrence it retries
    assert "failed (attempt 1)" in lines["flaky"]
    listed = {j["name"]: j for j in json.loads(await printed(capsys, "list", "--json"))["jobs"]}
    assert listed["berlin"]["next_run_at"] == "2027-01-01T08:00:00Z"  # JSON stays UTC
    assert listed["flaky"]["next_run_at"] == "2026-07-01T10:05:00Z"
    assert listed["flaky"]["scheduled_for"] == "2026-07-01T10:00:00Z"


async def test_history_shows_run_times_in_the_jobs_zone_as_list_does(
    cli_env: str, sql: asyncpg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    ny = ["--daily", "06:00", "--tz", "America/New_York"]
    assert await jobs("add", "ny", "--task", "t", *ny) == 0
    assert await jobs("add", "utc", "--task", "t", "--daily", "06:00") == 0
    await sql.execute(
        "INSERT INTO job_runs (job_id, scheduled_for, attempt, status, started_at, finished_at)"
        " SELECT id, '2026-07-01T10:00:00Z', 1, 'succeeded', '2026-07-01T10:00:01Z',"
        " '2026-07-01T10:00:02Z' FROM scheduled_jobs"
    )
    lines = {line.split()[1]: line for line in (await printed(capsys, "history")).splitlines()[1:]}
    assert "2026-07-01 06:00:01-04:00" in lines["ny"]  # New York time, with its offset
    assert "2026-07-01 10:00:01Z" in lines["utc"]
    runs = {r["job"]: r for r in json.loads(await printed(capsys, "history", "--json"))["runs"]}
    assert runs["ny"]["started_at"] == "2026-07-01T10:00:01Z"  # JSON stays UTC


@pytest.mark.parametrize(
    ("argv", "stored"),
    [
        (["--schedule", "*/5 * * * *"], "cron */5 * * * *"),
        (["--schedule", "@every 5m"], "every 5m"),
        (["--schedule", "@daily"], "cron @daily"),
        (["--schedule", "daily 02:30"], "daily 02:30"),
        (["--cron", "*/5 * * * *"], "cron */5 * * * *"),
    ],
)
async def test_add_takes_a_schedule_as_cron_users_write_it(
    cli_env: str, sql: asyncpg.Connection, argv: list[str], stored: str
) -> None:
    assert await jobs("add", "x", "--task", "t", *argv) == 0
    assert await sql.fetchval("SELECT schedule FROM scheduled_jobs WHERE name = 'x'") == stored
