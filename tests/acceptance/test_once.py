"""``runbroker once`` as external schedulers use it: concurrent callers coalesce; a skipped
caller exits 3; what it prints by default is the job's output and its own errors."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.support.eventually import eventually
from tests.support.harness import RUNBROKER, STUBBORN_HANDLER

# Records each run's start and end, and any overlap (mkdir is atomic), then waits for `go`.
JOB = (
    'mkdir "$D/inrun" 2>/dev/null || echo overlap >> "$D/overlaps"; '
    'echo start >> "$D/runs"; '
    'while [ ! -e "$D/go" ]; do sleep 0.02; done; '
    'rmdir "$D/inrun"'
)


def _env(workdir: Path, command: str, log_level: str | None = "info") -> dict[str, str]:
    """The environment of a ``once`` caller; ``log_level`` None: RUNBROKER_LOG_LEVEL unset."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RUNBROKER_")}
    if log_level is not None:
        env["RUNBROKER_LOG_LEVEL"] = log_level
    env.update(
        RUNBROKER_LOCK_DIR=str(workdir / "locks"),
        RUNBROKER_SOCKET=str(workdir / "rb.sock"),
        RUNBROKER_COMMAND=command,
        RUNBROKER_LOG_FORMAT="json",
        D=str(workdir),
    )
    return env


def _once(
    workdir: Path, command: str, *argv: str, log_level: str | None = "info", **more_env: str
) -> subprocess.CompletedProcess[str]:
    """``runbroker once ARGV`` run to its end in ``_env``'s environment (with ``more_env``),
    its output captured."""
    return subprocess.run(
        [RUNBROKER, "once", *argv],
        env=_env(workdir, command, log_level) | more_env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_eight_concurrent_callers_never_overlap(workdir: Path) -> None:
    env = _env(workdir, f"sh -c '{JOB}'")
    callers = [
        subprocess.Popen(
            [RUNBROKER, "once"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(8)
    ]
    # Every caller but the runner decides at once (queued or discarded) and exits 0.
    eventually(lambda: sum(c.poll() is not None for c in callers) >= 7, "7 callers to exit")
    assert [c.returncode for c in callers if c.returncode is not None] == [0] * 7
    (workdir / "go").touch()
    outcomes = []
    for caller in callers:
        _out, err = caller.communicate(timeout=30)
        assert caller.returncode == 0
        done = [json.loads(line) for line in err.splitlines() if '"once.done"' in line]
        outcomes.append(done[0]["outcome"])
    # One runner ran the first run and one coalesced rerun; the others queued that rerun or
    # found it already queued. A caller may also record its request in the instant between
    # the runner taking the lock and clearing the counter: that request is covered by the
    # first run (it starts after the clear), and the caller truthfully said "queued".
    assert outcomes.count("ran-queued") == 1
    assert outcomes.count("queued") >= 1
    assert outcomes.count("queued") + outcomes.count("discarded") == 7
    assert (workdir / "runs").read_text().split() == ["start", "start"]
    assert not (workdir / "overlaps").exists()
    assert not (workdir / "inrun").exists()


def test_the_runner_exits_with_the_run_status_and_names_the_job_status(workdir: Path) -> None:
    failing = _once(workdir, "sh -c 'echo out; echo err >&2; exit 3'", log_level=None)
    assert failing.returncode == 1
    assert failing.stdout == "out\n"  # stdout is the job's
    # By default (host cron mails it) stderr is the job's and runbroker's own error, no log.
    assert failing.stderr == "err\nrunbroker: failed: exit status 3\n"
    ok = _once(workdir, "sh -c 'echo out'", log_level=None)
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "out\n", "")


def test_log_lines_are_printed_at_the_level_one_asks(workdir: Path) -> None:
    ran = _once(workdir, "true", log_level="info")
    assert ran.returncode == 0
    events = [json.loads(line)["event"] for line in ran.stderr.splitlines()]
    assert {"run.queued", "coord.ran", "once.done"} <= set(events)


def test_skip_mode_skips_while_a_run_is_in_flight(workdir: Path) -> None:
    env = _env(workdir, f"sh -c '{JOB}'")
    runner = subprocess.Popen([RUNBROKER, "once"], env=env, stderr=subprocess.PIPE, text=True)
    eventually(lambda: (workdir / "runs").exists(), "the first run to start")
    skipped = _once(workdir, f"sh -c '{JOB}'", "--skip", log_level=None)
    assert skipped.returncode == 3  # not run, as a trigger that on_busy = "skip" skipped
    assert skipped.stderr == "runbroker: skipped: a run of 'default' is in flight (--skip)\n"
    (workdir / "go").touch()
    runner.communicate(timeout=30)
    assert runner.returncode == 0
    assert (workdir / "runs").read_text().split() == ["start"]


def test_unknown_task_is_a_usage_error(workdir: Path) -> None:
    result = _once(workdir, "true", "nope")
    assert result.returncode == 2
    assert result.stderr == "runbroker: unknown task 'nope': this container defines default\n"


def test_a_handler_that_swallows_its_cancellation_cannot_hold_once_for_good(
    workdir: Path,
) -> None:
    (workdir / "once_deaf.py").write_text(STUBBORN_HANDLER)
    tasks = workdir / "tasks.toml"
    tasks.write_text('[tasks.deaf]\nhandler = "once_deaf:stubborn"\ntimeout = "1s"\ngrace = "1s"\n')
    done = _once(
        workdir,
        "true",
        "deaf",
        log_level=None,
        PYTHONPATH=str(workdir),
        RUNBROKER_TASKS_FILE=str(tasks),
        RUNBROKER_SHUTDOWN_TIMEOUT="1s",
    )
    assert done.returncode == 1, done.stderr
    said = done.stderr.splitlines()
    assert json.loads(said[0])["event"] == "run.stray"  # an error: logged at once's level
    assert said[1:] == [
        "runbroker: failed: timed out after 1s",
        "runbroker: a handler of 'deaf' given up on still runs 1s later "
        "(RUNBROKER_SHUTDOWN_TIMEOUT); exiting without it",
    ]
    # Its lock went with the process: the next caller runs at once.
    again = _once(workdir, "true", log_level=None)
    assert again.returncode == 0, again.stderr
