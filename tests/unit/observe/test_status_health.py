"""Health turns unhealthy, and healthy again, in each of its cases: a wedged executor, a
stalled ticker, an unreachable database; the ``status`` and ``health`` answers keep their
declared shapes."""

from __future__ import annotations

import asyncio
import time
import types
import typing
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

import orjson
import pytest

from daemon import settings as settings_module
from daemon.broker.app import Broker
from daemon.broker.signals import Signals
from daemon.core.runqueue import RunRequest, RunResult
from daemon.core.tasks import Task, TaskRegistry
from daemon.face.status_text import render_status
from daemon.observe.status import health_answer, health_problem, readiness_problem, status_answer
from daemon.pg.runner import PgRunner
from daemon.pg.store.base import Claimed, StoreUnavailable
from daemon.pg.store.memory import MemoryStore
from daemon.settings import Settings
from daemon.wire.control_shapes import HealthAnswer, StatusAnswer
from tests.support.eventually import eventually_async
from tests.unit.core.executing import deaf_task


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
def settings(clean_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Settings:
    monkeypatch.setenv("RUNBROKER_SOCKET", str(tmp_path / "rb.sock"))
    monkeypatch.setenv("RUNBROKER_INTERVAL", "10s")
    monkeypatch.setenv("RUNBROKER_JITTER", "0")
    monkeypatch.setenv("RUNBROKER_LEASE", "3s")
    return settings_module.load_settings()


def _broker(settings: Settings, *tasks: Task) -> Broker:
    registry = TaskRegistry({task.name: task for task in tasks})
    return Broker(settings, registry, Signals())


async def test_a_run_wedged_past_its_timeout_is_unhealthy_until_it_ends(
    settings: Settings,
) -> None:
    broker = _broker(settings, Task("slow", command=("true",), timeout_s=1.0, grace_s=0.0))
    run = broker.queue.submit(RunRequest(task="slow"))
    assert await broker.queue.take() is run
    run.mark_started()
    assert health_problem(broker) is None  # running, within its timeout
    assert run.started_monotonic is not None
    run.started_monotonic -= 1.0 + 0.0 + 31.0  # as if it had run past timeout + grace + margin
    problem = health_problem(broker)
    assert problem is not None
    assert problem.startswith(f"executor wedged: run {run.id}")
    assert health_answer(broker) == {
        "event": "health",
        "ok": False,
        "reason": problem,
        "code": "unhealthy",
        "ready": False,  # not live: not ready either
        "ready_reason": problem,
    }
    run.finish(RunResult(ok=False, reason="timed out after 1s"))
    broker.queue.release(run)
    assert health_problem(broker) is None


async def test_a_handler_given_up_on_is_a_warning_in_health_and_listed_in_status(
    settings: Settings,
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    task = deaf_task(entered, release)
    broker = _broker(settings, task, Task("default", command=("true",)))
    executing = asyncio.create_task(broker.executor.run_forever())
    try:
        async with asyncio.timeout(10):
            run = broker.queue.submit(RunRequest(task="deaf"))
            assert (await run.wait()).timed_out
            status = _wire(status_answer(broker))
            assert mismatches(status, StatusAnswer) == []
            assert [(stray["id"], stray["task"]) for stray in status["strays"]] == [
                (run.id, "deaf")
            ]
            assert f"stray: {run.id} deaf, given up on" in render_status(status)
            health = health_answer(broker)
            assert (health["ok"], health["ready"]) == (True, True)  # the daemon works on
            [warning] = health.get("warnings", [])
            assert warning.startswith(f"run {run.id} of task 'deaf': its handler ignored")
            release.set()
            await broker.executor.strays.wait()
            assert "strays" not in status_answer(broker)
            assert "warnings" not in health_answer(broker)
    finally:
        broker.queue.close()
        release.set()
        await executing


async def test_a_ticker_silent_for_two_intervals_is_unhealthy_until_it_fires(
    settings: Settings,
) -> None:
    broker = _broker(settings, Task("default", command=("true",)))
    [plan] = broker.ticker.plans
    assert plan.interval_s == 10.0
    plan.last_fired_at = time.time() - 19.0  # within two intervals (+1 s slack)
    assert health_problem(broker) is None
    plan.last_fired_at = time.time() - 25.0
    problem = health_problem(broker)
    assert problem is not None
    assert problem.startswith("ticker stalled: task 'default' has not fired for")
    broker.ticker.fire(plan)  # the ticker wakes up again
    assert health_problem(broker) is None


async def test_a_database_away_longer_than_the_threshold_is_not_ready_but_still_live(
    settings: Settings,
) -> None:
    broker = _broker(settings, Task("default", command=("true",)))
    runner = PgRunner(
        store=MemoryStore(), queue=broker.queue, settings=settings, known_tasks={"default"}
    )
    broker.pgrunner = runner
    assert runner.unhealthy_after_s == 6.0  # twice the 3 s lease
    runner.health.failed("claim", StoreUnavailable("connection refused"))
    assert readiness_problem(broker) is None  # a short outage is not yet a problem
    assert runner.health.down_since is not None
    runner.health.down_since -= 7.0  # as if it had been away for 7 s
    assert readiness_problem(broker) == "database unreachable for 7s"
    # Live all the same: a restart cannot bring the database back (a liveness probe would
    # restart every replica, and kill their running jobs, for the whole outage).
    assert health_problem(broker) is None
    answer = health_answer(broker)
    assert (answer["ok"], answer["ready"]) == (True, False)
    assert answer["ready_reason"] == "database unreachable for 7s"
    assert broker.pgrunner.metrics_snapshot()["db_up"] == 0.0
    runner.health.ok()
    assert readiness_problem(broker) is None
    assert health_answer(broker)["ready"] is True
    assert runner.status()["up"] is True


async def test_claims_that_keep_failing_are_not_ready_until_one_succeeds(
    settings: Settings,
) -> None:
    broker = _broker(settings, Task("default", command=("true",)))

    class Failing(MemoryStore):
        broken = True

        async def claim(self, *args: Any, **kwargs: Any) -> list[Claimed]:
            if self.broken:
                raise RecursionError("maximum recursion depth exceeded while decoding")
            return await super().claim(*args, **kwargs)

    store = Failing()
    runner = PgRunner(store=store, queue=broker.queue, settings=settings, known_tasks={"default"})
    broker.pgrunner = runner
    runner.unhealthy_after_s = 0.0
    stopping = asyncio.Event()
    task = asyncio.create_task(runner.run(stopping))
    try:
        # The first claim happens at start.
        await eventually_async(
            lambda: readiness_problem(broker), "a health problem", timeout_s=2.0, every_s=0.01
        )
        problem = readiness_problem(broker)
        assert problem is not None
        assert problem.startswith("database jobs: every claim fails for")
        assert health_problem(broker) is None  # live: a restart would not fix it
        assert "RecursionError" in problem
        store.broken = False
        runner._wake.set()
        await eventually_async(
            lambda: readiness_problem(broker),
            "health to recover",
            until=lambda problem: problem is None,
            timeout_s=6.0,
            every_s=0.01,
        )
        assert readiness_problem(broker) is None
    finally:
        stopping.set()
        await task


async def test_a_busy_broker_with_a_database_answers_in_its_declared_shapes(
    settings: Settings,
) -> None:
    broker = _broker(settings, Task("default", command=("true",)))
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
