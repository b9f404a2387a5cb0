"""Notifications from the real daemon, PID 1 of its namespace: a failed run reaches a webhook
and a ping URL on 127.0.0.1 and runs the command hook, which leaves no zombie; a silent task
is a warning that keeps the daemon healthy; on a stop, a webhook that never answers holds the
exit no longer than its documented bound; a URL put in ``url_env`` or ``url_file`` is named by
its key and shown nowhere."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.support.eventually import eventually
from tests.support.harness import RUNBROKER
from tests.support.http_receiver import receiving
from tests.support.reload_scenarios import StartDaemon, unwatched_tasks_file


def _tasks(url: str, hook_out: Path) -> str:
    # The hook leaves a grandchild behind (a double fork): PID 1 must reap it.
    hook = f'(sleep 0.3 &); echo "$RUNBROKER_NOTIFY_EVENT $RUNBROKER_EXIT_CODE" > {hook_out}'
    return f"""
[tasks.fails]
command = ["sh", "-c", "echo boom; exit 4"]
[tasks.fails.notify.webhook]
url = "{url}/hook?token=s3cr3t"
[tasks.fails.notify.ping]
url = "{url}/ping/abc"
on = ["failure"]
[tasks.fails.notify.command]
command = ["sh", "-c", '{hook}']
"""


def test_a_failed_run_reaches_the_webhook_the_ping_and_the_hook_without_a_zombie(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    hook_out = workdir / "hook.txt"
    with receiving() as receiver:
        daemon = start_daemon(tasks_toml=_tasks(receiver.url, hook_out))
        triggered = daemon.exec("trigger", "fails")
        assert triggered.returncode == 1, triggered.stderr
        got = receiver.wait_for(2)
        eventually(hook_out.exists, "the command hook's file")
        assert hook_out.read_text().strip() == "failure 4"
        hook = next(json.loads(r.body) for r in got if r.path.startswith("/hook"))
        ping = next(r for r in got if r.path.startswith("/ping"))
        assert hook["event"] == "failure"
        assert hook["task"] == "fails"
        assert hook["exit_code"] == 4
        assert hook["output_tail"] == ["boom"]
        assert ping.path == "/ping/abc/fail"
        assert ping.body.decode().startswith("boom")
        eventually(lambda: daemon.exec("status", "--json").stdout, "status")
        status: dict[str, Any] = json.loads(daemon.exec("status", "--json").stdout)
        notify = status["notify"]
        assert eventually(
            lambda: json.loads(daemon.exec("status", "--json").stdout)["notify"]["kinds"],
            "all three sent",
            until=lambda kinds: all(kinds[k]["sent"] == 1 for k in kinds),
        )
        assert notify["tasks"] == 1
        assert "s3cr3t" not in json.dumps(status)
        assert "s3cr3t" not in json.dumps(daemon.log.lines)
        eventually(daemon.zombies, "no zombie under PID 1", until=lambda found: found == [])


def test_a_silent_task_is_a_warning_and_the_daemon_stays_healthy(
    start_daemon: StartDaemon,
) -> None:
    daemon = start_daemon(
        tasks_toml='[tasks.nightly]\ncommand = "true"\n[tasks.nightly.notify]\nmax_silence = "1s"\n'
    )
    (silent,) = daemon.log.wait_for("notify.silent")
    assert silent["task"] == "nightly"
    health = daemon.exec("health")
    assert health.returncode == 0, health.stderr
    assert "task 'nightly' has not succeeded for" in health.stdout + health.stderr
    assert "SILENT: task 'nightly'" in daemon.exec("status").stdout
    assert daemon.exec("trigger", "nightly").returncode == 0
    assert "nightly" not in daemon.exec("health").stdout


def test_a_stop_gives_a_webhook_that_never_answers_its_bounded_time(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    with receiving() as receiver:
        receiver.hang = True
        daemon = start_daemon(
            tasks_toml=f"""
[tasks.fails]
command = "false"
[tasks.fails.notify.webhook]
url = "{receiver.url}/hook"
timeout = "30s"
""",
            env={"RUNBROKER_SHUTDOWN_TIMEOUT": "5s"},
        )
        assert daemon.exec("trigger", "fails").returncode == 1
        receiver.wait_for(1)  # the notice hangs at the endpoint
        stopped = time.monotonic()
        daemon.signal(signal.SIGTERM)
        assert daemon.wait() == 0
        took_s = time.monotonic() - stopped
        (dropped,) = daemon.log.events("notify.shutdown_dropped")
        assert dropped["dropped"] == 1
        assert took_s < 5.0  # the budget; the notice got at most 3 s of it
        assert daemon.log.events("broker.stopped")[0]["clean"] is True


TOKEN = "SEKRET0123456789"


def _host(*args: str) -> subprocess.CompletedProcess[str]:
    """``runbroker ARGS`` on the host, without a daemon and without our RUNBROKER_*."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RUNBROKER_")}
    return subprocess.run(
        [RUNBROKER, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_url_in_url_env_or_url_file_is_named_by_its_key_and_shown_nowhere(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    plain = '[tasks.a]\ncommand = "true"\n'
    mistaken = (
        plain + f'[tasks.a.notify.webhook]\nurl_env = "https://hc-ping.example/{TOKEN}"\n'
        f'[tasks.a.notify.ping]\nurl_file = "https://hc-ping.example/{TOKEN}"\n'
    )
    said = "tasks.a.notify.webhook: url_env: the value looks like a URL (not shown)"
    path, swap = unwatched_tasks_file(workdir, plain, mistaken)
    daemon = start_daemon(env={"RUNBROKER_TASKS_FILE": str(path)})
    swap()
    candidate = str(workdir / "v2" / "tasks.toml")
    checked, planned = _host("check", candidate), _host("next", "--file", candidate)
    asked = daemon.exec("reload")
    (refused,) = daemon.log.wait_for("tasks.reload_refused")
    health = daemon.exec("health")
    for answer in (checked, planned, asked):
        assert answer.returncode in (1, 2), answer.stderr
        assert said in answer.stderr
    assert said in refused["error"]
    assert health.returncode == 0
    assert said in health.stdout
    shown = [
        checked.stdout + checked.stderr,
        planned.stdout + planned.stderr,
        asked.stdout + asked.stderr,
        health.stdout + health.stderr,
        daemon.exec("status", "--json").stdout,
        json.dumps(daemon.log.lines),
    ]
    assert [TOKEN in text for text in shown] == [False] * len(shown)


def test_a_webhook_that_never_answers_delays_no_other_task_s_notices(
    start_daemon: StartDaemon,
) -> None:
    with receiving() as dead, receiving() as live:
        dead.hang = True
        daemon = start_daemon(
            tasks_toml=f"""
[tasks.dead]
command = "false"
[tasks.dead.notify.webhook]
url = "{dead.url}/hook"
timeout = "30s"
[tasks.live]
command = "false"
[tasks.live.notify.webhook]
url = "{live.url}/hook"
""",
            env={"RUNBROKER_SHUTDOWN_TIMEOUT": "5s"},
        )
        for _ in range(3):
            assert daemon.exec("trigger", "dead").returncode == 1
        dead.wait_for(1)  # its first notice hangs there; two more wait behind it
        assert daemon.exec("trigger", "live").returncode == 1
        # Less than the dead endpoint's one attempt (30 s): only its own notices wait on it.
        (got,) = live.wait_for(1, timeout_s=10.0)
        assert json.loads(got.body)["task"] == "live"
        assert len(dead.requests) == 1
        daemon.signal(signal.SIGTERM)
        assert daemon.wait() == 0
        (dropped,) = daemon.log.events("notify.shutdown_dropped")
        assert dropped["dropped"] == 3  # the one in flight and the two behind it


def test_a_webhook_on_change_is_told_once_when_failing_starts_and_once_at_the_recovery(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    exit_file = workdir / "exit"
    with receiving() as receiver:
        daemon = start_daemon(
            tasks_toml=f"""
[tasks.flaky]
command = ["sh", "-c", "exit $(cat {exit_file})"]
[tasks.flaky.notify.webhook]
url = "{receiver.url}/hook"
on = ["change"]
"""
        )
        exit_file.write_text("1")
        for _ in range(3):
            assert daemon.exec("trigger", "flaky").returncode == 1
        exit_file.write_text("0")
        for _ in range(2):
            assert daemon.exec("trigger", "flaky").returncode == 0
        got = receiver.wait_for(2)  # one target: its notices come in order, none skipped
        assert [json.loads(r.body)["event"] for r in got] == ["failure", "recovery"]
        assert len(receiver.requests) == 2
        daemon.signal(signal.SIGTERM)
        assert daemon.wait() == 0
    assert len(receiver.requests) == 2  # and none was still on its way
