"""The command line as a person meets it: messages, exit codes, help, closed pipes, status."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support.eventually import eventually
from tests.support.harness import RUNBROKER, Daemon
from tests.support.pgsupport import jobs

StartDaemon = Callable[..., Daemon]
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `yes | head -1`

TASKS = """
[tasks.chatty]
command = ["sh", "-c", "for i in $(seq 2000); do echo line $i; echo err $i >&2; done"]
[tasks.ok]
command = ["true"]
"""


def _with_closed(
    which: str, argv: Sequence[str], env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with its stdout or stderr a pipe whose reader is already gone, as
    ``runbroker status | head -1`` leaves it once head has exited."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    out = write_end if which == "stdout" else subprocess.PIPE
    err = write_end if which == "stderr" else subprocess.PIPE
    try:
        return subprocess.run(
            list(argv), env=dict(env), stdout=out, stderr=err, text=True, timeout=60, check=False
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [
        ("status",),
        ("status", "--json"),
        ("health",),
        ("version",),
        ("trigger", "chatty"),
        ("trigger", "chatty", "--json"),
    ],
)
def test_a_closed_stdout_ends_a_command_quietly(
    start_daemon: StartDaemon, workdir: Path, args: tuple[str, ...]
) -> None:
    daemon = start_daemon(tasks_toml=TASKS)
    done = _with_closed("stdout", daemon.exec_argv(*args), daemon.client_env())
    # A whole answer's command keeps its own code; a run's stream ends 141, the run goes on.
    assert done.returncode == (EXIT_BROKEN_PIPE if args[0] == "trigger" else 0)
    if args[0] == "trigger":  # its progress and the job's stderr go on until stdout breaks
        assert "Traceback" not in done.stderr
        assert "Broken pipe" not in done.stderr
        assert "connection lost" not in done.stderr
    else:
        assert done.stderr == ""


def test_a_closed_stderr_ends_a_trigger_quietly(start_daemon: StartDaemon, workdir: Path) -> None:
    daemon = start_daemon(tasks_toml=TASKS)
    done = _with_closed("stderr", daemon.exec_argv("trigger", "chatty"), daemon.client_env())
    assert done.returncode == EXIT_BROKEN_PIPE
    assert "Traceback" not in done.stdout


@pytest.mark.parametrize(
    "args", [("jobs", "list"), ("jobs", "list", "--json"), ("jobs", "history")]
)
def test_a_closed_stdout_ends_jobs_quietly(dsn: str, args: tuple[str, ...]) -> None:
    jobs(dsn, "add", "nightly", "--task", "ok", "--daily", "02:30")
    env = {key: value for key, value in os.environ.items() if not key.startswith("RUNBROKER_")}
    env["RUNBROKER_DATABASE_URL"] = dsn
    done = _with_closed("stdout", [RUNBROKER, *args], env)
    assert (done.returncode, done.stderr) == (0, "")


def _first_line_then_close(
    argv: Sequence[str], env: Mapping[str, str] | None
) -> tuple[int, str, str]:
    """``argv | head -1``: its first line read, then the pipe closed; its exit code, that line
    and its stderr."""
    process = subprocess.Popen(
        list(argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()
    err = process.stderr.read()
    return process.wait(timeout=60), first, err


def test_status_piped_to_head_exits_0_every_time(start_daemon: StartDaemon, workdir: Path) -> None:
    daemon = start_daemon(tasks_toml=TASKS)
    for _ in range(10):
        code, first, err = _first_line_then_close(daemon.exec_argv("status"), daemon.client_env())
        assert (code, err) == (0, "")
        assert first.startswith("runbroker: pid ")


def test_a_whole_answer_past_the_pipe_buffer_piped_to_head_exits_0(workdir: Path) -> None:
    tasks = workdir / "many.toml"
    name = "x" * 60  # long names: a next answer of 1,000 tasks past four pipe buffers
    tasks.write_text(
        "".join(
            f'[tasks.t{i:04d}{name}]\ncommand = ["true"]\nschedule = "every 1m"\n'
            for i in range(1000)
        )
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("RUNBROKER_")}
    argv = [RUNBROKER, "next", "--file", str(tasks), "--json"]
    whole = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True)
    assert len(whole.stdout) > 4 * 65536  # past the pipe's buffer: a write fails, every time
    for _ in range(10):
        code, first, err = _first_line_then_close(argv, env)
        assert (code, first, err) == (0, whole.stdout.splitlines(keepends=True)[0], "")


def test_a_closed_stdout_ends_once_quietly_and_the_run_goes_on(workdir: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("RUNBROKER_")}
    env.update(
        RUNBROKER_LOCK_DIR=str(workdir),
        RUNBROKER_LOG_FORMAT="json",
        RUNBROKER_COMMAND=f"sh -c 'seq 5000; touch {workdir}/finished'",
    )
    done = _with_closed("stdout", [RUNBROKER, "once"], env)
    assert done.returncode == EXIT_BROKEN_PIPE
    assert "Traceback" not in done.stderr
    assert "listener_failed" not in done.stderr
    assert (workdir / "finished").exists()


def test_a_huge_interval_is_clamped_and_the_warning_hides_the_value(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = start_daemon(
        "true", env={"RUNBROKER_INTERVAL": "200000h", "RUNBROKER_FIRE_ON_START": "false"}
    )
    warnings = daemon.log.wait_for("settings.interval")
    assert [line["warning"] for line in warnings] == [
        "RUNBROKER_INTERVAL: interval is above the maximum 720h; using the maximum"
    ]
    assert not any("200000" in line for line in daemon.log.raw)
    status = json.loads(daemon.exec("status", "--json").stdout)
    next_at = datetime.fromisoformat(status["ticks"][0]["next_at"])
    days = (next_at - datetime.now(UTC)).total_seconds() / 86400
    assert 26 < days <= 33  # 30 days, give or take the jitter


def test_once_callers_that_did_not_run_say_why_in_words(workdir: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("RUNBROKER_")}
    env.update(
        RUNBROKER_LOCK_DIR=str(workdir),
        RUNBROKER_LOG_FORMAT="json",
        RUNBROKER_COMMAND=(
            f"sh -c 'touch {workdir}/started; while [ ! -e {workdir}/go ]; do sleep 0.02; done'"
        ),
    )
    runner = subprocess.Popen(
        [RUNBROKER, "once"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        eventually(lambda: (workdir / "started").exists(), "the first run to start")

        def once(*args: str) -> list[str]:
            done = subprocess.run(
                [RUNBROKER, "once", *args], env=env, capture_output=True, text=True, timeout=30
            )
            assert done.returncode == (3 if "--skip" in args else 0)  # skipped: as a trigger
            return done.stderr.splitlines()  # no log lines unless RUNBROKER_LOG_LEVEL asks

        assert once() == [
            "runbroker: a run of 'default' is in flight; queued a rerun to start after it"
        ]
        assert once() == [
            "runbroker: a run of 'default' is in flight and a rerun is already queued; "
            "that rerun covers this call"
        ]
        assert once("--skip") == ["runbroker: skipped: a run of 'default' is in flight (--skip)"]
    finally:
        (workdir / "go").touch()
        runner.communicate(timeout=30)
    assert runner.returncode == 0


def test_an_unknown_variable_warning_suggests_the_real_name(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = start_daemon("true", env={"RUNBROKER_INTERVALL": "5m", "RUNBROKER_NONSENSE": "1"})
    found = {
        line["variable"]: line.get("did_you_mean")
        for line in daemon.log.wait_for("settings.unknown_variable", count=2)
    }
    assert found == {"RUNBROKER_INTERVALL": "RUNBROKER_INTERVAL", "RUNBROKER_NONSENSE": None}


HOLD = """
[tasks.hold]
command = ["sh", "-c", 'while [ ! -e "$D/go" ]; do sleep 0.02; done']
"""


def test_a_rejection_says_rejected(start_daemon: StartDaemon, workdir: Path) -> None:
    daemon = start_daemon(
        tasks_toml=HOLD,
        env={"RUNBROKER_QUEUE_CAPACITY": "0", "D": str(workdir)},
    )
    holder = daemon.popen("trigger", "hold")
    try:
        daemon.log.wait_for("run.started")
        rejected = daemon.exec("trigger", "hold")
        assert rejected.returncode == 75
        assert rejected.stderr == "runbroker: rejected: run queue is full\n"
    finally:
        (workdir / "go").touch()
        holder.communicate(timeout=30)


STATUS_TASKS = """
[tasks.fail]
command = ["sh", "-c", "exit 3"]
[tasks.nightly]
command = ["true"]
schedule = "cron 30 2 * * *"
tz = "Europe/Berlin"
"""


def test_status_is_a_readable_report(start_daemon: StartDaemon, workdir: Path, dsn: str) -> None:
    daemon = start_daemon(
        "true",
        tasks_toml=STATUS_TASKS,
        env={"RUNBROKER_INTERVAL": "1h", "RUNBROKER_DATABASE_URL": dsn},
    )
    daemon.log.wait_for("run.done")  # default's tick at start
    assert daemon.exec("trigger", "fail").returncode == 1

    def database_up() -> bool:
        answer = json.loads(daemon.exec("status", "--json").stdout)
        return bool(answer["database"] and answer["database"]["up"])

    eventually(database_up, "the database to be up")
    answer = json.loads(daemon.exec("status", "--json").stdout)
    assert {(t["task"], t["schedule"], t["tz"]) for t in answer["ticks"]} == {
        ("default", "every 1h", None),
        ("nightly", "cron 30 2 * * *", "Europe/Berlin"),
    }
    for item in answer["recent"]:  # each run finished within the last minute
        age_s = (datetime.now(UTC) - datetime.fromisoformat(item["finished_at"])).total_seconds()
        assert 0 <= age_s < 60
    text = daemon.exec("status").stdout
    assert "{" not in text  # no dict dumps
    lines = text.splitlines()
    assert re.fullmatch(
        r"runbroker: pid 1, up \d+(ms|\.\ds) \(since .*Z\), reaping orphans as PID 1", lines[0]
    ), lines[0]
    ticks = lines[lines.index("ticks:") + 1 :]
    assert ticks[0].split() == ["TASK", "SCHEDULE", "NEXT", "LAST"]
    assert "every 1h" in ticks[1]
    assert "cron 30 2 * * * (Europe/Berlin)" in ticks[2]
    recent = lines[lines.index("recent:") + 1 :]
    assert recent[0].split()[:3] == ["FINISHED", "RESULT", "ID"]
    assert re.match(r"  \d\d:\d\d:\d\dZ \(\S+ ago\)\s+FAILED .* exit status 3$", recent[1])
    assert [line for line in lines if line.startswith("database: ")] == [
        f"database: up, listening, claiming; replica {answer['database']['owner']}"
    ]
