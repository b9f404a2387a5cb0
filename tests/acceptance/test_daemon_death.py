"""Acceptance: a job does not outlive its daemon. When the daemon is not PID 1 (``docker run
--init``, a shared process namespace, a shell) and is killed with SIGKILL, or crashes on a fault
of its own code, its watchdog sees the end of its pipe and SIGKILLs every job's process group."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.support.eventually import eventually
from tests.support.harness import (
    Daemon,
    children_of,
    host_pid_of,
    processes_in_pid_namespace_of,
)

# PID 1 of the namespace starts the daemon and outlives it (as an init whose container goes
# on), so the namespace's end does not kill the job in its stead.
INIT = ["sh", "-c", '"$@"; exec sleep 3600', "init"]


def _host_pid(daemon: Daemon, ns_pid: int) -> int:
    """The pid this host sees for the process ``ns_pid`` of the daemon's namespace."""
    return host_pid_of(daemon.pid, ns_pid)


def _running(pid: int) -> bool:
    """Whether ``pid`` is alive (a zombie has ended: nobody reaps it under this init)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")


def _watchdogs(daemon: Daemon) -> list[Path]:
    """/proc/N of every watchdog process in the daemon's namespace."""
    found = []
    for entry in processes_in_pid_namespace_of(daemon.pid):
        try:
            if b"watchdog_main" in (entry / "cmdline").read_bytes():
                found.append(entry)
        except OSError:
            continue  # gone meanwhile
    return found


def test_as_pid_1_without_a_database_no_watchdog_runs(workdir: Path) -> None:
    """The kernel ends the namespace with its PID 1: a watchdog would protect nothing."""
    daemon = Daemon(workdir, ("true",))
    try:
        (ready,) = daemon.log.events("broker.ready")
        assert ready["watchdog"] is False
        assert daemon.exec("trigger").returncode == 0
        assert _watchdogs(daemon) == []
    finally:
        daemon.stop()


def test_a_daemon_that_is_not_pid_1_runs_its_watchdog_from_its_first_command(
    workdir: Path,
) -> None:
    """Until a command runs there is no group to kill: the watchdog starts with the first."""
    daemon = Daemon(workdir, ("true",), init=INIT)
    try:
        (ready,) = daemon.log.events("broker.ready")
        assert ready["watchdog"] is True
        (daemon_pid,) = children_of(daemon.pid)
        assert _watchdogs(daemon) == []
        assert daemon.exec("trigger").returncode == 0
        eventually(lambda: _watchdogs(daemon), "the watchdog")
        assert daemon.exec("trigger").returncode == 0
        (watchdog,) = _watchdogs(daemon)
        assert int(watchdog.name) in children_of(daemon_pid)
    finally:
        daemon.stop()


def test_a_job_does_not_outlive_a_daemon_killed_with_sigkill(workdir: Path) -> None:
    job_pid_file = workdir / "job.pid"
    job = f'echo "$$" > {job_pid_file}; trap "" TERM; exec sleep 60'
    daemon = Daemon(workdir, ("sh", "-c", job), init=INIT)
    try:
        (daemon_pid,) = children_of(daemon.pid)  # the daemon is PID 1's child
        assert daemon.exec("trigger", "--detach").returncode == 0
        eventually(lambda: job_pid_file.exists() and job_pid_file.read_text().strip(), "the job")
        job_pid = _host_pid(daemon, int(job_pid_file.read_text()))
        assert _running(job_pid)
        os.kill(daemon_pid, signal.SIGKILL)
        eventually(lambda: not _running(job_pid), "the job to end with its daemon", timeout_s=5)
    finally:
        daemon.stop()


# A fault of the daemon's own code (a read of address 0) once the file GO exists: the handler
# returns at once and leaves a check on the loop behind, so the fault comes while a job runs.
CRASH_WHEN_TOLD = """
import asyncio
import ctypes
import os


async def crash_when_told(run):
    loop = asyncio.get_running_loop()

    def check():
        if os.path.exists("GO"):
            ctypes.string_at(0)
        loop.call_later(0.01, check)

    check()
"""


def test_a_job_does_not_outlive_a_daemon_that_crashes_on_a_fault(workdir: Path) -> None:
    """A real SIGSEGV of the daemon's own code, with the process above it living on (a pod's
    shared process namespace): the job it was running goes with it all the same."""
    go = workdir / "go"
    (workdir / "crashing.py").write_text(CRASH_WHEN_TOLD.replace("GO", str(go)))
    job_pid_file = workdir / "job.pid"
    tasks = (
        '[tasks.crash]\nhandler = "crashing:crash_when_told"\n'
        f'[tasks.job]\ncommand = ["sh", "-c", \'echo "$$" > {job_pid_file}; exec sleep 60\']\n'
    )
    daemon = Daemon(workdir, init=INIT, tasks_toml=tasks, env={"PYTHONPATH": str(workdir)})
    try:
        (daemon_pid,) = children_of(daemon.pid)
        assert daemon.exec("trigger", "crash").returncode == 0
        assert daemon.exec("trigger", "job", "--detach").returncode == 0
        eventually(lambda: job_pid_file.exists() and job_pid_file.read_text().strip(), "the job")
        job_pid = _host_pid(daemon, int(job_pid_file.read_text()))
        assert _running(job_pid)
        go.touch()
        eventually(lambda: not _running(daemon_pid), "the daemon to crash", timeout_s=10)
        eventually(lambda: not _running(job_pid), "the job to end with its daemon", timeout_s=5)
        assert _running(daemon.pid), "the process above the daemon lives on"
    finally:
        daemon.stop()
