"""Acceptance: a job does not outlive its daemon. When the daemon is not PID 1 (``docker run
--init``, a shared process namespace, a shell) and is killed with SIGKILL, its watchdog sees the
end of its socket and SIGKILLs every job's process group."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.acceptance.harness import Daemon, children_of, host_pid_of
from tests.support.eventually import eventually

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
