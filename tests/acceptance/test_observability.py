"""Metrics, health and status as operators see them, from the real daemon."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.support.eventually import eventually
from tests.support.harness import Daemon
from tests.support.pgsupport import ADMIN_DSN, cli, database_url, jobs, query, value

StartDaemon = Callable[..., Daemon]

TASKS = """
[tasks.ok]
command = ["true"]
[tasks.fail]
command = ["false"]
[tasks.hourly]
command = ["true"]
schedule = "cron 0 * * * *"
"""


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_metrics_move_with_real_runs(start_daemon: StartDaemon, workdir: Path) -> None:
    daemon = start_daemon(tasks_toml=TASKS, env={"RUNBROKER_METRICS_ADDR": "127.0.0.1:0"})
    port = daemon.log.wait_for("metrics.listening")[0]["port"]
    before = _scrape(port)
    key = (
        "runbroker_runs_total",
        (("outcome", "succeeded"), ("task", "ok"), ("trigger", "external")),
    )
    # Every task's series are there from the start, at zero, so that an alert on the first
    # failure or on a missing success can fire.
    for task in ("ok", "fail", "hourly"):
        for trigger in ("external", "tick", "schedule"):
            for outcome in ("succeeded", "failed", "timed_out", "cancelled"):
                labels = (("outcome", outcome), ("task", task), ("trigger", trigger))
                assert before[("runbroker_runs_total", labels)] == 0
        for name in ("last_success", "last_failure"):
            assert before[(f"runbroker_{name}_timestamp_seconds", (("task", task),))] == 0
        assert before[("runbroker_run_duration_seconds_count", (("task", task),))] == 0
    assert before[("runbroker_runs_in_flight", ())] == 0
    next_fire = before[("runbroker_next_fire_timestamp_seconds", (("task", "hourly"),))]
    assert time.time() < next_fire <= time.time() + 3600
    assert before[("runbroker_queue_depth", ())] == 0
    assert daemon.exec("trigger", "ok").returncode == 0
    assert daemon.exec("trigger", "ok").returncode == 0
    assert daemon.exec("trigger", "fail").returncode == 1
    after = _scrape(port)
    assert after[key] == 2
    failed = (
        "runbroker_runs_total",
        (("outcome", "failed"), ("task", "fail"), ("trigger", "external")),
    )
    assert after[failed] == 1
    assert after[("runbroker_run_duration_seconds_count", (("task", "ok"),))] == 2
    assert after[("runbroker_last_success_timestamp_seconds", (("task", "ok"),))] > 0
    assert after[("runbroker_last_success_timestamp_seconds", (("task", "fail"),))] == 0
    assert after[("runbroker_last_failure_timestamp_seconds", (("task", "fail"),))] > 0
    assert after[("runbroker_last_failure_timestamp_seconds", (("task", "ok"),))] == 0
    assert after[("runbroker_queue_rejections_total", (("reason", "run queue is full"),))] == 0
    assert after[("runbroker_db_up", ())] == 0


def test_status_json_shape(start_daemon: StartDaemon, workdir: Path) -> None:
    daemon = start_daemon(tasks_toml=TASKS)
    assert daemon.exec("trigger", "ok").returncode == 0
    status = json.loads(daemon.exec("status", "--json").stdout)
    assert set(status) == {
        "event",
        "ok",
        "pid",
        "reaper",
        "uptime_s",
        "queue",
        "current",
        "waiting",
        "recent",
        "ticks",
        "slots",
        "journal",
        "database",
        "reload",
    }
    assert status["reload"] == {
        "tasks_file": str(workdir / "tasks.toml"),
        "watch": "inotify",
        "last_at": None,
        "last_source": None,
        "last_ok": None,
        "last_changes": None,
        "last_error": None,
        "last_failed_at": None,
    }
    assert set(status["journal"]) == {
        "bytes",
        "runs",
        "run_bytes_max",
        "history_runs_max",
        "history_bytes_max",
    }
    assert status["journal"]["runs"] == 1  # the run of `ok`, which printed nothing
    assert set(status["queue"]) == {
        "capacity",
        "waiting",
        "accepted",
        "rejected_full",
        "rejected_closed",
        "finished",
        "closed",
    }
    assert status["pid"] == 1  # PID 1 of its namespace
    recent = status["recent"][0]
    assert set(recent) >= {"id", "task", "trigger", "ok", "reason", "exit_code", "duration_ms"}
    assert recent["task"] == "ok"
    human = daemon.exec("status")
    assert human.returncode == 0
    assert "recent:" in human.stdout
    assert "output kept: 0.0 MiB of 1 runs (at most 1 MiB a run" in human.stdout


def test_readiness_follows_the_database_away_and_back_while_liveness_stays(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    """`health` (liveness: the HEALTHCHECK, the liveness probe) stays 0 during an outage, so no
    replica is restarted for it; `health --ready` (the readiness probe) follows the database."""
    name = f"acc_{uuid.uuid4().hex[:12]}"  # not created yet: the database is "away"
    url = database_url(name)
    daemon = start_daemon(
        tasks_toml=TASKS,
        env={"RUNBROKER_DATABASE_URL": url, "RUNBROKER_LEASE": "3s", "RUNBROKER_GRACE": "1s"},
    )
    try:
        daemon.log.wait_for("db.disconnected")
        assert daemon.exec("health", "--ready").returncode == 0  # a short outage: still ready

        def not_ready() -> bool:
            return daemon.exec("health", "--ready").returncode == 1

        eventually(not_ready, "readiness to turn false", timeout_s=30)
        answer = daemon.exec("health", "--ready")
        assert answer.stdout.startswith("not ready: database unreachable for"), answer.stdout
        live = daemon.exec("health")
        assert live.returncode == 0, live.stdout
        assert live.stdout.startswith("healthy; not ready: database unreachable for")
        query(ADMIN_DSN, f'CREATE DATABASE "{name}"')
        assert cli(url, "migrate").returncode == 0
        daemon.log.wait_for("db.reconnected", timeout_s=30)
        eventually(lambda: daemon.exec("health", "--ready").returncode == 0, "ready again")
        assert daemon.exec("health", "--ready").stdout.strip() == "ready"
        status = json.loads(daemon.exec("status", "--json").stdout)
        assert status["database"]["up"] is True
    finally:
        daemon.stop()
        query(ADMIN_DSN, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_database_metrics_move_with_claims(
    start_daemon: StartDaemon, workdir: Path, dsn: str
) -> None:
    daemon = start_daemon(
        tasks_toml=TASKS,
        env={"RUNBROKER_DATABASE_URL": dsn, "RUNBROKER_METRICS_ADDR": "127.0.0.1:0"},
    )
    port = daemon.log.wait_for("metrics.listening")[0]["port"]
    jobs(dsn, "add", "once", "--task", "ok", "--at", "now")
    eventually(
        lambda: value(dsn, "SELECT count(*) FROM job_runs WHERE status = 'succeeded'") == 1,
        "the job's run to succeed",
    )
    eventually(
        lambda: _scrape(port).get(("runbroker_claims_total", ())) == 1, "claims_total to move"
    )
    samples = _scrape(port)
    assert samples[("runbroker_db_up", ())] == 1
    key = (
        "runbroker_runs_total",
        (("outcome", "succeeded"), ("task", "ok"), ("trigger", "schedule")),
    )
    assert samples[key] == 1
    assert samples[("runbroker_lease_reclaims_total", ())] == 0
    assert samples[("runbroker_occurrences_missed_total", ())] == 0
    assert samples[("runbroker_occurrences_coalesced_total", ())] == 0
    assert samples[("runbroker_schedule_lag_seconds", ())] >= 0
    history = json.loads(cli(dsn, "jobs", "history", "once", "--json").stdout)["runs"]
    assert len(history) == 1
    assert set(history[0]) == {
        "id", "job", "scheduled_for", "attempt", "status", "owner", "claimed_at",
        "started_at", "finished_at", "duration_ms", "error", "output", "occurrences",
    }  # fmt: skip
    assert history[0]["status"] == "succeeded"
    assert history[0]["attempt"] == 1
    assert history[0]["occurrences"] == 1
    table = cli(dsn, "jobs", "history", "once").stdout.splitlines()
    assert table[0].split() == ["ID", "JOB", "STATUS", "ATTEMPT", "STARTED", "DURATION", "ERROR"]
    assert table[1].split()[1:4] == ["once", "succeeded", "1"]
