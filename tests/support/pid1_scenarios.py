"""What the daemon does as PID 1 when signalled and when orphans reach it, written once and run
by two tiers: the acceptance tier (tests/acceptance/test_broker.py, PID 1 of an ``unshare``
namespace) and the container tier (tests/container/test_daemon.py, PID 1 of a container on the
real engine). Each tier's ``daemon_backend`` fixture decides where ``start_daemon`` runs the
daemon; a module that imports these functions has pytest collect them as its own tests."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

from daemon.broker.signal_plan import FAULT_SIGNALS, IGNORED_SIGNALS
from tests.support.backends import DaemonHandle
from tests.support.eventually import eventually

__all__ = [
    "test_every_signal_has_its_documented_effect",
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


def test_every_signal_has_its_documented_effect(start_daemon: StartDaemon, workdir: Path) -> None:
    daemon = start_daemon("sh", "-c", RUNNING_JOB)
    check_every_signal(daemon, daemon.pid, daemon.signal)


RUNNING_JOB = "trap 'exit 143' TERM; echo ready; while :; do sleep 0.05; done"


def check_every_signal(daemon: DaemonHandle, pid: int, send: Callable[[int], None]) -> None:
    """The signals whose default ends a process that is not PID 1, sent by ``send`` to the
    daemon (``pid``, as this host sees it) while it runs ``RUNNING_JOB``: each does what
    daemon/broker/signal_plan.py and the README say; then SIGTERM drains as ever."""
    running = daemon.popen("trigger")
    daemon.log.wait_for("run.output", lambda line: line["line"] == "ready")
    for count, signum in enumerate(IGNORED_SIGNALS, start=1):
        send(signum)
        noted = daemon.log.wait_for("signal.ignored", count=count)
        assert noted[-1]["signal"] == signal.Signals(signum).name
    send(signal.SIGUSR1)
    (dump,) = daemon.log.wait_for("broker.status")
    assert dump["status"]["current"]["task"] == "default"
    for signum in FAULT_SIGNALS:
        send(signum)  # blocked: pending, never acted on
    assert set(FAULT_SIGNALS) <= _pending(pid)
    status = daemon.exec("status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["current"]["task"] == "default"  # the job still runs
    assert daemon.log.events("broker.stopping") == []
    send(signal.SIGTERM)
    assert daemon.wait() == 0
    assert running.wait(timeout=20) == 1  # cancelled by the shutdown
    (done,) = daemon.log.events("run.done")
    assert done["reason"] == "cancelled: scheduler shutting down"


def _pending(pid: int) -> set[int]:
    """The signals pending for the whole process ``pid`` (its ShdPnd mask)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("ShdPnd:"):
            mask = int(line.split()[1], 16)
            return {bit + 1 for bit in range(64) if mask >> bit & 1}
    raise AssertionError("no ShdPnd")


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
