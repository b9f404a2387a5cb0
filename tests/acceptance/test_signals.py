"""What each signal does to the daemon, as PID 1 and not: the stop signals drain,
SIGUSR1 writes a status line, the others are logged and ignored; a signal mask inherited from
the parent does not keep the daemon from hearing them."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.eventually import eventually
from tests.support.harness import STUBBORN_HANDLER, Daemon, children_of
from tests.support.pid1_scenarios import RUNNING_JOB, check_every_signal

StartDaemon = Callable[..., Daemon]

# Blocks SIGTERM, then becomes the daemon (exec: same pid, still PID 1 of the namespace), as a
# parent that left its mask behind would start it.
BLOCK_SIGTERM_THEN_EXEC = [
    "python3",
    "-c",
    "import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM}); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]


def test_a_sigterm_blocked_by_the_parent_still_stops_the_daemon(workdir: Path) -> None:
    daemon = Daemon(workdir, ("true",), init=BLOCK_SIGTERM_THEN_EXEC)
    try:
        assert daemon.exec("trigger").returncode == 0
        daemon.signal(signal.SIGTERM)
        assert daemon.wait(timeout_s=10) == 0
        assert daemon.log.events("broker.stopped")[0]["clean"] is True
    finally:
        daemon.stop()


BUDGET_S = 3.0
EXIT_MARGIN_S = 0.4  # the process's own exit after the budget: the log flushed, the loop closed


@pytest.mark.parametrize("stuck", ["handler", "command"])
def test_a_stuck_run_cannot_stretch_the_shutdown_budget(
    start_daemon: StartDaemon, workdir: Path, stuck: str
) -> None:
    """A handler that ignores cancellation, or a job that ignores SIGTERM with a long grace:
    the daemon exits within ``SHUTDOWN_TIMEOUT`` (plus its own exit), the run with a result."""
    (workdir / "stubborn_handlers.py").write_text(STUBBORN_HANDLER)
    tasks = (
        '[tasks.handler]\nhandler = "stubborn_handlers:stubborn"\n'
        '[tasks.command]\ncommand = ["sh", "-c", "trap \'\' TERM; echo ready; sleep 60"]\n'
        'grace = "60s"\n'
    )
    env = {"PYTHONPATH": str(workdir), "RUNBROKER_SHUTDOWN_TIMEOUT": f"{BUDGET_S:g}s"}
    daemon = start_daemon(tasks_toml=tasks, env=env)
    running = daemon.popen("trigger", stuck)
    daemon.log.wait_for("run.started")
    if stuck == "command":
        daemon.log.wait_for("run.output", lambda line: line["line"] == "ready")
    signalled = time.monotonic()
    daemon.signal(signal.SIGTERM)
    code = daemon.wait(timeout_s=15)
    took_s = time.monotonic() - signalled
    assert took_s <= BUDGET_S + EXIT_MARGIN_S, f"exited {took_s:.2f}s after SIGTERM"
    assert code == (1 if stuck == "handler" else 0)
    _out, err = running.communicate(timeout=20)
    assert running.returncode == 1, err
    assert "cancelled: scheduler shutting down" in err


# PID 1 of the namespace when the daemon is not: it starts the daemon and waits for it, as
# tini or docker-init do (without forwarding: the test signals the daemon itself).
INIT = ["python3", "-c", "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"]
MODES = {"pid1": (), "not_pid1": INIT}


def _start(workdir: Path, mode: str, *command: str, **kwargs: Any) -> tuple[Daemon, int]:
    """The daemon in ``mode``, and its pid as this host sees it (to signal the daemon itself)."""
    daemon = Daemon(workdir, command or ("sh", "-c", RUNNING_JOB), init=MODES[mode], **kwargs)
    if mode == "pid1":
        return daemon, daemon.pid
    (pid,) = eventually(lambda: children_of(daemon.pid), "the init to start the daemon")
    return daemon, pid


def test_every_signal_has_its_documented_effect_when_not_pid_1(workdir: Path) -> None:
    """As PID 1: pid1_scenarios (run by test_broker here and by the container tier)."""
    daemon, pid = _start(workdir, "not_pid1")
    try:
        check_every_signal(daemon, pid, lambda signum: os.kill(pid, signum))
        assert not daemon.socket.exists()
    finally:
        daemon.stop()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "signum", [signal.SIGQUIT, signal.SIGXCPU, signal.SIGPWR], ids=lambda signum: signum.name
)
def test_the_other_stop_signals_drain_like_sigterm(
    workdir: Path, mode: str, signum: signal.Signals
) -> None:
    daemon, pid = _start(workdir, mode)
    try:
        running = daemon.popen("trigger")
        daemon.log.wait_for("run.output", lambda line: line["line"] == "ready")
        os.kill(pid, signum)
        assert daemon.wait() == 0
        (stop,) = daemon.log.events("broker.stop_signal")
        assert stop["signal"] == signum.name
        assert daemon.log.events("broker.stopped")[0]["clean"] is True
        assert running.wait(timeout=20) == 1
        assert len(daemon.log.events("run.done")) == 1
    finally:
        daemon.stop()


CRASHING_HANDLER = """
import asyncio
import ctypes


async def crash_soon(run):
    # A fault of the daemon's own code, a moment after this run: a read of address 0.
    asyncio.get_running_loop().call_later(0.3, ctypes.string_at, 0)
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_fault_of_the_daemons_own_code_is_a_crash_that_leaves_no_job(
    workdir: Path, mode: str
) -> None:
    """A real SIGSEGV is not blocked away: the daemon dies at once (it does not spin on the
    fault) and the job it ran goes with it (as PID 1 the kernel ends the namespace; under an
    init, the init ends when its one child does)."""
    (workdir / "crashing.py").write_text(CRASHING_HANDLER)
    job_pid = workdir / "job.pid"
    tasks = (
        '[tasks.crash]\nhandler = "crashing:crash_soon"\n'
        f'[tasks.job]\ncommand = ["sh", "-c", "echo $$ > {job_pid}; echo ready; sleep 60"]\n'
    )
    daemon, _pid = _start(
        workdir,
        mode,
        tasks_toml=tasks,
        env={"PYTHONPATH": str(workdir), "RUNBROKER_LOG_LEVEL": "info"},
    )
    try:
        namespace = os.readlink(f"/proc/{daemon.pid}/ns/pid")
        assert daemon.exec("trigger", "crash").returncode == 0
        job = daemon.popen("trigger", "job")
        daemon.log.wait_for("run.output", lambda line: line["line"] == "ready")
        code = daemon.wait()
        assert code != 0
        assert job.wait(timeout=20) != 0
        assert not [
            entry for entry in Path("/proc").iterdir() if _in_namespace(entry, namespace)
        ], "a process of the daemon's namespace outlived it"
    finally:
        daemon.stop()


def _in_namespace(entry: Path, namespace: str) -> bool:
    if not entry.name.isdigit():
        return False
    try:
        return os.readlink(entry / "ns" / "pid") == namespace
    except OSError:
        return False


def test_the_run_in_flight_at_shutdown_keeps_its_real_exit_status(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    """A job that catches SIGTERM and exits 0: the shutdown's reason, and its exit status."""
    job = "trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.05; done"
    daemon = start_daemon("sh", "-c", job)
    running = daemon.popen("trigger", "--json")
    daemon.log.wait_for("run.output", lambda line: line["line"] == "ready")
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0
    out, _err = running.communicate(timeout=20)
    done = [json.loads(line) for line in out.splitlines()][-1]
    assert done["event"] == "done"
    assert (done["ok"], done["reason"], done["exit_code"]) == (
        False,
        "cancelled: scheduler shutting down",
        0,
    )
    (logged,) = daemon.log.events("run.done")
    assert (logged["reason"], logged["exit_code"]) == ("cancelled: scheduler shutting down", 0)


SLOW_IMPORT = """
import pathlib
import time

HERE = pathlib.Path(__file__).parent
(HERE / "importing").touch()
while not (HERE / "release").exists():  # start-up holds here until the test releases it
    time.sleep(0.02)


async def run(run):
    return None
"""


@pytest.mark.parametrize("mode", MODES)
def test_signals_during_start_up_are_kept_or_let_go_as_the_table_says(
    workdir: Path, mode: str
) -> None:
    """While the tasks are read: USR1 and the ignored ones let go, QUIT kept for the loop,
    which then drains at once; the daemon is not ended by any of them."""
    (workdir / "slow_import.py").write_text(SLOW_IMPORT)
    tasks = '[tasks.slow]\nhandler = "slow_import:run"\n'
    daemon = Daemon(
        workdir,
        tasks_toml=tasks,
        env={"PYTHONPATH": str(workdir)},
        init=MODES[mode],
        wait_ready=False,
    )
    try:
        eventually((workdir / "importing").exists, "start-up to import the handler module")
        pid = daemon.pid if mode == "pid1" else children_of(daemon.pid)[0]
        for signum in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGQUIT):
            os.kill(pid, signum)
        (workdir / "release").touch()
        assert daemon.wait() == 0
        (stop,) = daemon.log.events("broker.stop_signal")
        assert stop["signal"] == "SIGQUIT"
        assert daemon.log.events("broker.ready")
    finally:
        daemon.stop()
