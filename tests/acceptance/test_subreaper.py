"""Orphans when the daemon is not PID 1 (``docker run --init``, a shared process namespace, a
shell): it is then the child subreaper of its jobs, and reaps their escaped grandchildren as it
does as PID 1."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from tests.support.eventually import eventually
from tests.support.harness import Daemon, children_of, host_pid_of

# PID 1 of the namespace, like tini or docker-init without -s: it starts the daemon and waits
# for that one child by pid, reaping nothing else.
INIT = ["python3", "-c", "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"]


def _host_pid(daemon: Daemon, ns_pid: int) -> int:
    """The pid this host sees for the process ``ns_pid`` of the daemon's namespace."""
    return host_pid_of(daemon.pid, ns_pid)


def _parent(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError("no PPid")


def test_not_pid_1_it_adopts_and_reaps_the_orphans_of_its_jobs(workdir: Path) -> None:
    escaped = workdir / "escaped"
    # The job's grandchild leaves its session and process group, so the job's end does not
    # take it along; its parent exits as soon as it has left (field 6 of stat: the session),
    # since the SIGTERM to the job's group at its end would catch it still inside: an orphan.
    job = (
        f'setsid sleep 60 </dev/null >/dev/null 2>&1 & echo "$!" > {escaped}; '
        """while [ "$(cut -d' ' -f6 /proc/$!/stat)" = "$$" ]; do :; done"""
    )
    daemon = Daemon(workdir, ("sh", "-c", job), init=INIT)
    try:
        (daemon_pid,) = children_of(daemon.pid)  # the daemon is PID 1's child
        status = daemon.exec("status", "--json")
        assert status.returncode == 0, status.stderr
        answer = json.loads(status.stdout)
        assert answer["reaper"] == "subreaper"
        assert answer["pid"] != 1
        assert "as their child subreaper" in daemon.exec("status").stdout
        assert daemon.exec("trigger").returncode == 0
        orphan = _host_pid(daemon, int(escaped.read_text()))
        assert _parent(orphan) == daemon_pid  # came back to the daemon, not to PID 1
        os.kill(orphan, signal.SIGKILL)
        eventually(lambda: not Path(f"/proc/{orphan}").exists(), "the orphan to be reaped")
        assert daemon.zombies() == []
    finally:
        daemon.stop()


def test_as_pid_1_it_says_so(workdir: Path) -> None:
    daemon = Daemon(workdir, ("true",))
    try:
        answer = json.loads(daemon.exec("status", "--json").stdout)
        assert (answer["pid"], answer["reaper"]) == (1, "pid1")
        assert "reaping orphans as PID 1" in daemon.exec("status").stdout
    finally:
        daemon.stop()
