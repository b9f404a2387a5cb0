"""The ``status`` and ``health`` answers a broker builds hold exactly the fields of their
declared shapes (``daemon.wire.control_shapes``), nested parts included, once serialised."""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

import orjson
import pytest

from daemon import settings as settings_module
from daemon.app import Broker
from daemon.core.runqueue import RunRequest, RunResult
from daemon.core.tasks import Task, TaskRegistry
from daemon.observe.status import health_answer, status_answer
from daemon.pg.runner import PgRunner
from daemon.pg.store.memory import MemoryStore
from daemon.settings import Settings
from daemon.signals import Signals
from daemon.wire.control_shapes import HealthAnswer, StatusAnswer


def mismatches(value: Any, shape: Any, where: str = "answer") -> list[str]:
    """Where ``value`` (decoded JSON) leaves its declared ``shape``: missing or unknown keys,
    and values of another kind, nested parts included."""
    if is_typeddict(shape):
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        hints = get_type_hints(shape)
        problems = [f"{where}.{key}: missing" for key in shape.__required_keys__ - set(value)]
        problems += [f"{where}.{key}: not declared" for key in set(value) - set(hints)]
        for key in set(value) & set(hints):
            problems += mismatches(value[key], hints[key], f"{where}.{key}")
        return problems
    origin = get_origin(shape)
    if origin in (types.UnionType, typing.Union):
        options = [mismatches(value, option, where) for option in get_args(shape)]
        return [] if any(not found for found in options) else options[0]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: not a list"]
        return [
            p
            for i, v in enumerate(value)
            for p in mismatches(v, get_args(shape)[0], f"{where}[{i}]")
        ]
    if origin is typing.Literal:
        return (
            [] if value in get_args(shape) else [f"{where}: {value!r} not one of {get_args(shape)}"]
        )
    if shape is type(None):
        return [] if value is None else [f"{where}: not null"]
    if shape is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif shape is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, shape)
    return [] if ok else [f"{where}: {type(value).__name__} is not {shape.__name__}"]


def _wire(answer: Any) -> Any:
    return orjson.loads(orjson.dumps(answer))


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Settings:
    for name in ("RUNBROKER_INTERVAL", "RUNBROKER_DATABASE_URL", "RUNBROKER_JITTER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(settings_module, "DOCKER_SECRET_PATH", tmp_path / "none")
    monkeypatch.setenv("RUNBROKER_SOCKET", str(tmp_path / "rb.sock"))
    monkeypatch.setenv("RUNBROKER_INTERVAL", "10s")
    return settings_module.load_settings()


async def test_a_busy_broker_with_a_database_answers_in_its_declared_shapes(
    settings: Settings,
) -> None:
    registry = TaskRegistry({"default": Task("default", command=("true",))})
    broker = Broker(settings, registry, Signals())
    broker.pgrunner = PgRunner(
        store=MemoryStore(), queue=broker.queue, settings=settings, known_tasks={"default"}
    )
    done = broker.queue.submit(RunRequest(task="default"))
    assert await broker.queue.take() is done
    done.mark_started()
    done.finish(RunResult(ok=True, exit_code=0, duration_ms=3))
    broker.recent.appendleft(done)
    running = broker.queue.submit(RunRequest(task="default"))
    assert await broker.queue.take() is running
    running.mark_started()
    broker.queue.submit(RunRequest(task="default", trigger="tick"))
    status = _wire(status_answer(broker))
    assert status["current"] is not None
    assert status["waiting"]
    assert status["recent"]
    assert status["database"] is not None
    assert mismatches(status, StatusAnswer) == []
    assert mismatches(_wire(health_answer(broker)), HealthAnswer) == []


def test_the_shape_check_sees_a_missing_an_unknown_and_a_mistyped_field() -> None:
    health = {"event": "health", "ok": True, "reason": "", "ready": True, "ready_reason": ""}
    assert mismatches(health, HealthAnswer) == []
    assert mismatches({**health, "warnings": ["w"]}, HealthAnswer) == []
    assert mismatches({**health, "extra": 1}, HealthAnswer) == ["answer.extra: not declared"]
    assert mismatches({**health, "ok": "yes"}, HealthAnswer) == ["answer.ok: str is not bool"]
    del health["ready"]
    assert mismatches(health, HealthAnswer) == ["answer.ready: missing"]
