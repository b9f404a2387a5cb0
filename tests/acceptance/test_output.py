"""A job's output at pipe speed and as dependable as a pipe, against the real daemon as PID 1:
every line of a chatty job reaches an attached trigger and the daemon's log, in order and its
streams apart; a trigger that stops reading holds the job only for RUNBROKER_OUTPUT_HOLD, then
loses lines and says how many; a follower gets every line; the output log's three modes."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

from tests.support.backends import DaemonHandle
from tests.support.eventually import eventually

StartDaemon = Callable[..., DaemonHandle]

LINES = 200_000
ERR_EVERY = 50_000
# 200,000 lines on stdout (one of them past the 64 KiB line limit, one not UTF-8), a line on
# stderr every 50,000; given a gate file, the job first says "waiting" on stderr and waits for it.
CHATTY = f"""
[tasks.chatty]
command = ["sh", "-c", '''
if [ -n "$0" ]; then echo waiting >&2; while [ ! -e "$0" ]; do sleep 0.01; done; fi
awk 'BEGIN {{
  for (i = 0; i < {LINES}; i++) {{
    if (i == 7) {{ for (j = 0; j < 7000; j++) printf "wwwwwwwwww"; printf "\\n"; continue }}
    if (i == 9) {{ printf "bad \\377 byte\\n"; continue }}
    printf "line %d of the chatty job, about eighty characters of text, padded\\n", i
    if (i % {ERR_EVERY} == 0) printf "err %d\\n", i > "/dev/stderr"
  }}
}}' ''', "GATE"]
"""


def _expected_stdout() -> list[str]:
    lines = []
    for i in range(LINES):
        if i == 7:
            lines += ["w" * 65536, "w" * (70000 - 65536)]  # in pieces at the limit
        elif i == 9:
            lines.append("bad \ufffd byte")
        else:
            lines.append(f"line {i} of the chatty job, about eighty characters of text, padded")
    return lines


def _client(
    daemon: DaemonHandle, *args: str, stdout: int | IO[bytes], stderr: int | IO[bytes]
) -> subprocess.Popen[bytes]:
    env = {"RUNBROKER_SOCKET": str(daemon.socket), "PATH": os.environ.get("PATH", "")}
    return subprocess.Popen(daemon.exec_argv(*args), env=env, stdout=stdout, stderr=stderr)


def _chatty(gate: str = "") -> str:
    return CHATTY.replace("GATE", gate)


@pytest.mark.parametrize("level", ["info", "warning"])
def test_every_line_reaches_an_attached_trigger_and_the_log_in_order(
    start_daemon: StartDaemon, workdir: Path, level: str
) -> None:
    # At warning the daemon logs no line: nothing slows it, the client must keep up alone.
    daemon = start_daemon(
        tasks_toml=_chatty(), env={"RUNBROKER_LOG_LEVEL": level}, wait_ready=level == "info"
    )
    eventually(lambda: daemon.exec("health").returncode == 0, "the daemon to answer")
    out_path = workdir / "out"
    with out_path.open("wb") as out:
        trigger = _client(daemon, "trigger", "chatty", stdout=out, stderr=subprocess.PIPE)
        _out, err = trigger.communicate(timeout=120)
    assert trigger.returncode == 0, err
    expected = _expected_stdout()
    assert out_path.read_text().splitlines() == expected
    said = err.decode().splitlines()
    assert [line for line in said if line.startswith("err ")] == [
        f"err {i}" for i in range(0, LINES, ERR_EVERY)
    ]
    assert not [line for line in said if "dropped" in line]
    if level != "info":
        assert not daemon.log.events("run.output")
        return
    done = daemon.log.wait_for("run.done", lambda line: line["task"] == "chatty")[0]
    logged = daemon.log.events("run.output")
    assert [line["line"] for line in logged if line["stream"] == "stdout"] == expected
    assert [line["line"] for line in logged if line["stream"] == "stderr"] == [
        f"err {i}" for i in range(0, LINES, ERR_EVERY)
    ]
    assert {(line["run_id"], line["task"]) for line in logged} == {(done["run_id"], "chatty")}


def test_a_trigger_that_stops_reading_holds_the_job_for_the_bound_then_is_told_what_it_lost(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = start_daemon(tasks_toml=_chatty(), env={"RUNBROKER_OUTPUT_HOLD": "300ms"})
    # Nobody reads the trigger's stdout until the run has ended: the trigger blocks on its
    # full pipe and stops reading the socket, as a client stopped with Ctrl-S or SIGSTOP would.
    trigger = _client(daemon, "trigger", "chatty", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        done = daemon.log.wait_for("run.done", lambda line: line["task"] == "chatty", 120)[0]
        assert done["ok"] is True
        behind = daemon.log.wait_for("output.reader_behind")[0]
        assert behind["run_id"] == done["run_id"]
        out, err = trigger.communicate(timeout=60)
    finally:
        if trigger.poll() is None:
            trigger.kill()
    assert trigger.returncode == 0  # the run's own status: it succeeded
    said = [line for line in err.decode().splitlines() if "dropped" in line]
    assert len(said) == 1, err
    dropped = int(said[0].split()[1])
    assert said[0] == (
        f"runbroker: {dropped} lines dropped: this client read more slowly than the run wrote"
    )
    received = out.decode("utf-8", "replace").splitlines()
    received += [line for line in err.decode().splitlines() if line.startswith("err ")]
    assert dropped > 0
    assert len(received) + dropped == len(_expected_stdout()) + LINES // ERR_EVERY
    # The daemon's own log has every line whatever a client did.
    assert len(daemon.log.events("run.output")) == len(_expected_stdout()) + LINES // ERR_EVERY


def test_a_follower_gets_every_line_of_a_chatty_run(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    gate = workdir / "gate"
    daemon = start_daemon(tasks_toml=_chatty(str(gate)), env={"RUNBROKER_OUTPUT_LOG": "off"})
    trigger = _client(
        daemon, "trigger", "chatty", "--detach", stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert trigger.wait(timeout=20) == 0
    daemon.log.wait_for("run.started", lambda line: line["task"] == "chatty")
    out_path = workdir / "followed"
    with out_path.open("wb") as out:
        follower = _client(daemon, "logs", "chatty", "-f", stdout=out, stderr=subprocess.PIPE)
        assert follower.stderr is not None
        assert follower.stderr.readline() == b"waiting\n"  # it follows the run: go
        gate.touch()
        err = follower.stderr.read()
        assert follower.wait(timeout=120) == 0, err
    assert out_path.read_text().splitlines() == _expected_stdout()
    assert b"dropped" not in err
    assert not daemon.log.events("run.output")  # OUTPUT_LOG=off: not in the daemon's log


def test_raw_output_log_passes_a_jobs_own_json_lines_through(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    tasks = """
[tasks.logs_json]
command = ["sh", "-c", 'printf "%s\\\\n" "$0" plain', '{"level": "info", "msg": "job says hi"}']
"""
    daemon = start_daemon(tasks_toml=tasks, env={"RUNBROKER_OUTPUT_LOG": "raw"})
    done = daemon.exec("trigger", "logs_json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ['{"level": "info", "msg": "job says hi"}', "plain"]
    daemon.log.wait_for("run.done")
    assert '{"level": "info", "msg": "job says hi"}' in daemon.log.raw
    assert "plain" in daemon.log.raw
    assert not daemon.log.events("run.output")


def test_binary_output_survives_every_path(start_daemon: StartDaemon, workdir: Path) -> None:
    tasks = """
[tasks.binary]
command = ["sh", "-c", "head -c 3000000 /dev/urandom; head -c 100000 /dev/urandom >&2"]
"""
    daemon = start_daemon(tasks_toml=tasks)
    out_path = workdir / "out"
    with out_path.open("wb") as out:
        trigger = _client(daemon, "trigger", "binary", stdout=out, stderr=subprocess.PIPE)
        _out, err = trigger.communicate(timeout=120)
    assert trigger.returncode == 0, err
    received = out_path.read_bytes().decode()  # what arrives is text: UTF-8, replaced
    assert "\ufffd" in received
    done = daemon.log.wait_for("run.done", lambda line: line["task"] == "binary")[0]
    logged = daemon.log.events("run.output")
    assert {line["stream"] for line in logged} == {"stdout", "stderr"}
    assert "\n".join(line["line"] for line in logged if line["stream"] == "stdout") + "\n" == (
        received
    )
    assert done["ok"] is True
    assert daemon.exec("health").returncode == 0
    followed = daemon.exec("logs", done["run_id"])
    assert followed.returncode == 0
