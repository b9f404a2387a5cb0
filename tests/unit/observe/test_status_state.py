"""A state directory whose writes fail (a full disk) is shown while it lasts: in ``status`` (its
answer and the text people read), as a ``health`` warning (the daemon itself works: healthy,
exit 0) and in the metrics; once a write works again, all of it clears."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import orjson
import pytest

from daemon import settings as settings_module
from daemon.broker.app import Broker
from daemon.broker.signals import Signals
from daemon.core.tasks import Task, TaskRegistry
from daemon.core.ticker.slot_state import SlotState
from daemon.face.status_text import render_status
from daemon.observe.metrics import Metrics
from daemon.observe.status import health_answer, status_answer
from daemon.wire.control_shapes import HealthAnswer, StatusAnswer
from tests.unit.observe.test_status_health import mismatches


def _full_disk(_data: bytes) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture
def broker(clean_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Broker:
    monkeypatch.setenv("RUNBROKER_SOCKET", str(tmp_path / "rb.sock"))
    monkeypatch.setenv("RUNBROKER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("RUNBROKER_INTERVAL", "1s")
    settings = settings_module.load_settings()
    tasks = TaskRegistry({"default": Task("default", command=("true",))})
    return Broker(settings, tasks, Signals())


def _state(broker: Broker) -> SlotState:
    assert broker.slot_state is not None
    return broker.slot_state


def test_a_state_directory_that_cannot_be_written_is_shown_until_it_can(
    broker: Broker, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    state = _state(broker)
    state.open()
    metrics = Metrics(broker.queue, state=state)
    written = status_answer(broker)["state"]
    assert written == {
        "dir": str(tmp_path / "state"),
        "write_failures": 0,
        "failing_since": None,
        "error": None,
    }
    assert "state dir: " + str(tmp_path / "state") + ": ok" in render_status(_wire(broker))

    real = state._replace
    monkeypatch.setattr(state, "_replace", _full_disk)
    for second in range(3):
        state.planned("default", 1_780_000_000.0 + second)
        assert not state.write()
    status = _wire(broker)
    assert mismatches(status, StatusAnswer) == []
    assert status["state"]["write_failures"] == 3
    assert status["state"]["error"] == "No space left on device"
    assert status["state"]["failing_since"].endswith("Z")
    text = render_status(status)
    assert "WRITES FAILING since" in text
    assert "No space left on device; 3 failed writes" in text
    health = orjson.loads(orjson.dumps(health_answer(broker)))
    assert mismatches(health, HealthAnswer) == []
    assert health["ok"] is True  # the daemon itself works
    (warning,) = health["warnings"]
    assert "writes failing since" in warning
    exposition = metrics.exposition().decode()
    assert "runbroker_state_write_failures_total 3.0" in exposition
    assert "runbroker_state_write_failing 1.0" in exposition

    monkeypatch.setattr(state, "_replace", real)
    assert state.write()
    assert _wire(broker)["state"]["failing_since"] is None
    assert "warnings" not in health_answer(broker)
    assert "runbroker_state_write_failing 0.0" in metrics.exposition().decode()
    assert "(3 failed writes since start)" in render_status(_wire(broker))
    state.close()


def test_without_a_state_directory_status_says_nothing_of_one(
    clean_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RUNBROKER_SOCKET", str(tmp_path / "rb.sock"))
    tasks = TaskRegistry({"default": Task("default", command=("true",))})
    broker = Broker(settings_module.load_settings(), tasks, Signals())
    assert "state" not in status_answer(broker)
    assert "runbroker_state_write_failing 0.0" in Metrics(broker.queue).exposition().decode()


def _wire(broker: Broker) -> Any:
    return orjson.loads(orjson.dumps(status_answer(broker)))
