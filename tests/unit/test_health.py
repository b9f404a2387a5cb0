"""Health turns unhealthy, and healthy again, in each of its cases: a wedged executor, a
stalled ticker, an unreachable database."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from daemon import settings as settings_module
from daemon.app import Broker
from daemon.core.runqueue import RunRequest, RunResult
from daemon.core.tasks import Task, TaskRegistry
from daemon.observe.status import health_answer, health_problem, readiness_problem
from daemon.pg.runner import PgRunner
from daemon.pg.store.base import Claimed, StoreUnavailable
from daemon.pg.store.memory import MemoryStore
from daemon.settings import Settings
from daemon.signals import Signals
from tests.support.eventually import eventually_async


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Settings:
    for name in ("RUNBROKER_INTERVAL", "RUNBROKER_DATABASE_URL", "RUNBROKER_JITTER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(settings_module, "DOCKER_SECRET_PATH", tmp_path / "none")
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
        "ready": False,  # not live: not ready either
        "ready_reason": problem,
    }
    run.finish(RunResult(ok=False, reason="timed out after 1s"))
    broker.queue.release(run)
    assert health_problem(broker) is None


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
