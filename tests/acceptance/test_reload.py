"""Reloading the tasks file of a running daemon, PID 1 of its namespace: SIGHUP, a
change on disk (a rename over the file, a ConfigMap's symlink swap), ``runbroker reload``; a
bad file refused with the old tasks still running; a reload under load that loses nothing."""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

from tests.support.reload_scenarios import (
    ONE,
    TWO,
    StartDaemon,
    reload_status,
    replace_file,
    test_a_bad_file_is_refused_and_the_old_tasks_keep_working,
    test_a_rename_over_the_file_is_picked_up,
    test_sighup_reloads_a_task_that_can_then_be_triggered,
    unwatched_tasks_file,
)

__all__ = [
    "test_a_bad_file_is_refused_and_the_old_tasks_keep_working",
    "test_a_rename_over_the_file_is_picked_up",
    "test_sighup_reloads_a_task_that_can_then_be_triggered",
]


def test_a_file_nested_too_deeply_is_refused_and_the_daemon_stays_up(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    """tomllib raises RecursionError on it: a refusal by the watch, by SIGHUP and over the
    socket, never an exception that ends the daemon or leaves the client without an answer."""
    daemon = start_daemon(tasks_toml=TWO)
    replace_file(
        workdir / "tasks.toml", "[tasks.first]\ncommand = " + "[" * 3000 + "]" * 3000 + "\n"
    )
    (refused,) = daemon.log.wait_for("tasks.reload_refused")
    assert "RecursionError" in refused["error"]
    daemon.signal(signal.SIGHUP)
    daemon.log.wait_for("tasks.reload_refused", count=2)
    asked = daemon.exec("reload")
    assert asked.returncode == 1, asked.stderr
    assert "RecursionError" in asked.stderr
    assert daemon.exec("trigger", "second").returncode == 0  # up, with the old tasks
    replace_file(workdir / "tasks.toml", ONE)
    daemon.log.wait_for("tasks.reloaded")
    assert daemon.exec("reload").returncode == 0


BASE_EXCEPTIONS_AT_IMPORT = {
    "rl_interrupt": "raise KeyboardInterrupt('at import')",
    "rl_generator": "raise GeneratorExit('at import')",
    "rl_own": "class Odd(BaseException):\n    pass\nraise Odd('its own')",
}


def test_a_handler_module_raising_a_base_exception_at_import_is_a_refused_reload(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    """By the file watch, by SIGHUP and by ``runbroker reload``: each a refusal with the old
    tasks still running, never the end of PID 1."""
    for module, body in BASE_EXCEPTIONS_AT_IMPORT.items():
        (workdir / f"{module}.py").write_text(body + "\n")
    daemon = start_daemon(tasks_toml=ONE, env={"PYTHONPATH": str(workdir)})
    refusals = 0
    for module in BASE_EXCEPTIONS_AT_IMPORT:
        replace_file(workdir / "tasks.toml", ONE + f"[tasks.bad]\nhandler = '{module}:run'\n")
        refusals += 1
        daemon.log.wait_for("tasks.reload_refused", count=refusals)
        daemon.signal(signal.SIGHUP)
        refusals += 1
        daemon.log.wait_for("tasks.reload_refused", count=refusals)
        asked = daemon.exec("reload")
        refusals += 1
        assert asked.returncode == 1, asked.stderr
        assert "reload refused" in asked.stderr
        assert "at import" in asked.stderr or "its own" in asked.stderr
        assert daemon.exec("trigger", "first").returncode == 0  # the old tasks still run
    assert daemon.exec("trigger", "bad").returncode == 2
    errors = [line["error"] for line in daemon.log.wait_for("tasks.reload_refused", count=9)]
    assert any("KeyboardInterrupt: at import" in error for error in errors)
    assert any("GeneratorExit: at import" in error for error in errors)
    assert any("Odd: its own" in error for error in errors)
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0


def test_a_fifo_as_the_tasks_file_is_refused_and_never_hangs_pid_1(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    """At start-up a configuration error (exit 2, one line); later a refused reload by the
    watch, SIGHUP and ``runbroker reload``, with the daemon answering and stopping as ever."""
    fifo = workdir / "fifo.toml"
    os.mkfifo(fifo)
    refused = start_daemon(env={"RUNBROKER_TASKS_FILE": str(fifo)}, wait_ready=False)
    assert refused.wait() == 2
    err = refused.stderr().strip()
    assert err == f"runbroker: tasks file {fifo}: not a regular file (a FIFO)"
    daemon = start_daemon(tasks_toml=ONE)
    os.replace(fifo, workdir / "tasks.toml")
    (by_watch,) = daemon.log.wait_for("tasks.reload_refused")
    assert "not a regular file (a FIFO)" in by_watch["error"]
    daemon.signal(signal.SIGHUP)
    daemon.log.wait_for("tasks.reload_refused", count=2)
    asked = daemon.exec("reload")
    assert asked.returncode == 1
    assert "not a regular file (a FIFO)" in asked.stderr
    assert daemon.exec("health").returncode == 0
    assert daemon.exec("trigger", "first").returncode == 0  # the old tasks still run
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0


def test_runbroker_reload_prints_the_outcome(start_daemon: StartDaemon, workdir: Path) -> None:
    path, swap = unwatched_tasks_file(workdir, ONE, TWO.replace("echo first", "echo changed"))
    daemon = start_daemon(env={"RUNBROKER_TASKS_FILE": str(path)})
    swap()
    done = daemon.exec("reload")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "reloaded: 1 added (second), 0 removed, 1 changed (first), 0 unchanged\n"
    assert daemon.exec("trigger", "first").stdout.strip() == "changed"
    status = reload_status(daemon)
    assert status["last_source"] == "request"
    assert status["last_changes"] == {"added": 1, "removed": 0, "changed": 1, "unchanged": 0}
    again = daemon.exec("reload")
    assert again.stdout == "reloaded: 0 added, 0 removed, 0 changed, 2 unchanged\n"


def test_without_a_tasks_file_reload_says_there_is_none(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = start_daemon("true")
    done = daemon.exec("reload")
    assert done.returncode == 1
    assert "no tasks file to reload" in done.stderr
    daemon.signal(signal.SIGHUP)  # handled (PID 1 would drop it), refused in the log
    daemon.log.wait_for("tasks.reload_refused")
    assert daemon.exec("trigger").returncode == 0


def _configmap_version(directory: Path, name: str, text: str) -> None:
    """The kubelet's update of a ConfigMap volume: a new timestamped directory, ``..data_tmp``
    pointed at it and renamed over ``..data``, the old directory removed."""
    (directory / name).mkdir()
    (directory / name / "tasks.toml").write_text(text)
    data = directory / "..data"
    old = os.readlink(data) if data.is_symlink() else None
    (directory / "..data_tmp").symlink_to(name)
    os.rename(directory / "..data_tmp", data)
    if old is not None:
        (directory / old / "tasks.toml").unlink()
        (directory / old).rmdir()


def test_a_configmap_symlink_swap_is_picked_up_without_a_signal(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    volume = workdir / "config"
    volume.mkdir()
    _configmap_version(volume, "..2026_03_02_08_55_00.1", ONE)
    (volume / "tasks.toml").symlink_to("..data/tasks.toml")
    daemon = start_daemon(env={"RUNBROKER_TASKS_FILE": str(volume / "tasks.toml")})
    _configmap_version(volume, "..2026_03_02_08_56_00.2", TWO)
    daemon.log.wait_for("tasks.reloaded", lambda line: line["added_tasks"] == ["second"])
    assert daemon.exec("trigger", "second").returncode == 0
    _configmap_version(volume, "..2026_03_02_08_57_00.3", ONE)
    daemon.log.wait_for("tasks.reloaded", lambda line: line["removed_tasks"] == ["second"])
    assert daemon.exec("trigger", "second").returncode == 2
    assert reload_status(daemon)["watch"] == "inotify"


LOADED = """
[tasks.gate]
command = ["sh", "-c", 'while [ ! -e "$0" ]; do sleep 0.02; done', "{release}"]
[tasks.steady]
command = ["sh", "-c", "echo {version}"]
[tasks.flips]
command = ["sh", "-c", "echo flips"]
"""


def test_a_reload_under_load_loses_nothing(start_daemon: StartDaemon, workdir: Path) -> None:
    """Triggers queued behind a blocked run while the file flips between versions (every
    other one removes ``flips`` and changes ``steady``) and is reloaded again and again, by
    SIGHUP and by ``runbroker reload``: every trigger gets exactly one result, nothing is
    lost; a queued ``flips`` removed by the last reload ends with the reason."""
    release = workdir / "release"

    def version(number: int) -> str:
        text = LOADED.format(release=release, version=f"v{number}")
        return text if number % 2 == 0 else text.split("[tasks.flips]")[0]

    path = workdir / "tasks.toml"
    daemon = start_daemon(tasks_toml=version(0), env={"RUNBROKER_QUEUE_CAPACITY": "200"})
    gate = daemon.popen("trigger", "gate")
    daemon.log.wait_for("run.started", lambda line: line["task"] == "gate")
    clients: list[tuple[str, subprocess.Popen[str]]] = []
    for number in range(1, 8):
        for _ in range(3):
            clients.append(("steady", daemon.popen("trigger", "steady")))
            clients.append(("flips", daemon.popen("trigger", "flips")))
        if number == 1:  # the first ones are queued while flips is still defined
            daemon.log.wait_for("run.queued", lambda line: line["task"] == "flips", count=3)
        replace_file(path, version(number))
        if number % 2:
            daemon.signal(signal.SIGHUP)
        else:
            assert daemon.exec("reload").returncode == 0
    # The last version (7) removes flips; asked for, its reload is in force when this returns.
    assert daemon.exec("reload").returncode == 0
    release.touch()
    codes: Counter[tuple[str, int]] = Counter()
    for task, client in clients:
        out, err = client.communicate(timeout=60)
        codes[(task, client.returncode)] += 1
        if task == "steady":  # queued under v1..v7, run with the definition of v7
            assert (client.returncode, out) == (0, "v7\n"), err
        elif client.returncode == 1:  # queued, then removed before it ran
            assert "task 'flips' was removed by a reload" in err
        else:  # ran while defined, or refused at once while removed
            assert client.returncode in (0, 2), err
    assert gate.wait(timeout=60) == 0
    queued = daemon.log.events("run.queued")
    done = daemon.log.wait_for("run.done", count=len(queued))
    assert Counter(line["run_id"] for line in done) == Counter(line["run_id"] for line in queued)
    assert codes[("steady", 0)] == 21
    assert codes[("flips", 1)] >= 3  # at least the first three, queued before any reload
    assert len(daemon.log.events("tasks.reloaded")) >= 4
