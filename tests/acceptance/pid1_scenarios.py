"""What the daemon does as PID 1 when signalled and when orphans reach it, written once and run
by two tiers: the acceptance tier (tests/acceptance/test_broker.py, PID 1 of an ``unshare``
namespace) and the container tier (tests/container/test_daemon.py, PID 1 of a container on the
real engine). Each tier's ``start_daemon`` fixture decides where the daemon runs; a module that
imports these functions has pytest collect them as its own tests."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

from tests.acceptance.backends import DaemonHandle
from tests.support.eventually import eventually

__all__ = [
    "test_orphans_leave_no_zombies",
    "test_second_signal_forces_exit",
    "test_sigterm_during_a_run",
]

StartDaemon = Callable[..., DaemonHandle]


def test_sigterm_during_a_run(start_daemon: StartDaemon, workdir: Path) -> None:
    marker = workdir / "got-term"
    job = f"trap 'echo term > {marker}; exit 143' TERM; echo ready; while :; do sleep 0.05; done"
    daemon = start_daemon("sh", "-c", job, env={"RUNBROKER_GRACE": "5s"})
    running = daemon.popen("trigger")
    daemon.log.wait_for("run.output", lambda line: line["line"] == "ready")
    waiting = [daemon.popen("trigger", "--json") for _ in range(2)]
    daemon.log.wait_for("run.queued", count=3)
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0
    assert marker.read_text().strip() == "term"
    assert running.wait(timeout=20) == 1
    for client in waiting:
        out, _err = client.communicate(timeout=20)
        done = [json.loads(line) for line in out.splitlines()][-1]
        assert done["event"] == "done"
        assert done["reason"] == "cancelled: scheduler shutting down"
        assert client.returncode == 1
    assert daemon.log.events("broker.stopped")[0]["clean"] is True
    # Every accepted run has exactly one run.done in the log, the two cancelled in the queue too.
    done_lines = daemon.log.events("run.done")
    assert len(done_lines) == 3
    assert len({line["run_id"] for line in done_lines}) == 3
    cancelled = [line for line in done_lines if line.get("cancelled")]
    assert [line["reason"] for line in cancelled] == ["cancelled: scheduler shutting down"] * 2
    assert all((line["task"], line["trigger"]) == ("default", "external") for line in done_lines)


def test_second_signal_forces_exit(start_daemon: StartDaemon, workdir: Path) -> None:
    job = "trap '' TERM; echo ready; while :; do sleep 0.05; done"  # ignores SIGTERM
    daemon = start_daemon("sh", "-c", job, env={"RUNBROKER_GRACE": "60s"})
    daemon.popen("trigger")
    daemon.log.wait_for("run.output", lambda line: line["line"] == "ready")
    daemon.signal(signal.SIGTERM)
    daemon.log.wait_for("broker.draining")
    daemon.signal(signal.SIGTERM)
    code = daemon.wait()
    assert code == 1, "\n".join(daemon.log.raw)


def test_orphans_leave_no_zombies(start_daemon: StartDaemon, workdir: Path) -> None:
    # 25 orphans stay in the job's process group, 25 escape it with setsid; all are
    # reparented to PID 1 when the job's shell exits.
    job = "for i in $(seq 25); do (sleep 0.3 &) ; (setsid sleep 0.3 &) ; done; echo spawned"
    daemon = start_daemon("sh", "-c", job)
    result = daemon.exec("trigger")
    assert result.returncode == 0
    assert result.stdout.strip() == "spawned"

    def no_sleepers_left() -> bool:
        return not any(_command_name(pid) == "sleep" for pid in _namespace_pids(daemon))

    eventually(no_sleepers_left, "the orphans to exit and be reaped")
    assert daemon.zombies() == []


def _command_name(pid: int) -> str:
    """A process's name, or "" once it has gone (it may exit after it was listed)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def _namespace_pids(daemon: DaemonHandle) -> list[int]:
    pids = []
    target = os.readlink(f"/proc/{daemon.pid}/ns/pid")
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "ns" / "pid") == target:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids
