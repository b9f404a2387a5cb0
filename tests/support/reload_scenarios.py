"""Reloading scenarios shared by two tiers: the acceptance tier (tests/acceptance/test_reload.py,
the daemon PID 1 of an ``unshare`` namespace) and the container tier
(tests/container/test_daemon.py, PID 1 of a container); each imports the tests under their own
names, with its own ``start_daemon``."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

from tests.support.harness import Daemon

StartDaemon = Callable[..., Daemon]

ONE = """
[tasks.first]
command = ["sh", "-c", "echo first"]
"""
TWO = (
    ONE
    + """
[tasks.second]
command = ["sh", "-c", "echo second"]
"""
)


def replace_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` by a rename over it, as an editor or a deployment does."""
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_text(text)
    os.replace(staged, path)


def reload_status(daemon: Daemon) -> dict[str, object]:
    """The ``reload`` part of ``runbroker status --json``."""
    done = daemon.exec("status", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)["reload"]
    assert isinstance(answer, dict)
    return answer


def unwatched_tasks_file(workdir: Path, first: str, then: str) -> tuple[Path, Callable[[], None]]:
    """A tasks file reached through a symlink to a directory (``current``) that the watch
    does not cover, and the swap of that link: a change only SIGHUP or ``reload`` sees."""
    for version, text in (("v1", first), ("v2", then)):
        (workdir / version).mkdir()
        (workdir / version / "tasks.toml").write_text(text)
    (workdir / "current").symlink_to("v1")
    (workdir / "etc").mkdir()
    (workdir / "etc" / "tasks.toml").symlink_to("../current/tasks.toml")

    def swap() -> None:
        (workdir / "current.new").symlink_to("v2")
        os.replace(workdir / "current.new", workdir / "current")

    return workdir / "etc" / "tasks.toml", swap


def test_sighup_reloads_a_task_that_can_then_be_triggered(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    path, swap = unwatched_tasks_file(workdir, ONE, TWO)
    daemon = start_daemon(env={"RUNBROKER_TASKS_FILE": str(path)})
    assert daemon.exec("trigger", "second").returncode == 2  # not defined yet
    swap()
    daemon.signal(signal.SIGHUP)
    (reloaded,) = daemon.log.wait_for("tasks.reloaded")
    assert (reloaded["source"], reloaded["added_tasks"]) == ("signal", ["second"])
    second = daemon.exec("trigger", "second")
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "second"
    assert daemon.exec("trigger", "first").returncode == 0


def test_a_bad_file_is_refused_and_the_old_tasks_keep_working(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = start_daemon(tasks_toml=TWO)
    replace_file(workdir / "tasks.toml", ONE + "[tasks.broken\n")
    (refused,) = daemon.log.wait_for("tasks.reload_refused")
    assert "line 4" in refused["error"]
    assert refused["file"] == str(workdir / "tasks.toml")
    assert daemon.exec("trigger", "second").returncode == 0  # the old tasks stay
    status = reload_status(daemon)
    assert status["last_ok"] is False
    assert "line 4" in str(status["last_error"])
    text = daemon.exec("status")
    assert "FAILED, the old tasks still run" in text.stdout
    health = daemon.exec("health")
    assert health.returncode == 0  # degraded: a restart would not even start
    assert "warning: the last reload of the tasks file failed" in health.stdout
    asked = daemon.exec("reload")
    assert asked.returncode == 1
    assert "runbroker: reload refused: " in asked.stderr
    # one line per refusal (the log may reach the test after the answer: wait for it)
    assert len(daemon.log.wait_for("tasks.reload_refused", count=2)) == 2


def test_a_rename_over_the_file_is_picked_up(start_daemon: StartDaemon, workdir: Path) -> None:
    daemon = start_daemon(tasks_toml=ONE)
    replace_file(workdir / "tasks.toml", TWO)
    (reloaded,) = daemon.log.wait_for("tasks.reloaded")
    assert reloaded["source"] == "file"
    assert reloaded["added"] == 1
    assert daemon.exec("trigger", "second").returncode == 0
    # That a burst of events is one reload is tested on the debounce itself (unit tier):
    # counting reload lines here, right after the first, could not see a second one coming.
