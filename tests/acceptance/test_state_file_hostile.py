"""The real daemon as PID 1 with a state directory it cannot trust or cannot write: a
``slots.json`` it did not write (shapes that crashed it, a FIFO, a symlink) never stops the
start, is set aside and said in one line; writes that fail are one incident, shown by
``health`` and ``status`` until a write works again."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.reload_scenarios import StartDaemon

TASKS = """
[tasks.nightly]
command = ["true"]
schedule = "daily 02:30"

[tasks.hourly]
command = ["true"]
interval = "1h"
"""


def _entries(**last_planned: str) -> bytes:
    """A file in the daemon's own shape, each ``last_planned`` written as the JSON text given."""
    tasks = ", ".join(f'"{task}": {{"last_planned": {at}}}' for task, at in last_planned.items())
    return b'{"format": "runbroker.slots", "version": 1, "tasks": {' + tasks.encode() + b"}}"


def _write(content: bytes) -> Callable[[Path], object]:
    return lambda path: path.write_bytes(content)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _symlink(path: Path) -> None:
    target = path.with_name("elsewhere.json")
    target.write_text(json.dumps({"format": "runbroker.slots", "version": 1, "tasks": {}}))
    path.symlink_to(target)


HOSTILE: dict[str, tuple[Callable[[Path], object], str]] = {
    "200,000 nested [": (_write(b"[" * 200_000), "recursion limit"),
    "a last_planned of 400 digits": (
        _write(_entries(nightly="9" * 400)),
        "tasks.nightly.last_planned",
    ),
    "a cron task's -1e12": (_write(_entries(nightly="-1e12")), "tasks.nightly.last_planned"),
    "an interval task's -1e300": (_write(_entries(hourly="-1e300")), "tasks.hourly.last_planned"),
    "a FIFO": (_fifo, "not a regular file"),
    "a symlink": (_symlink, "cannot be opened as a plain file"),
}


@pytest.mark.parametrize("shape", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_state_file_the_daemon_did_not_write_never_stops_its_start(
    start_daemon: StartDaemon, workdir: Path, shape: tuple[Callable[[Path], object], str]
) -> None:
    make, why = shape
    state = workdir / "state"
    state.mkdir()
    make(state / "slots.json")
    daemon = start_daemon(tasks_toml=TASKS, env={"RUNBROKER_STATE_DIR": str(state)})
    (refused,) = daemon.log.wait_for("state.refused")
    assert why in refused["problem"]
    assert "kept as slots.json.refused; no catch-up this start" in refused["problem"]
    assert os.path.lexists(state / "slots.json.refused")
    status = daemon.exec("status", "--json")  # the ticker has started by the time it answers
    assert status.returncode == 0, status.stderr
    ticks = {tick["task"]: tick for tick in json.loads(status.stdout)["ticks"]}
    assert ticks["nightly"]["next_at"] is not None
    assert ticks["hourly"]["next_at"] is not None
    assert daemon.exec("trigger", "nightly").returncode == 0  # and it runs jobs
    assert len(daemon.log.events("state.refused")) == 1
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0
    written = json.loads((state / "slots.json").read_text())  # its own file, fresh
    assert set(written["tasks"]) == {"nightly", "hourly"}


def test_writes_that_fail_are_one_incident_shown_until_one_works(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    """As root no permission stops a write: a directory where the temporary file goes does."""
    state = workdir / "state"
    state.mkdir()
    blocker = state / "slots.json.tmp"
    blocker.mkdir()
    toml = '[tasks.often]\ncommand = ["true"]\ninterval = "1s"\n'
    daemon = start_daemon(tasks_toml=toml, env={"RUNBROKER_STATE_DIR": str(state)})
    (failed,) = daemon.log.wait_for("state.write_failed")
    assert failed["error"] == "Is a directory"
    daemon.log.wait_for("slot.ran", count=3)  # a slot a second, each write failing
    assert len(daemon.log.events("state.write_failed")) == 1
    health = daemon.exec("health")
    assert health.returncode == 0, health.stderr  # the daemon itself works
    assert "warning: state directory" in health.stdout
    assert "writes failing since" in health.stdout
    status = json.loads(daemon.exec("status", "--json").stdout)["state"]
    assert status["error"] == "Is a directory"
    assert status["write_failures"] >= 2
    blocker.rmdir()
    daemon.log.wait_for("state.write_restored")
    assert "warning" not in daemon.exec("health").stdout
    assert json.loads(daemon.exec("status", "--json").stdout)["state"]["failing_since"] is None
    assert len(daemon.log.events("state.write_failed")) == 1
    assert "often" in json.loads((state / "slots.json").read_text())["tasks"]
