"""``runbroker logs`` against the real daemon as PID 1: following a chatty run the ticker
started, a finished run's output by its id, an unknown id, and a reader that does not read,
which holds the job back for RUNBROKER_OUTPUT_HOLD at most and costs the daemon bounded
memory."""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.backends import DaemonHandle
from tests.support.eventually import eventually

StartDaemon = Callable[..., DaemonHandle]

CHATTY_LINES = 5000  # about 0.8 MiB in the journal: within a run's 1 MiB
# Half its lines, then a wait for the file the test creates, the other half, an error line.
CHATTY = f"""
[tasks.chatty]
command = ["sh", "-c", '''
i=0; while [ $i -lt {CHATTY_LINES} ]; do
  echo "line $i"; i=$((i+1))
  if [ $i -eq {CHATTY_LINES // 2} ]; then while [ ! -e "$0" ]; do sleep 0.02; done; fi
done
echo "the end" >&2; exit 3''', "GATE"]
interval = "1h"
"""


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_following_a_ticked_run_prints_all_its_output_and_exits_with_its_status(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    gate = workdir / "gate"
    daemon = start_daemon(tasks_toml=CHATTY.replace("GATE", str(gate)))
    (started,) = daemon.log.wait_for("run.started", lambda line: line["task"] == "chatty")
    assert started["trigger"] == "tick"  # fired on start by the task's own ticker
    follower = daemon.popen("logs", "chatty", "--follow")
    assert follower.stdout is not None
    # Its first line (pytest-timeout bounds the read): it is following the run, held at the gate.
    first = follower.stdout.readline()
    assert first == "line 0\n"
    gate.touch()
    # Read through the same buffered file as the first line (communicate() would skip what
    # it buffered); stderr holds a few lines only, so it cannot fill its pipe meanwhile.
    out = first + follower.stdout.read()
    assert follower.stderr is not None
    err = follower.stderr.read()
    follower.wait(timeout=60)
    assert follower.returncode == 1, err  # the run exited 3: failed, as trigger says
    assert out.splitlines() == [f"line {number}" for number in range(CHATTY_LINES)]
    assert err.splitlines()[0] == "the end"
    assert err.splitlines()[-1] == "runbroker: failed: exit status 3"

    # The finished run by its id, without --follow: its output, then exit 0.
    again = daemon.exec("logs", started["run_id"])
    assert again.returncode == 0, again.stderr
    assert again.stdout == out
    newest = daemon.exec("logs", "--json")  # no argument: the latest run
    lines = [json.loads(line) for line in newest.stdout.splitlines()]
    assert (lines[0]["event"], lines[0]["id"], lines[0]["state"]) == (
        "logs",
        started["run_id"],
        "done",
    )
    assert (lines[-1]["event"], lines[-1]["exit_code"]) == ("done", 3)

    listed = daemon.exec("logs", "--runs", "5")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split() == ["ID", "TASK", "TRIGGER", "OUTCOME", "STARTED", "DURATION", "LINES"]
    assert row.split()[:5] == [started["run_id"], "chatty", "tick", "failed", "(3)"]
    assert row.split()[-1] == str(CHATTY_LINES + 1)

    unknown = daemon.exec("logs", "r0000000-1")
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("runbroker: no run 'r0000000-1'")
    no_task = daemon.exec("logs", "nope")
    assert no_task.returncode == 2
    assert "unknown task 'nope'" in no_task.stderr


FLOOD_LINES = 400_000  # ~2.6 MB of text; unbounded, a slow reader's answer would be ~30 MB
FLOOD = f"""
[tasks.flood]
command = ["seq", "1", "{FLOOD_LINES}"]
[tasks.quick]
command = ["echo", "quick"]
"""


def _finished(daemon: DaemonHandle, run_id: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        recent = json.loads(daemon.exec("status", "--json").stdout)["recent"]
        return next((run for run in recent if run["id"] == run_id), None)

    found = eventually(probe, f"run {run_id} to finish", timeout_s=60, every_s=0.1)
    assert found is not None
    return found


def _flood(daemon: DaemonHandle) -> str:
    detached = daemon.exec("trigger", "flood", "--detach")
    assert detached.returncode == 0, detached.stderr
    return detached.stdout.strip()


def test_a_reader_that_does_not_read_holds_the_job_for_the_bound_at_most_and_costs_little(
    start_daemon: StartDaemon,
) -> None:
    # Per-line log lines off: the harness would parse every one of them.
    daemon = start_daemon(
        tasks_toml=FLOOD,
        env={"RUNBROKER_LOG_LEVEL": "warning", "RUNBROKER_OUTPUT_HOLD": "1s"},
        wait_ready=False,
    )  # broker.ready is an info line: the socket's answer says it is ready
    eventually(lambda: daemon.exec("status").returncode == 0, "the daemon to answer")
    baseline = _finished(daemon, _flood(daemon))
    assert baseline["ok"], baseline
    rss_before_kib = _rss_kib(daemon.pid)

    run_id = _flood(daemon)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as lazy:
        lazy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # reads nothing for now
        lazy.connect(str(daemon.socket))
        lazy.sendall(b'{"op":"logs","id":"%s","follow":true}\n' % run_id.encode())
        quick = daemon.exec("trigger", "quick")  # others are served meanwhile
        assert quick.returncode == 0, quick.stderr
        assert quick.stdout == "quick\n"
        slowed = _finished(daemon, run_id)
        assert slowed["ok"], slowed
        # Held back by its reader for OUTPUT_HOLD at most, then let go: within its normal time
        # and that second (and far from the 60 s cut-off).
        assert slowed["duration_ms"] < 2 * baseline["duration_ms"] + 1000 + 2000, (slowed, baseline)
        grown_kib = _rss_kib(daemon.pid) - rss_before_kib
        assert grown_kib < 12 * 1024, f"the daemon grew {grown_kib} KiB"
        lazy.settimeout(30)
        data = b""
        started = time.monotonic()
        while chunk := lazy.recv(1 << 20):
            data += chunk
            assert time.monotonic() - started < 30
    header, *lines, done = (json.loads(line) for line in data.splitlines())
    assert (header["event"], header["id"]) == ("logs", run_id)
    numbers = [int(line["line"]) for line in lines]
    assert numbers == sorted(numbers)
    assert numbers[-1] == FLOOD_LINES  # the newest lines are there
    assert done["event"] == "done"
    assert done["ok"] is True
    assert done["dropped_lines"] > 0  # what it missed is counted
    assert len(numbers) + done["dropped_lines"] + header["dropped_lines"] == FLOOD_LINES


LONG = """
[tasks.long]
command = ["sh", "-c", "echo working; exec sleep 600"]
interval = "1h"
"""


def test_a_follower_at_shutdown_gets_the_runs_done_line_within_the_budget(
    start_daemon: StartDaemon,
) -> None:
    daemon = start_daemon(tasks_toml=LONG, env={"RUNBROKER_SHUTDOWN_TIMEOUT": "10s"})
    daemon.log.wait_for("run.started", lambda line: line["task"] == "long")
    follower = daemon.popen("logs", "long", "--follow")
    assert follower.stdout is not None
    assert follower.stdout.readline() == "working\n"  # following the running run
    asked = time.monotonic()
    daemon.signal(signal.SIGTERM)
    rest = follower.stdout.read()
    assert follower.stderr is not None
    err = follower.stderr.read()
    follower.wait(timeout=30)
    assert time.monotonic() - asked < 10  # within the shutdown budget
    assert rest == ""
    assert follower.returncode == 1, err  # the run's result: cancelled at shutdown
    assert err.splitlines()[-1] == "runbroker: failed: cancelled: scheduler shutting down", err
    assert daemon.wait() == 0


LATER = """
[tasks.later]
command = ["sh", "-c", "echo hello from later; exit 4"]
"""


def test_following_a_task_before_its_first_run_waits_for_it(start_daemon: StartDaemon) -> None:
    daemon = start_daemon(tasks_toml=LATER)
    follower = daemon.popen("logs", "later", "-f")
    try:
        assert follower.stderr is not None
        said = follower.stderr.readline()
        assert said == (
            "runbroker: task 'later' has no run yet; waiting for one to be queued"
            " (Ctrl-C to stop)\n"
        )
        assert follower.poll() is None  # still there, waiting
        assert daemon.exec("trigger", "later").returncode == 1
        out, err = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert follower.returncode == 1, err  # the run's own status, as trigger's
    assert out == "hello from later\n"
    assert err.rstrip().endswith("runbroker: failed: exit status 4")
