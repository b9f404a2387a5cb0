"""Writes of the state directory that fail (a full disk): one incident, said when it starts and
when a write works again, shown meanwhile by the state's status and health warning, and the
file written again once it can be, with nothing new planned."""

from __future__ import annotations

import asyncio
import errno
import json
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest

from daemon.core.ticker import slot_state
from daemon.core.ticker.slot_state import STATE_FILE, SlotState
from tests.support.eventually import eventually_async

Logs = list[MutableMapping[str, Any]]


class FullDisk:
    """The file's replacement, failing as a full disk does while ``full``."""

    def __init__(self, state: SlotState) -> None:
        self.full = True
        self.tried = 0
        self._real = state._replace

    def __call__(self, data: bytes) -> None:
        self.tried += 1
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device")
        self._real(data)


def _on_a_full_disk(directory: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SlotState, FullDisk]:
    state = SlotState(directory)
    state.open()
    disk = FullDisk(state)
    monkeypatch.setattr(state, "_replace", disk)
    return state, disk


def _named(logs: Logs, event: str) -> Logs:
    return [line for line in logs if line["event"] == event]


def test_thirty_failed_writes_are_one_incident_said_once_and_once_more_when_it_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logs: Logs
) -> None:
    state, disk = _on_a_full_disk(tmp_path, monkeypatch)
    for second in range(30):  # a ticking task's slot every second
        state.planned("every_second", 1_780_000_000.0 + second)
        assert not state.write()
    assert disk.tried == 30
    (failed,) = _named(logs, "state.write_failed")
    assert failed["error"] == "No space left on device"
    assert failed["log_level"] == "error"
    status = state.status()
    assert status["write_failures"] == 30
    assert status["error"] == "No space left on device"
    assert status["failing_since"] is not None
    (warning,) = state.health_warnings()
    assert str(tmp_path) in warning
    assert "writes failing since" in warning
    assert "No space left on device" in warning

    disk.full = False
    assert state.write()
    (restored,) = _named(logs, "state.write_restored")
    assert restored["failing_for_s"] >= 0
    assert len(_named(logs, "state.write_failed")) == 1
    assert state.status() == {
        "dir": str(tmp_path),
        "write_failures": 30,
        "failing_since": None,
        "error": None,
    }
    assert state.health_warnings() == []
    written = json.loads((tmp_path / STATE_FILE).read_text())
    assert written["tasks"] == {"every_second": {"last_planned": 1_780_000_029.0}}

    disk.full = True  # a second incident is said again
    state.planned("every_second", 1_780_000_030.0)
    assert not state.write()
    assert len(_named(logs, "state.write_failed")) == 2
    state.close()


async def test_the_writer_tries_again_after_a_failure_with_nothing_new_planned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logs: Logs
) -> None:
    monkeypatch.setattr(slot_state, "WRITE_RETRY_S", 0.01)
    state, disk = _on_a_full_disk(tmp_path, monkeypatch)
    writer = asyncio.create_task(state.keep_written())
    state.planned("nightly", 1_780_000_000.0)
    await eventually_async(lambda: disk.tried >= 2, "the failed write tried again")
    disk.full = False  # the disk was cleaned up; nothing more is planned
    await eventually_async(lambda: (tmp_path / STATE_FILE).exists(), "the state written")
    writer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writer
    assert len(_named(logs, "state.write_failed")) == 1
    assert len(_named(logs, "state.write_restored")) == 1
    assert state.status()["failing_since"] is None
    state.close()
