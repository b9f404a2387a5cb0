"""The composition root's control ops (daemon/broker/app.py): status, health and cancel of a
queued run and of a running one, in process."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from daemon.broker.app import Broker
from daemon.broker.signals import Signals
from daemon.broker.tasks_check import startup_tasks
from daemon.core.runqueue import RunRequest
from daemon.core.tasks import Task
from daemon.wire.protocol import AnsweredRequest, CancelRequest, HealthRequest, StatusRequest
from daemon.wire.reasons import REASON_USER_CANCEL
from tests.unit.broker.conftest import DEFAULT, MakeSettings, broker_of
from tests.unit.core.executing import waits_forever


def _answer(broker: Broker, request: AnsweredRequest) -> Mapping[str, Any]:
    """A control op answered at once (every op but ``reload``)."""
    answer = broker.control(request)
    assert not isinstance(answer, asyncio.Future)
    return answer


async def test_status_health_and_cancel_of_a_queued_run(
    make_settings: MakeSettings, short_dir: Path
) -> None:
    broker = broker_of(
        make_settings(SOCKET=str(short_dir / "rb.sock"), QUEUE_CAPACITY="3"), DEFAULT
    )
    first = broker.queue.submit(RunRequest(task="default"))
    second = broker.queue.submit(RunRequest(task="default", trigger="tick"))
    status = _answer(broker, StatusRequest())
    assert status["event"] == "status"
    assert status["ok"] is True
    assert status["pid"] == os.getpid()
    assert status["reaper"] == broker.reaper_mode == "none"  # nobody called adopt_orphans
    assert status["current"] is None
    assert status["queue"]["capacity"] == 3
    assert status["queue"]["waiting"] == 2
    assert status["queue"]["accepted"] == 2
    assert status["waiting"] == [
        {"id": first.id, "task": "default", "trigger": "external", "position": 1},
        {"id": second.id, "task": "default", "trigger": "tick", "position": 2},
    ]
    assert [tick["task"] for tick in status["ticks"]] == ["default"]
    assert status["database"] is None
    json.dumps(status)  # the answer goes on the wire as it is

    assert _answer(broker, HealthRequest()) == {
        "event": "health",
        "ok": True,
        "reason": "",
        "ready": True,
        "ready_reason": "",
    }

    assert _answer(broker, CancelRequest(first.id)) == {
        "event": "cancel",
        "ok": True,
        "id": first.id,
        "state": "queued",
    }
    assert first.result is not None
    assert (first.result.reason, first.result.cancelled) == (REASON_USER_CANCEL, True)
    after = _answer(broker, StatusRequest())
    assert [item["id"] for item in after["waiting"]] == [second.id]
    assert [item["id"] for item in after["recent"]] == [first.id]
    assert (after["recent"][0]["reason"], after["recent"][0]["code"]) == (
        REASON_USER_CANCEL,
        "cancelled",
    )
    unknown = _answer(broker, CancelRequest("r-nope"))
    assert unknown == {
        "event": "cancel",
        "ok": False,
        "id": "r-nope",
        "reason": "no queued or running run 'r-nope'",
        "code": "no_such_run",
    }
    broker.queue.close()
    assert _answer(broker, HealthRequest()) == {
        "event": "health",
        "ok": False,
        "reason": "shutting down",
        "code": "unhealthy",
        "ready": False,
        "ready_reason": "shutting down",
    }


async def test_cancel_and_health_of_a_running_run(
    make_settings: MakeSettings, short_dir: Path
) -> None:
    entered = asyncio.Event()

    forever = waits_forever(entered)

    stuck = Task(name="stuck", handler=forever, handler_ref="tests:forever", timeout_s=5.0)
    broker = broker_of(make_settings(SOCKET=str(short_dir / "rb.sock"), GRACE="1s"), stuck)
    consumer = asyncio.create_task(broker.executor.run_forever())
    try:
        async with asyncio.timeout(10):
            run = broker.queue.submit(RunRequest(task="stuck"))
            await entered.wait()
            status = _answer(broker, StatusRequest())
            assert status["current"]["id"] == run.id
            assert status["current"]["task"] == "stuck"
            assert _answer(broker, HealthRequest())["ok"] is True
            # Wedged: well past timeout (5 s) + grace (1 s) + the margin.
            assert run.started_monotonic is not None
            run.started_monotonic -= 100
            health = _answer(broker, HealthRequest())
            assert health["ok"] is False
            assert health["reason"].startswith(f"executor wedged: run {run.id}")
            answer = _answer(broker, CancelRequest(run.id))
            assert answer == {
                "event": "cancel",
                "ok": True,
                "id": run.id,
                "state": "running",
                "detail": "cancel requested; the run is being terminated and is still running",
            }
            again = _answer(broker, CancelRequest(run.id))
            assert again["detail"] == "cancel already requested; the run is still being terminated"
            result = await run.wait()
    finally:
        broker.queue.close()
        consumer.cancel()
    assert (result.reason, result.cancelled) == (REASON_USER_CANCEL, True)


def test_the_ticker_gets_the_plans_the_start_took(
    make_settings: MakeSettings, short_dir: Path
) -> None:
    """The start made the ticker's plans when it checked the tasks: they are not made again."""
    settings = make_settings(SOCKET=str(short_dir / "rb.sock"), INTERVAL="10s")
    registry, taken = startup_tasks(settings, ("true",))
    broker = Broker(settings, registry, Signals(), taken=taken)
    (plan,) = taken.plans
    assert plan.task == "default"
    assert broker.ticker.plans == [plan]
    assert broker.ticker.plans[0] is plan
