"""Scheduled slots and busy tasks from the outside, with the real daemon as PID 1: a long job
makes the next slot miss its start deadline; each ``on_busy`` policy of a triggered task; a bad
value refused with its file and line."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.support.harness import WAIT_S, Daemon

StartDaemon = Callable[..., Daemon]


def _gated(name: str, go: Path, setting: str) -> str:
    """A task ``name`` (with one more ``setting`` line) whose runs wait until the test creates
    the file ``go`` (the job polls for it), then print ``ran``."""
    return f"""
[tasks.{name}]
command = ["sh", "-c", "while [ ! -e {go} ]; do sleep 0.02; done; echo ran"]
{setting}
"""


def _sync_running(
    start_daemon: StartDaemon, workdir: Path, on_busy: str
) -> tuple[Daemon, subprocess.Popen[str]]:
    """A daemon with one gated task ``sync`` (file ``go`` in ``workdir``), and a first
    ``trigger sync`` once its run has started."""
    daemon = start_daemon(tasks_toml=_gated("sync", workdir / "go", f'on_busy = "{on_busy}"'))
    first = daemon.popen("trigger", "sync")
    daemon.log.wait_for("run.started", lambda line: line.get("task") == "sync")
    return daemon, first


def _finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=WAIT_S)
    return process.returncode, out, err


def _json_events(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_a_long_job_makes_the_next_slot_miss_its_deadline(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    tasks = """
[tasks.long]
command = ["sleep", "60"]

[tasks.beat]
command = ["true"]
schedule = "every 1s"
start_deadline = "300ms"
"""
    daemon = start_daemon(tasks_toml=tasks)
    daemon.log.wait_for("slot.ran", lambda line: line.get("task") == "beat")
    trigger = daemon.exec("trigger", "long", "--detach")
    assert trigger.returncode == 0, trigger.stderr
    long_id = trigger.stdout.strip()
    missed = daemon.log.wait_for("slot.missed", lambda line: line.get("task") == "beat")[0]
    assert missed["level"] == "warning"
    assert "start deadline" in missed["reason"]
    done = daemon.log.wait_for("run.done", lambda line: line.get("run_id") == missed["run_id"])
    assert done[0]["reason"] == "cancelled: not started within its start deadline"
    status = json.loads(daemon.exec("status", "--json").stdout)
    beat = next(entry for entry in status["slots"] if entry["task"] == "beat")
    assert beat["totals"]["missed"] >= 1
    assert beat["totals"]["ran"] >= 1
    assert any(entry["outcome"] == "missed" for entry in beat["last"])
    text = daemon.exec("status").stdout
    assert "MISSED" in text
    assert daemon.exec("cancel", long_id).returncode == 0


def test_a_tick_is_skipped_while_its_task_runs_and_said_so(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    go = workdir / "go"
    daemon = start_daemon(tasks_toml=_gated("beat", go, 'schedule = "every 1s"'))
    daemon.log.wait_for("run.started", lambda line: line.get("task") == "beat")
    skipped = daemon.log.wait_for("slot.skipped", lambda line: line.get("task") == "beat")[0]
    assert skipped["reason"] == "previous run still queued or running"
    go.touch()
    ran = daemon.log.wait_for("slot.ran", lambda line: line.get("task") == "beat")[0]
    assert ran["result"] == "succeeded"
    status = json.loads(daemon.exec("status", "--json").stdout)
    beat = next(entry for entry in status["slots"] if entry["task"] == "beat")
    assert beat["totals"]["skipped"] >= 1
    assert beat["totals"]["ran"] >= 1


def test_skip_tells_the_trigger_and_exits_3(start_daemon: StartDaemon, workdir: Path) -> None:
    daemon, first = _sync_running(start_daemon, workdir, "skip")
    second = daemon.exec("trigger", "sync")
    assert second.returncode == 3, second.stderr
    assert "already has a run queued or running (on_busy = skip)" in second.stderr
    (workdir / "go").touch()
    assert _finish(first)[0] == 0
    assert len(daemon.log.events("run.started")) == 1


def test_coalesce_joins_the_queued_run(start_daemon: StartDaemon, workdir: Path) -> None:
    daemon, first = _sync_running(start_daemon, workdir, "coalesce")
    second = daemon.popen("trigger", "sync", "--json")
    daemon.log.wait_for("run.queued", lambda line: line.get("task") == "sync", count=2)
    third = daemon.exec("trigger", "sync", "--json", "--detach")
    assert third.returncode == 0, third.stderr
    joined = _json_events(third.stdout)[0]
    (workdir / "go").touch()
    assert _finish(first)[0] == 0
    code, out, _err = _finish(second)
    assert code == 0
    events = _json_events(out)
    assert joined["event"] == "queued"
    assert joined["id"] == events[0]["id"]
    assert len(daemon.log.events("run.queued")) == 2  # the third made no run of its own


def test_coalesce_streams_the_joined_runs_output_and_result(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon, first = _sync_running(start_daemon, workdir, "coalesce")
    second = daemon.popen("trigger", "sync")
    daemon.log.wait_for("run.queued", lambda line: line.get("task") == "sync", count=2)
    third = daemon.popen("trigger", "sync")
    daemon.log.wait_for("run.joined", lambda line: line.get("task") == "sync")
    (workdir / "go").touch()
    results = [_finish(process) for process in (first, second, third)]
    assert [code for code, _out, _err in results] == [0, 0, 0]
    assert [out for _code, out, _err in results] == ["ran\n"] * 3
    # The clients have their results before the log reader may have read every line of them.
    daemon.log.wait_for("run.done", lambda line: line.get("task") == "sync", count=2)
    assert len(daemon.log.events("run.started")) == 2


def test_coalesce_joins_only_a_queued_run_of_the_same_args(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    go = workdir / "go"
    tasks = f"""
[tasks.sync]
command = ["sh", "-c", "while [ ! -e {go} ]; do sleep 0.02; done; echo ran \\"$1\\"", "sh"]
allow_args = true
on_busy = "coalesce"
"""
    daemon = start_daemon(tasks_toml=tasks)
    first = daemon.popen("trigger", "sync", "--arg", "first")
    daemon.log.wait_for("run.started", lambda line: line.get("task") == "sync")
    with_a = daemon.popen("trigger", "sync", "--arg", "A")
    daemon.log.wait_for("run.queued", lambda line: line.get("task") == "sync", count=2)
    with_b = daemon.popen("trigger", "sync", "--arg", "B")  # not A's run: one of its own
    daemon.log.wait_for("run.queued", lambda line: line.get("task") == "sync", count=3)
    again_a = daemon.popen("trigger", "sync", "--arg", "A")  # joins A's queued run
    daemon.log.wait_for("run.joined", lambda line: line.get("task") == "sync")
    go.touch()
    results = [_finish(process) for process in (first, with_a, with_b, again_a)]
    assert [code for code, _out, _err in results] == [0, 0, 0, 0]
    assert [out for _code, out, _err in results] == ["ran first\n", "ran A\n", "ran B\n", "ran A\n"]
    daemon.log.wait_for("run.done", lambda line: line.get("task") == "sync", count=3)
    assert len(daemon.log.events("run.started")) == 3


def test_replace_cancels_the_running_run_for_the_new_one(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon, first = _sync_running(start_daemon, workdir, "replace")
    second = daemon.popen("trigger", "sync")
    code, _out, err = _finish(first)
    assert code == 1
    assert "cancelled: replaced by a newer run of its task" in err
    daemon.log.wait_for("run.started", lambda line: line.get("task") == "sync", count=2)
    (workdir / "go").touch()
    code, out, err = _finish(second)
    assert (code, out) == (0, "ran\n")
    assert "runbroker: done" in err


def test_a_bad_on_busy_is_refused_naming_the_file_and_line(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    tasks = '[tasks.sync]\ncommand = ["true"]\non_busy = "later"\n'
    daemon = start_daemon(tasks_toml=tasks, wait_ready=False)
    assert daemon.wait() == 2
    assert f"{workdir / 'tasks.toml'}:3: tasks.sync: on_busy must be one of" in daemon.stderr()
