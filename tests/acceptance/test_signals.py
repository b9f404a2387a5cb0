"""What each signal does to the daemon, as PID 1 and not (issue 23): the stop signals drain,
SIGUSR1 writes a status line, the others are logged and ignored; a signal mask inherited from
the parent does not keep the daemon from hearing them."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.acceptance.harness import Daemon

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


STUBBORN_HANDLER = """
import asyncio


async def stubborn(run):
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass  # ignores cancellation
"""
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
