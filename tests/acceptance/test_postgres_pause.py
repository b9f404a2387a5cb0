"""Acceptance: ``runbroker jobs pause`` and ``jobs resume`` against a real daemon (PID 1) that
runs the database's jobs. Paused, it claims nothing, and ``status`` says so; resumed, it runs
what fell due meanwhile."""

from __future__ import annotations

import json

from tests.support.eventually import eventually
from tests.support.harness import Daemon, Workdir
from tests.support.pgsupport import cli, jobs, value

TASKS = """
[tasks.noop]
command = ["true"]
"""


def _database(daemon: Daemon) -> dict[str, object]:
    database: dict[str, object] = json.loads(daemon.exec("status", "--json").stdout)["database"]
    return database


def test_a_paused_daemon_claims_nothing_and_runs_the_job_once_resumed(dsn: str) -> None:
    paused = cli(dsn, "jobs", "pause")
    assert paused.returncode == 0, paused.stderr
    jobs(dsn, "add", "due", "--task", "noop", "--at", "now")
    work = Workdir()
    env = {"RUNBROKER_DATABASE_URL": dsn, "RUNBROKER_LEASE": "3s", "RUNBROKER_GRACE": "500ms"}
    daemon = Daemon(work.path, env=env, tasks_toml=TASKS)
    try:
        daemon.log.wait_for("pgrunner.started")
        # The runner reads the switches in the turn of its claim loop that tried a claim first,
        # so once status shows the pause, a claim of the due job has been refused.
        eventually(lambda: _database(daemon).get("paused"), "the daemon to see the pause")
        assert _database(daemon)["claiming"] is False
        assert "paused (scheduler.paused), not claiming" in daemon.exec("status").stdout
        assert value(dsn, "SELECT count(*) FROM job_runs") == 0
        listed = cli(dsn, "jobs", "list")
        assert "the runner is paused (scheduler.paused)" in listed.stdout
        resumed = cli(dsn, "jobs", "resume", "--json")
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["scheduler"]["claiming"] is True
        eventually(
            lambda: value(dsn, "SELECT last_status FROM scheduled_jobs WHERE name = 'due'"),
            "the job due while paused to run",
        )
        assert value(dsn, "SELECT last_status FROM scheduled_jobs") == "succeeded"
        daemon.log.wait_for("scheduler.resumed")
        assert _database(daemon)["claiming"] is True
    finally:
        daemon.stop()
        work.cleanup()
