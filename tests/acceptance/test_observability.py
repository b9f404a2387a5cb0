"""Metrics, health and status as operators see them, from the real daemon."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.acceptance.harness import Daemon

StartDaemon = Callable[..., Daemon]

TASKS = """
[tasks.ok]
command = ["true"]
[tasks.fail]
command = ["false"]
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
    assert key not in before
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
    assert ("runbroker_last_success_timestamp_seconds", (("task", "fail"),)) not in after
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
        "uptime_s",
        "queue",
        "current",
        "waiting",
        "recent",
        "ticks",
        "database",
    }
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
