"""Acceptance: the first minutes of a new user of the database jobs, as the README shows them
(``migrate``, ``jobs add``, ``jobs list``, ``jobs history``), read the truth of the rows."""

from __future__ import annotations

import json

from tests.support.pgsupport import cli, jobs, query


def test_a_new_job_is_scheduled_with_nothing_run_yet(dsn: str) -> None:
    jobs(dsn, "add", "x", "--task", "t", "--every", "1m")
    listed = cli(dsn, "jobs", "list")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split()[3:] == ["STATE", "NEXT", "RUN", "LAST", "STATUS"]
    assert row.split()[5] == "scheduled"
    assert row.endswith("Z  -")  # the next run, then no last status
    (job,) = json.loads(cli(dsn, "jobs", "list", "--json").stdout)["jobs"]
    assert (job["state"], job["scheduled_for"], job["last_run_at"], job["last_status"]) == (
        "scheduled",
        None,
        None,
        None,
    )


def test_a_run_that_never_started_has_no_start_and_no_duration(dsn: str) -> None:
    jobs(dsn, "add", "x", "--task", "t", "--every", "1m")
    query(
        dsn,
        "INSERT INTO job_runs (job_id, scheduled_for, attempt, status) "
        "SELECT id, now(), 1, 'queued' FROM scheduled_jobs",
    )
    history = cli(dsn, "jobs", "history")
    assert history.returncode == 0, history.stderr
    row = history.stdout.splitlines()[1].split()
    assert row[1:] == ["x", "queued", "1", "-", "-"]
    (run,) = json.loads(cli(dsn, "jobs", "history", "--json").stdout)["runs"]
    assert (run["started_at"], run["finished_at"], run["duration_ms"]) == (None, None, None)
