"""Acceptance: real ``runbroker run`` daemons (PID 1 each) sharing one PostgreSQL database.

Each test gets a fresh database (``runbroker migrate`` run on it), dropped afterwards. The
database is watched with bounded polls (a deadline each); the daemons through their logs.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from tests.support.eventually import eventually
from tests.support.harness import Daemon, Workdir
from tests.support.pgsupport import cli, fresh_database, jobs, query, restart_server, value

TASKS = """
[tasks.noop]
command = ["true"]

[tasks.fail]
command = ["false"]

[tasks.first_attempt_hangs]
command = ["sh", "-c", "if [ \\"$RUNBROKER_ATTEMPT\\" = 1 ]; then sleep 300; fi"]

[tasks.slow]
command = ["sleep", "4"]

[tasks.sleeper]
command = ["sleep", "300"]
"""


@pytest.fixture
def replicas(dsn: str) -> Iterator[Callable[..., Daemon]]:
    """Start daemons on the test database, each in its own directory; all stopped at the end."""
    started: list[tuple[Daemon, Workdir]] = []

    def start(**env: str) -> Daemon:
        work = Workdir()
        # lease fencing: every grace at most half the lease (a short one leaves room for
        # renewals slowed by a loaded machine)
        settings = {
            "RUNBROKER_DATABASE_URL": dsn,
            "RUNBROKER_LEASE": "3s",
            "RUNBROKER_GRACE": "500ms",
        }
        settings.update(env)
        daemon = Daemon(work.path, env=settings, tasks_toml=TASKS)
        daemon.log.wait_for("pgrunner.started")
        started.append((daemon, work))
        return daemon

    try:
        yield start
    finally:
        for daemon, work in started:
            daemon.stop()
            work.cleanup()


def test_three_replicas_run_every_occurrence_exactly_once(
    dsn: str, replicas: Callable[..., Daemon]
) -> None:
    # Nothing here waits for a lease to end: a long one keeps a loaded machine's slow renewals
    # from fencing runs (a fenced run is retried: two runs of one occurrence, not one).
    for _ in range(3):
        replicas(RUNBROKER_LEASE="15s")
    query(
        dsn,
        "INSERT INTO scheduled_jobs (name, task_type, schedule, next_run_at) "
        "SELECT 'burst' || g, 'noop', 'at 2000-01-01T00:00:00Z', now() "
        "FROM generate_series(1, 100) g",
    )
    jobs(dsn, "add", "ticker", "--task", "noop", "--every", "1s")
    eventually(
        lambda: value(dsn, "SELECT count(*) FROM job_runs r JOIN scheduled_jobs j "
                      "ON j.id = r.job_id WHERE j.name = 'ticker'") >= 20,
        "20 ticks",
        timeout_s=60,
    )  # fmt: skip
    jobs(dsn, "disable", "ticker")
    eventually(
        lambda: value(dsn, "SELECT count(*) FROM job_runs WHERE finished_at IS NULL") == 0,
        "every run finished",
    )
    burst = query(
        dsn,
        "SELECT j.name, count(r.id) AS runs, bool_and(r.status = 'succeeded') AS ok "
        "FROM scheduled_jobs j LEFT JOIN job_runs r ON r.job_id = j.id "
        "WHERE j.name LIKE 'burst%' GROUP BY j.name",
    )
    assert len(burst) == 100
    odd = [dict(row) for row in burst if not (row["runs"] == 1 and row["ok"])]
    assert odd == [], query(
        dsn,
        "SELECT j.name, r.attempt, r.status, r.owner, r.error, r.started_at, r.finished_at "
        "FROM job_runs r JOIN scheduled_jobs j ON j.id = r.job_id "
        "WHERE j.name = ANY($1::text[]) ORDER BY j.name, r.id",
        [row["name"] for row in odd],
    ) + query(
        dsn,
        "SELECT name, enabled, next_run_at, now() AS db_now, scheduled_for, attempt, "
        "lease_owner, last_status, last_error FROM scheduled_jobs WHERE name = ANY($1::text[])",
        [row["name"] for row in odd],
    )
    ticks = query(
        dsn,
        "SELECT r.scheduled_for, r.attempt, r.status, r.owner FROM job_runs r "
        "JOIN scheduled_jobs j ON j.id = r.job_id WHERE j.name = 'ticker' "
        "ORDER BY r.scheduled_for",
    )
    # a loaded machine may start a tick late, past the next one: it then runs once for both,
    # and a row of attempt 0 records the occurrences it passed over
    ran = [t for t in ticks if t["attempt"] != 0]
    times = [t["scheduled_for"] for t in ran]
    assert len(times) == len(set(times))  # no occurrence ran twice
    assert {(t["attempt"], t["status"]) for t in ran} == {(1, "succeeded")}
    assert {t["status"] for t in ticks if t["attempt"] == 0} <= {"coalesced"}
    gaps = [
        later - earlier
        for earlier, later in itertools.pairwise([t["scheduled_for"] for t in ticks])
    ]
    assert all(gap % timedelta(seconds=1) == timedelta(0) for gap in gaps)  # on the grid
    owners = value(dsn, "SELECT count(DISTINCT owner) FROM job_runs")
    assert owners >= 2


def test_a_killed_replicas_run_is_abandoned_and_retried_on_another(
    dsn: str, replicas: Callable[..., Daemon]
) -> None:
    doomed = replicas()
    jobs(dsn, "add", "fragile", "--task", "first_attempt_hangs", "--at", "now")
    eventually(
        lambda: value(dsn, "SELECT status FROM job_runs WHERE attempt = 1") == "running",
        "attempt 1 running",
    )
    survivor = replicas()
    os.kill(doomed.pid, signal.SIGKILL)  # PID 1 of its namespace: everything in it dies
    killed_at = time.monotonic()
    eventually(
        lambda: value(dsn, "SELECT last_status FROM scheduled_jobs") == "succeeded",
        "the retry to succeed",
    )
    assert time.monotonic() - killed_at < 3 * 3.0  # within about one 3 s lease (+ slack)
    runs = query(dsn, "SELECT attempt, status, error FROM job_runs ORDER BY attempt")
    assert [(r["attempt"], r["status"]) for r in runs] == [(1, "abandoned"), (2, "succeeded")]
    assert "lease" in runs[0]["error"]
    survivor.log.wait_for("job.abandoned")


def test_database_restart_mid_run_is_survived_and_the_result_recorded(
    dsn: str, replicas: Callable[..., Daemon]
) -> None:
    daemon = replicas(RUNBROKER_LEASE="60s")
    jobs(dsn, "add", "steady", "--task", "slow", "--at", "now")
    eventually(lambda: value(dsn, "SELECT status FROM job_runs") == "running", "the run to start")
    restart_server()  # the server the tests use, wherever it runs (see there)
    eventually(
        lambda: value(dsn, "SELECT status FROM job_runs") == "succeeded",
        "the result to be recorded",
        timeout_s=60,
    )
    daemon.log.wait_for("db.disconnected")
    daemon.log.wait_for("db.reconnected")
    assert daemon.proc.poll() is None  # still running
    # LISTEN is back: a new job runs promptly.
    jobs(dsn, "add", "after", "--task", "noop", "--at", "now")
    eventually(
        lambda: (
            value(dsn, "SELECT last_status FROM scheduled_jobs WHERE name = 'after'") == "succeeded"
        ),
        "a job added after the restart",
    )


def test_paused_scheduler_claims_nothing_until_resumed(
    dsn: str, replicas: Callable[..., Daemon]
) -> None:
    daemon = replicas()
    query(dsn, "UPDATE runbroker_settings SET value = 'true' WHERE key = 'scheduler.paused'")
    daemon.log.wait_for("scheduler.paused")
    jobs(dsn, "add", "held", "--task", "noop", "--at", "now")
    resumed_at = value(dsn, "SELECT clock_timestamp()")
    query(dsn, "UPDATE runbroker_settings SET value = 'false' WHERE key = 'scheduler.paused'")
    eventually(
        lambda: value(dsn, "SELECT last_status FROM scheduled_jobs") == "succeeded",
        "the job to run once resumed",
    )
    assert value(dsn, "SELECT claimed_at FROM job_runs") >= resumed_at
    daemon.log.wait_for("scheduler.resumed")


def settled_rows(dsn: str, count: int) -> dict[str, tuple[Any, Any]]:
    """Each job's last status and error, once ``count`` jobs have a result."""
    eventually(
        lambda: (
            value(dsn, "SELECT count(*) FROM scheduled_jobs WHERE last_status IS NOT NULL") == count
        ),
        f"{count} jobs to have a result",
    )
    return {
        r["name"]: (r["last_status"], r["last_error"])
        for r in query(dsn, "SELECT name, last_status, last_error FROM scheduled_jobs")
    }


def test_dependency_chain_with_both_policies(dsn: str, replicas: Callable[..., Daemon]) -> None:
    replicas()
    jobs(dsn, "add", "extract", "--task", "fail", "--daily", "03:00", "--max-attempts", "1")
    jobs(dsn, "add", "load", "--task", "noop", "--daily", "03:00", "--depends-on", "extract")
    jobs(dsn, "add", "report", "--task", "noop", "--daily", "03:00",
         "--depends-on", "extract:skip")  # fmt: skip
    jobs(dsn, "add", "archive", "--task", "noop", "--daily", "03:00", "--depends-on", "load")
    # One due time for all: the dependants wait for "extract", which runs with them.
    query(dsn, "UPDATE scheduled_jobs SET next_run_at = date_trunc('second', now())")
    rows = settled_rows(dsn, 4)
    assert rows["extract"][0] == "failed"
    assert rows["load"] == ("failed", "dependency extract failed")
    assert rows["report"] == ("succeeded", None)
    assert rows["archive"] == ("failed", "dependency load failed")


def test_a_row_nested_too_deep_fails_alone_and_health_says_so(
    dsn: str, replicas: Callable[..., Daemon]
) -> None:
    daemon = replicas()
    query(
        dsn,
        "INSERT INTO scheduled_jobs (name, task_type, schedule, payload) VALUES "
        "('deep', 'noop', 'every 1h', (repeat('[', 3000) || repeat(']', 3000))::jsonb)",
    )
    jobs(dsn, "run-now", "deep")
    jobs(dsn, "add", "fine", "--task", "noop", "--every", "1h")
    jobs(dsn, "run-now", "fine")
    rows = settled_rows(dsn, 2)
    assert rows["fine"] == ("succeeded", None)
    assert rows["deep"][0] == "failed"
    assert "nested too deeply" in rows["deep"][1]
    listed = cli(dsn, "jobs", "list")
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    deep_line = next(line for line in listed.stdout.splitlines() if line.startswith("deep "))
    assert "failed" in deep_line
    health = daemon.exec("health")
    assert health.returncode == 0  # one bad row is no reason to restart the daemon ...
    assert "warning: database job 'deep' cannot run" in health.stdout  # ... but it is said
    assert "nested too deeply" in health.stdout


def test_readiness_says_schema_not_migrated_until_migrate_runs() -> None:
    with fresh_database(migrated=False) as url:
        work = Workdir()
        daemon = Daemon(
            work.path,
            env={"RUNBROKER_DATABASE_URL": url, "RUNBROKER_LEASE": "3s", "RUNBROKER_GRACE": "1s"},
            tasks_toml=TASKS,
        )  # fmt: skip
        try:
            daemon.log.wait_for("pgrunner.started")
            unhealthy: list[subprocess.CompletedProcess[str]] = []

            def says_not_migrated() -> bool:
                unhealthy[:] = [daemon.exec("health", "--ready")]
                return "schema not migrated" in unhealthy[0].stdout

            eventually(says_not_migrated, "readiness to say the schema is not migrated")
            assert unhealthy[0].returncode == 1
            assert "runbroker migrate" in unhealthy[0].stdout
            assert daemon.exec("health").returncode == 0  # live: a restart would not migrate
            assert cli(url, "migrate").returncode == 0
            eventually(
                lambda: daemon.exec("health", "--ready").returncode == 0, "ready once migrated"
            )
            jobs(url, "add", "after", "--task", "noop", "--at", "now")
            eventually(
                lambda: value(url, "SELECT last_status FROM scheduled_jobs") == "succeeded",
                "a job to run once migrated",
            )
        finally:
            daemon.stop()
            work.cleanup()


def broker_run_id(daemon: Daemon, where: str, trigger: str) -> str:
    """The broker's id of the run of ``trigger`` that is current ("current") or waiting."""
    found: list[str] = []

    def look() -> bool:
        status = json.loads(daemon.exec("status", "--json").stdout)
        runs = [status["current"]] if where == "current" else status["waiting"]
        found[:] = [r["id"] for r in runs if r is not None and r["trigger"] == trigger]
        return bool(found)

    eventually(look, f"a {where} run of {trigger}")
    return found[0]


def cancel_recorded(daemon: Daemon, dsn: str, run_id: str) -> None:
    """Cancels the broker's run ``run_id`` and waits for the job's row to say cancelled."""
    done = daemon.exec("cancel", run_id)
    assert done.returncode == 0, done.stderr
    eventually(
        lambda: value(dsn, "SELECT last_status FROM scheduled_jobs") == "cancelled",
        "the cancel to be recorded",
    )


def test_cancelling_a_running_database_job_records_it_cancelled_and_does_not_retry(
    dsn: str, replicas: Callable[..., Daemon]
) -> None:
    daemon = replicas()
    jobs(dsn, "add", "long", "--task", "sleeper", "--at", "now", "--max-attempts", "3")
    eventually(lambda: value(dsn, "SELECT status FROM job_runs") == "running", "the run to start")
    run_id = broker_run_id(daemon, "current", "schedule")
    cancel_recorded(daemon, dsn, run_id)
    job = query(dsn, "SELECT next_run_at, scheduled_for, attempt, lease_owner FROM scheduled_jobs")
    assert dict(job[0]) == {
        "next_run_at": None, "scheduled_for": None, "attempt": 0, "lease_owner": None
    }  # fmt: skip
    runs = query(dsn, "SELECT attempt, status, error FROM job_runs")
    assert [(r["attempt"], r["status"]) for r in runs] == [(1, "cancelled")]
    assert "cancelled" in runs[0]["error"]
    assert daemon.log.wait_for("job.finished")[0]["status"] == "cancelled"


def test_cancelling_a_queued_database_job_records_it_and_moves_to_the_next_occurrence(
    dsn: str, replicas: Callable[..., Daemon]
) -> None:
    daemon = replicas()
    blocker = daemon.popen("trigger", "sleeper")
    try:
        broker_run_id(daemon, "current", "external")
        jobs(dsn, "add", "hourly", "--task", "noop", "--every", "1h")
        jobs(dsn, "run-now", "hourly")
        run_id = broker_run_id(daemon, "waiting", "schedule")
        cancel_recorded(daemon, dsn, run_id)
        runs = query(dsn, "SELECT scheduled_for, attempt, status, started_at FROM job_runs")
        assert [(r["attempt"], r["status"], r["started_at"]) for r in runs] == [
            (1, "cancelled", None)
        ]
        job = query(dsn, "SELECT next_run_at, attempt, lease_owner FROM scheduled_jobs")[0]
        assert job["next_run_at"] == runs[0]["scheduled_for"] + timedelta(hours=1)
        assert (job["attempt"], job["lease_owner"]) == (0, None)
        status = json.loads(daemon.exec("status", "--json").stdout)
        assert status["waiting"] == []  # not released and claimed again
        # The database run's log: queued, cancelled and one done, each naming the run, its
        # task and trigger, and the job.
        for kind in ("run.queued", "run.cancelled", "run.done"):
            lines = daemon.log.wait_for(kind, lambda line: line.get("run_id") == run_id)
            assert len(lines) == 1, (kind, lines)
            assert (lines[0]["task"], lines[0]["trigger"]) == ("noop", "schedule"), kind
            assert (lines[0]["job"], lines[0]["attempt"]) == ("hourly", "1"), kind
        assert lines[0]["reason"] == "cancelled by request"  # the run.done line's
    finally:
        blocker.kill()
        blocker.wait()


def test_job_finished_names_the_database_run_and_the_brokers_run_apart(
    dsn: str, replicas: Callable[..., Daemon]
) -> None:
    daemon = replicas()
    jobs(dsn, "add", "once", "--task", "noop", "--at", "now")
    (finished,) = daemon.log.wait_for("job.finished")
    (done,) = daemon.log.wait_for("run.done", lambda line: line.get("job") == "once")
    assert finished["job_run_id"] == value(dsn, "SELECT id FROM job_runs")
    assert finished["run_id"] == done["run_id"]  # one key, one meaning: the broker's run id
    assert isinstance(finished["run_id"], str)


def test_removing_a_job_mid_run_stops_its_run_saying_the_job_was_removed_once(
    dsn: str, replicas: Callable[..., Daemon]
) -> None:
    daemon = replicas()  # the only replica: no other one could have taken the lease
    jobs(dsn, "add", "long", "--task", "sleeper", "--at", "now")
    eventually(lambda: value(dsn, "SELECT status FROM job_runs") == "running", "the run to start")
    jobs(dsn, "remove", "long")
    (done,) = daemon.log.wait_for("run.done", lambda line: line.get("job") == "long")
    assert done["reason"] == "cancelled: the job was removed"
    daemon.log.wait_for("job.finished", lambda line: line.get("job") == "long")
    assert len(daemon.log.events("job.removed")) == 1
    assert daemon.log.events("job.lease_lost") == []
