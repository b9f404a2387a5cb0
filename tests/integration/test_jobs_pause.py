"""``runbroker jobs pause`` and ``jobs resume`` against a real database and a running runner: a
paused runner claims nothing (a run in progress still finishes and is recorded), and claims
again at the resume; both are idempotent, runner-wide, and shown by ``jobs list``."""

from __future__ import annotations

import asyncio
import json

import asyncpg
import pytest
from structlog.testing import capture_logs

from daemon.face.status_text import render_status
from tests.integration.conftest import CountingStore, jobs
from tests.support.eventually import eventually_async
from tests.support.pgfakes import running


async def said(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> tuple[str, str]:
    """What ``runbroker jobs ARGV`` alone printed on stdout and stderr, once it exited ``code``
    (the log events of a runner in this loop meanwhile are captured, not printed among them)."""
    capsys.readouterr()
    with capture_logs():
        assert await jobs(*argv) == code
    out = capsys.readouterr()
    return out.out, out.err


async def status_of(sql: asyncpg.Connection, name: str) -> str | None:
    status: str | None = await sql.fetchval(
        "SELECT last_status FROM scheduled_jobs WHERE name = $1", name
    )
    return status


async def test_a_paused_runner_claims_nothing_until_resumed(
    cli_env: str, sql: asyncpg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await jobs("add", "long", "--task", "default", "--at", "now") == 0
    store = CountingStore(cli_env)
    gate = asyncio.Event()
    async with running(store, gate=gate, poll_interval_s=3600.0) as h:
        await eventually_async(lambda: len(h.executor.started) == 1, "the first run to start")
        out, _ = await said(capsys, "pause")
        assert out.startswith("paused: no replica claims jobs")
        await eventually_async(lambda: h.runner.status()["paused"], "the runner to see the pause")
        assert not h.runner.status()["claiming"]
        shown = render_status({"database": dict(h.runner.status())})
        assert "paused (scheduler.paused), not claiming" in shown
        assert await jobs("add", "later", "--task", "default", "--at", "now") == 0
        turns = store.turns
        gate.set()  # the run in progress finishes, and is recorded, while paused
        await eventually_async(
            lambda: status_of(sql, "long"), "the run in progress to be recorded", timeout_s=5.0
        )
        assert await status_of(sql, "long") == "succeeded"
        await eventually_async(lambda: store.turns > turns, "the runner to look again")
        turns = store.turns
        await sql.execute("SELECT pg_notify('runbroker', 'jobs')")
        await eventually_async(lambda: store.turns > turns, "the runner to look once more")
        assert await sql.fetchval("SELECT count(*) FROM job_runs") == 1  # "later" not claimed
        listed = await said(capsys, "list")
        assert "the runner is paused (scheduler.paused)" in listed[0]
        out, _ = await said(capsys, "resume")
        assert out.startswith("resumed:")
        await eventually_async(
            lambda: status_of(sql, "later"), "the job due while paused to run", timeout_s=5.0
        )  # a NOTIFY woke the runner: its poll is an hour away
        assert await status_of(sql, "later") == "succeeded"
        assert h.runner.status()["claiming"]


async def test_pause_and_resume_are_idempotent_and_say_so(
    cli_env: str, sql: asyncpg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    setting = "SELECT value FROM runbroker_settings WHERE key = 'scheduler.paused'"
    out, _ = await said(capsys, "resume")
    assert out == "not paused, nothing changed: replicas claim due jobs\n"
    paused = json.loads((await said(capsys, "pause", "--json"))[0])
    assert paused == {
        "ok": True,
        "changed": True,
        "scheduler": {"paused": True, "enabled": True, "claiming": False},
    }
    assert await sql.fetchval(setting) == "true"
    again = json.loads((await said(capsys, "pause", "--json"))[0])
    assert (again["changed"], again["scheduler"]["paused"]) == (False, True)
    out, _ = await said(capsys, "pause")
    assert out.startswith("already paused, nothing changed:")
    listed = json.loads((await said(capsys, "list", "--json"))[0])
    assert listed == {"jobs": [], "scheduler": {"paused": True, "enabled": True, "claiming": False}}
    resumed = json.loads((await said(capsys, "resume", "--json"))[0])
    assert (resumed["changed"], resumed["scheduler"]["claiming"]) == (True, True)
    assert await sql.fetchval(setting) == "false"
    out, _ = await said(capsys, "list")
    assert out == "no jobs\n"  # nothing said of the switches while jobs are claimed


async def test_pause_writes_the_setting_whatever_the_row_held(
    cli_env: str, sql: asyncpg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    await sql.execute("DELETE FROM runbroker_settings WHERE key = 'scheduler.paused'")
    out, _ = await said(capsys, "pause")
    assert out.startswith("paused:")
    await sql.execute(
        "UPDATE runbroker_settings SET value = '\" YES \"' WHERE key = 'scheduler.paused'"
    )  # true as the runner reads it
    out, _ = await said(capsys, "pause")
    assert out.startswith("already paused")
    assert await sql.fetchval(
        "SELECT value FROM runbroker_settings WHERE key = 'scheduler.paused'"
    ) == ("true")


async def test_resume_warns_when_the_scheduler_is_disabled_as_well(
    cli_env: str, sql: asyncpg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    await sql.execute(
        "UPDATE runbroker_settings SET value = 'false' WHERE key = 'scheduler.enabled'"
    )
    assert await jobs("pause") == 0
    out, err = await said(capsys, "resume")
    assert out.startswith("resumed:")
    assert err == (
        "runbroker jobs: warning: scheduler.enabled is false in runbroker_settings: "
        "no replica claims jobs\n"
    )
    listed, _ = await said(capsys, "list")
    assert listed.splitlines()[-1] == (
        "scheduler.enabled is false in runbroker_settings: no replica claims jobs"
    )


async def test_pause_and_resume_are_runner_wide_and_name_disable_for_one_job(
    cli_env: str, sql: asyncpg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    for command, instead in (("pause", "disable"), ("resume", "enable")):
        out, err = await said(capsys, command, "sync", "--json", code=2)
        assert f"for one job use `runbroker jobs {instead} sync`" in err
        assert json.loads(out)["ok"] is False
    assert await sql.fetchval(
        "SELECT value FROM runbroker_settings WHERE key = 'scheduler.paused'"
    ) == ("false")  # nothing written
