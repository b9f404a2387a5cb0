"""Where the daemon and its jobs work: the daemon in ``/``, holding no directory;
its commands in the directory it was started in (the image's WORKDIR); relative paths in its
settings resolved against that directory at start."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.support.harness import Daemon

TASKS = """
[tasks.pwd]
command = ["pwd"]
[tasks.relative]
command = ["./job.sh"]
"""


def test_the_daemon_works_in_root_and_its_commands_where_it_was_started(workdir: Path) -> None:
    start = workdir / "app"
    start.mkdir()
    (start / "job.sh").write_text('#!/bin/sh\necho job in "$(pwd)"\n')
    (start / "job.sh").chmod(0o755)
    (start / "tasks.toml").write_text(TASKS)
    # Starts the daemon from `start` (exec: it stays PID 1), the tasks file named relatively.
    init = ["sh", "-c", 'cd "$0" && exec "$@"', str(start)]
    daemon = Daemon(workdir, env={"RUNBROKER_TASKS_FILE": "tasks.toml"}, init=init)
    try:
        assert os.readlink(f"/proc/{daemon.pid}/cwd") == "/"
        pwd = daemon.exec("trigger", "pwd")
        assert (pwd.returncode, pwd.stdout) == (0, f"{start}\n"), pwd.stderr
        relative = daemon.exec("trigger", "relative")
        assert (relative.returncode, relative.stdout) == (0, f"job in {start}\n"), relative.stderr
        # The relative tasks file is the one in the start directory, also for a reload.
        (start / "tasks.toml").write_text(TASKS + '[tasks.added]\ncommand = ["true"]\n')
        daemon.signal(signal.SIGHUP)
        (reloaded,) = daemon.log.wait_for("tasks.reloaded")
        assert reloaded["added_tasks"] == ["added"]
        assert reloaded["file"] == str(start / "tasks.toml")
        assert daemon.exec("trigger", "added").returncode == 0
        assert os.readlink(f"/proc/{daemon.pid}/cwd") == "/"  # the spawns moved it back
    finally:
        daemon.stop()
