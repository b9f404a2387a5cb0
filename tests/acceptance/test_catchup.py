"""Catch-up across restarts with a state directory, on the real daemon as PID 1: a daily slot
planned while the container was down runs once at start and is recorded as caught up; the next
start runs nothing; a second daemon on the directory is refused; without the directory nothing
is caught up."""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.support.reload_scenarios import StartDaemon


def _nightly(workdir: Path) -> tuple[str, datetime]:
    """A daily task whose slot passed an hour ago, and that slot's time."""
    slot = (datetime.now(UTC) - timedelta(hours=1)).replace(second=0, microsecond=0)
    runs = workdir / "runs"
    toml = (
        "[tasks.nightly]\n"
        f'command = ["sh", "-c", "echo ran >> {runs}"]\n'
        f'schedule = "daily {slot:%H:%M}"\n'
    )
    return toml, slot


def _state_file(state: Path, **last_planned: float) -> None:
    """What the daemon of the container's last life wrote."""
    state.mkdir(exist_ok=True)
    tasks = {task: {"last_planned": at} for task, at in last_planned.items()}
    document: dict[str, Any] = {"format": "runbroker.slots", "version": 1, "tasks": tasks}
    (state / "slots.json").write_text(json.dumps(document))


def _runs(workdir: Path) -> list[str]:
    path = workdir / "runs"
    return path.read_text().splitlines() if path.exists() else []


def test_a_restart_across_a_daily_slot_runs_it_once(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    toml, slot = _nightly(workdir)
    state = workdir / "state"
    _state_file(state, nightly=(slot - timedelta(days=1)).timestamp())  # ran yesterday's
    env = {"RUNBROKER_STATE_DIR": str(state)}
    daemon = start_daemon(tasks_toml=toml, env=env)
    (caught_up,) = daemon.log.wait_for("slot.caught_up")
    assert caught_up["task"] == "nightly"
    assert caught_up["result"] == "succeeded"
    assert datetime.fromisoformat(caught_up["planned_at"]) == slot
    assert _runs(workdir) == ["ran"]
    daemon.stop()
    written = json.loads((state / "slots.json").read_text())
    assert written["tasks"]["nightly"]["last_planned"] == slot.timestamp()

    again = start_daemon(tasks_toml=toml, env=env)  # the slot is accounted for: nothing to run
    assert again.exec("status").returncode == 0  # the ticker has started by the time it answers
    assert again.log.events("slot.caught_up") == []
    assert _runs(workdir) == ["ran"]


def test_a_second_daemon_on_the_state_directory_is_refused(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    toml, _slot = _nightly(workdir)
    env = {"RUNBROKER_STATE_DIR": str(workdir / "state")}
    start_daemon(tasks_toml=toml, env=env)
    second = start_daemon(tasks_toml=toml, env=env, wait_ready=False)
    assert second.wait() == 2
    said = second.stderr()
    assert "RUNBROKER_STATE_DIR" in said
    assert "in use by another runbroker daemon" in said


def test_a_corrupt_state_file_is_set_aside_and_the_daemon_starts(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    toml, _slot = _nightly(workdir)
    state = workdir / "state"
    state.mkdir()
    (state / "slots.json").write_text("{torn")
    daemon = start_daemon(tasks_toml=toml, env={"RUNBROKER_STATE_DIR": str(state)})
    (refused,) = daemon.log.wait_for("state.refused")
    assert "no catch-up this start" in refused["problem"]
    assert (state / "slots.json.refused").read_text() == "{torn"
    assert daemon.exec("status").returncode == 0


def test_without_a_state_directory_nothing_is_caught_up(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    toml, _slot = _nightly(workdir)
    daemon = start_daemon(tasks_toml=toml)
    assert daemon.exec("status").returncode == 0
    assert daemon.log.events("slot.caught_up") == []
    assert _runs(workdir) == []


def test_a_slot_past_its_start_deadline_is_missed_at_start_not_run(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    toml, slot = _nightly(workdir)  # its slot passed an hour ago
    toml += 'start_deadline = "10m"\n'
    state = workdir / "state"
    _state_file(state, nightly=(slot - timedelta(days=1)).timestamp())
    daemon = start_daemon(tasks_toml=toml, env={"RUNBROKER_STATE_DIR": str(state)})
    (missed,) = daemon.log.wait_for("slot.missed")
    assert datetime.fromisoformat(missed["planned_at"]) == slot
    assert missed["reason"] == "the daemon was down; older than its start_deadline of 600s"
    assert daemon.log.events("slot.caught_up") == []
    assert _runs(workdir) == []


def test_a_slot_kept_a_day_ahead_counts_from_now(start_daemon: StartDaemon, workdir: Path) -> None:
    """The host's clock was ahead when the last life wrote the file: the start counts from
    now, so the next restart catches up again."""
    toml, _slot = _nightly(workdir)
    state = workdir / "state"
    ahead = datetime.now(UTC) + timedelta(days=1)
    _state_file(state, nightly=ahead.timestamp())
    daemon = start_daemon(tasks_toml=toml, env={"RUNBROKER_STATE_DIR": str(state)})
    (future,) = daemon.log.wait_for("state.future_slot")
    assert future["task"] == "nightly"
    assert 86_000 < future["ahead_s"] <= 86_400
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0
    kept = json.loads((state / "slots.json").read_text())["tasks"]["nightly"]["last_planned"]
    assert kept < datetime.now(UTC).timestamp()
