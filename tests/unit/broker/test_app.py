"""The composition root: tick plans from the settings, the control ops of the Broker, and the
ordered shutdown, all in-process (signals are simulated through ``Signals.received``)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

import pytest

from daemon.broker.app import Broker, run_broker
from daemon.broker.signals import Signals
from daemon.broker.ticking import tick_plans
from daemon.core.runqueue import (
    Event,
    Rejected,
    Run,
    RunRequest,
)
from daemon.core.tasks import RunContext, Task, TaskRegistry
from daemon.schedules import parse_schedule
from daemon.server.server import SocketServer
from daemon.settings import Settings, load_settings
from daemon.wire.protocol import ControlRequest
from daemon.wire.reasons import REASON_CLOSED, REASON_SHUTDOWN_CANCEL, REASON_USER_CANCEL

MakeSettings = Callable[..., Settings]
Logs = list[MutableMapping[str, Any]]

# A shell runs its TERM trap only once its foreground child has ended, so "ready" comes from
# that child: when it is seen, SIGTERM to the group ends the child and the trap runs at once.
TERM_TRAP = "trap '{action}' TERM; while :; do sh -c 'echo ready; exec sleep 1'; done"


@pytest.fixture
def make_settings(monkeypatch: pytest.MonkeyPatch, clean_env: None) -> MakeSettings:

    def make(**env: str) -> Settings:
        for name, value in env.items():
            monkeypatch.setenv(f"RUNBROKER_{name}", value)
        return load_settings()

    return make


def _registry(*tasks: Task) -> TaskRegistry:
    return TaskRegistry({task.name: task for task in tasks})


def _sh(name: str, script: str, **options: Any) -> Task:
    return Task(name=name, command=("sh", "-c", script, name), **options)


DEFAULT = _sh("default", "true")


# -- tick plans -----------------------------------------------------------------------------


def test_default_ticks_hourly_by_default(make_settings: MakeSettings) -> None:
    plans, warnings = tick_plans(make_settings(), _registry(DEFAULT))
    assert warnings == []
    assert [(p.task, p.interval_s, p.fire_on_start, p.once) for p in plans] == [
        ("default", 3600.0, True, False)
    ]


def test_interval_and_fire_on_start_settings(make_settings: MakeSettings) -> None:
    settings = make_settings(INTERVAL="90s", FIRE_ON_START="false")
    plans, _warnings = tick_plans(settings, _registry(DEFAULT))
    assert [(p.task, p.interval_s, p.fire_on_start) for p in plans] == [("default", 90.0, False)]


@pytest.mark.parametrize("value", ["off", "disabled", "OFF"])
def test_off_leaves_default_to_triggers(make_settings: MakeSettings, value: str) -> None:
    assert tick_plans(make_settings(INTERVAL=value), _registry(DEFAULT)) == ([], [])


def test_zero_runs_default_once(make_settings: MakeSettings) -> None:
    plans, _warnings = tick_plans(make_settings(INTERVAL="0s"), _registry(DEFAULT))
    assert [(p.task, p.once) for p in plans] == [("default", True)]


@pytest.mark.parametrize("value", ["-5m", "soon"])
def test_a_bad_interval_falls_back_with_a_warning(make_settings: MakeSettings, value: str) -> None:
    settings = make_settings(INTERVAL=value, DEFAULT_INTERVAL="10m")
    plans, warnings = tick_plans(settings, _registry(DEFAULT))
    assert [(p.task, p.interval_s) for p in plans] == [("default", 600.0)]
    assert len(warnings) == 1


def test_a_tiny_interval_is_clamped_with_a_warning(make_settings: MakeSettings) -> None:
    plans, warnings = tick_plans(make_settings(INTERVAL="1ms"), _registry(DEFAULT))
    assert plans[0].interval_s == 0.05
    assert warnings


def test_a_huge_interval_is_clamped_to_the_maximum_with_a_warning(
    make_settings: MakeSettings,
) -> None:
    plans, warnings = tick_plans(make_settings(INTERVAL="200000h"), _registry(DEFAULT))
    assert [(p.task, p.interval_s) for p in plans] == [("default", 720 * 3600.0)]
    assert warnings == ["RUNBROKER_INTERVAL: interval is above the maximum 720h; using the maximum"]


@pytest.mark.parametrize(
    "value", ["200000h", "7zq3secret", "-987654321ms", "1ns", "123456789012345678901h"]
)
def test_interval_warnings_never_repeat_the_raw_value(
    make_settings: MakeSettings, value: str
) -> None:
    _plans, warnings = tick_plans(make_settings(INTERVAL=value), _registry(DEFAULT))
    assert warnings
    for warning in warnings:
        assert warning.startswith("RUNBROKER_INTERVAL: ")
        assert value not in warning
        assert value.strip("-").rstrip("hmsn") not in warning


def test_a_task_interval_is_held_to_the_same_bounds(make_settings: MakeSettings) -> None:
    tiny = _sh("tiny", "true", interval_s=0.000001)
    huge = _sh("huge", "true", interval_s=10**6 * 3600.0)
    plans, warnings = tick_plans(make_settings(INTERVAL="off"), _registry(tiny, huge))
    assert {p.task: p.interval_s for p in plans} == {"tiny": 0.05, "huge": 720 * 3600.0}
    assert sorted(warnings) == [
        "tasks.huge: interval is above the maximum 720h; using the maximum",
        "tasks.tiny: interval is below the minimum 50ms; using the minimum",
    ]


def test_tasks_with_their_own_cadence_tick_regardless(make_settings: MakeSettings) -> None:
    own_default = _sh("default", "true", interval_s=300.0)
    hourly = _sh("hourly", "true", interval_s=3600.0)
    nightly = _sh("nightly", "true", schedule=parse_schedule("daily 02:00", "Europe/Berlin"))
    manual = _sh("manual", "true")
    settings = make_settings(INTERVAL="off", FIRE_ON_START="false")
    plans, warnings = tick_plans(settings, _registry(own_default, hourly, nightly, manual))
    assert warnings == []
    by_task = {plan.task: plan for plan in plans}
    assert set(by_task) == {"default", "hourly", "nightly"}
    assert by_task["default"].interval_s == 300.0  # its own, not the global one
    assert by_task["hourly"].interval_s == 3600.0
    assert by_task["hourly"].fire_on_start is False
    assert by_task["nightly"].schedule is nightly.schedule
    assert by_task["nightly"].interval_s is None


def test_no_default_task_no_default_plan(make_settings: MakeSettings) -> None:
    assert tick_plans(make_settings(INTERVAL="1m"), _registry(_sh("other", "true"))) == ([], [])


# -- control ops ----------------------------------------------------------------------------


def _broker(settings: Settings, *tasks: Task) -> Broker:
    return Broker(settings, _registry(*tasks), Signals())


def _op(op: str, run_id: str = "") -> ControlRequest:
    return ControlRequest(op, run_id)


async def test_status_health_and_cancel_of_a_queued_run(
    make_settings: MakeSettings, short_dir: Path
) -> None:
    broker = _broker(make_settings(SOCKET=str(short_dir / "rb.sock"), QUEUE_CAPACITY="3"), DEFAULT)
    first = broker.queue.submit(RunRequest(task="default"))
    second = broker.queue.submit(RunRequest(task="default", trigger="tick"))
    status = broker.control(_op("status"))
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

    assert broker.control(_op("health")) == {
        "event": "health",
        "ok": True,
        "reason": "",
        "ready": True,
        "ready_reason": "",
    }

    assert broker.control(_op("cancel", first.id)) == {
        "event": "cancel",
        "ok": True,
        "id": first.id,
        "state": "queued",
    }
    assert first.result is not None
    assert (first.result.reason, first.result.cancelled) == (REASON_USER_CANCEL, True)
    after = broker.control(_op("status"))
    assert [item["id"] for item in after["waiting"]] == [second.id]
    assert [item["id"] for item in after["recent"]] == [first.id]
    assert (after["recent"][0]["reason"], after["recent"][0]["code"]) == (
        REASON_USER_CANCEL,
        "cancelled",
    )
    unknown = broker.control(_op("cancel", "r-nope"))
    assert unknown == {
        "event": "cancel",
        "ok": False,
        "id": "r-nope",
        "reason": "no queued or running run 'r-nope'",
        "code": "no_such_run",
    }
    broker.queue.close()
    assert broker.control(_op("health")) == {
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

    async def forever(_run: RunContext) -> dict[str, Any] | None:
        entered.set()
        await asyncio.Event().wait()
        return None

    stuck = Task(name="stuck", handler=forever, handler_ref="tests:forever", timeout_s=5.0)
    broker = _broker(make_settings(SOCKET=str(short_dir / "rb.sock"), GRACE="1s"), stuck)
    consumer = asyncio.create_task(broker.executor.run_forever())
    try:
        async with asyncio.timeout(10):
            run = broker.queue.submit(RunRequest(task="stuck"))
            await entered.wait()
            status = broker.control(_op("status"))
            assert status["current"]["id"] == run.id
            assert status["current"]["task"] == "stuck"
            assert broker.control(_op("health"))["ok"] is True
            # Wedged: well past timeout (5 s) + grace (1 s) + the margin.
            assert run.started_monotonic is not None
            run.started_monotonic -= 100
            health = broker.control(_op("health"))
            assert health["ok"] is False
            assert health["reason"].startswith(f"executor wedged: run {run.id}")
            answer = broker.control(_op("cancel", run.id))
            assert answer == {
                "event": "cancel",
                "ok": True,
                "id": run.id,
                "state": "running",
                "detail": "cancel requested; the run is being terminated and is still running",
            }
            again = broker.control(_op("cancel", run.id))
            assert again["detail"] == "cancel already requested; the run is still being terminated"
            result = await run.wait()
    finally:
        broker.queue.close()
        consumer.cancel()
    assert (result.reason, result.cancelled) == (REASON_USER_CANCEL, True)


# -- serve and shut down --------------------------------------------------------------------


class Journal:
    """Run events in the order they happened, across runs."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str, str]] = []  # (run id, kind, line or reason)
        self.ready = asyncio.Event()
        self.term = asyncio.Event()

    def __call__(self, run: Run, event: Event) -> None:
        for detail in event.fields.get("lines", [str(event.fields.get("reason", ""))]):
            self.entries.append((run.id, event.kind, detail))
            if detail == "ready":
                self.ready.set()
            if detail in ("term", "got-term"):
                self.term.set()

    def index(self, run_id: str, kind: str, detail: str | None = None) -> int:
        for position, (rid, k, d) in enumerate(self.entries):
            if rid == run_id and k == kind and (detail is None or d == detail):
                return position
        raise AssertionError(f"no {kind} {detail or ''} of {run_id} in {self.entries}")


async def _serving(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> asyncio.Task[int]:
    """Start ``broker.serve()``; return once its socket is listening."""
    listening = asyncio.Event()
    start = broker.server.start

    async def start_and_tell() -> None:
        await start()
        listening.set()

    monkeypatch.setattr(broker.server, "start", start_and_tell)
    serving = asyncio.create_task(broker.serve())
    async with asyncio.timeout(10):
        await listening.wait()
    return serving


async def _request(path: Path, payload: bytes) -> list[dict[str, Any]]:
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(payload)
    lines = [json.loads(line) for line in (await reader.read()).splitlines()]
    writer.close()
    await writer.wait_closed()
    return lines


async def test_shutdown_order(
    make_settings: MakeSettings, short_dir: Path, monkeypatch: pytest.MonkeyPatch, logs: Logs
) -> None:
    path = short_dir / "rb.sock"
    settings = make_settings(SOCKET=str(path), INTERVAL="1h", FIRE_ON_START="false")
    job = _sh("default", TERM_TRAP.format(action="echo term; exit 143"))
    broker = _broker(settings, job)
    journal = Journal()
    serving = await _serving(broker, monkeypatch)
    async with asyncio.timeout(20):
        reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(b"{}\n")
        while json.loads(await reader.readline()).get("line") != "ready":
            pass  # queued, started, then the job's first line
        running = broker.queue.current
        assert running is not None
        running.subscribe(journal)
        waiting = [broker.queue.submit(RunRequest(task="default"), journal) for _ in range(2)]

        status = (await _request(path, b'{"op":"status"}\n'))[0]
        assert status["current"]["id"] == running.id
        assert [item["id"] for item in status["waiting"]] == [run.id for run in waiting]
        assert [tick["task"] for tick in status["ticks"]] == ["default"]
        health = await _request(path, b'{"op":"health"}\n')
        # an empty reason is omitted
        assert health == [{"event": "health", "ok": True, "ready": True, "ready_reason": ""}]

        broker.signals.received()
        code = await serving
        client_lines = [json.loads(line) for line in (await reader.read()).splitlines()]
        writer.close()
    assert code == 0
    # Queued runs are cancelled first, then the running job gets SIGTERM (it says "term").
    term_at = journal.index(running.id, "output", "term")
    for run in waiting:
        assert journal.index(run.id, "done", REASON_SHUTDOWN_CANCEL) < term_at
        assert [kind for rid, kind, _d in journal.entries if rid == run.id] == ["queued", "done"]
    assert journal.index(running.id, "done", REASON_SHUTDOWN_CANCEL) > term_at
    # The client streaming the running job got its result before the socket closed.
    assert client_lines[-1]["event"] == "done"
    assert (client_lines[-1]["reason"], client_lines[-1]["code"]) == (
        REASON_SHUTDOWN_CANCEL,
        "shutdown",
    )
    assert not path.exists()
    with pytest.raises(Rejected) as rejected:
        broker.queue.submit(RunRequest(task="default"))
    assert rejected.value.reason == REASON_CLOSED
    events = [entry["event"] for entry in logs]
    stopping, draining, stopped = (
        events.index("broker.stopping"),
        events.index("broker.draining"),
        events.index("broker.stopped"),
    )
    assert stopping < draining < stopped
    assert logs[draining]["cancelled_queued"] == 2
    assert logs[draining]["running"] is True
    assert logs[stopped]["clean"] is True


async def test_shutdown_caps_a_long_grace_to_the_budget(
    make_settings: MakeSettings, short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = short_dir / "rb.sock"
    settings = make_settings(SOCKET=str(path), INTERVAL="off", SHUTDOWN_TIMEOUT="1500ms")
    job = _sh("default", TERM_TRAP.format(action="echo got-term"), grace_s=60.0)
    broker = _broker(settings, job)
    journal = Journal()
    serving = await _serving(broker, monkeypatch)
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(20):
        run = broker.queue.submit(RunRequest(task="default"), journal)
        await journal.ready.wait()
        stopped_at = loop.time()
        broker.signals.received()
        code = await serving
        took_s = loop.time() - stopped_at
    assert code == 0
    assert journal.term.is_set()
    assert run.result is not None
    assert run.result.reason == REASON_SHUTDOWN_CANCEL
    # The job ignores SIGTERM; it is killed once the capped grace (budget - 1 s) is over.
    assert 0.5 <= took_s < 1.5


async def test_a_second_signal_forces_the_exit(
    make_settings: MakeSettings, short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exits: list[int] = []

    def fake_exit(code: int) -> None:
        exits.append(code)  # PID 1 exits here; the test process must not

    monkeypatch.setattr(os, "_exit", fake_exit)
    path = short_dir / "rb.sock"
    settings = make_settings(SOCKET=str(path), INTERVAL="off")
    job = _sh("default", TERM_TRAP.format(action="echo got-term"), grace_s=60.0)
    broker = _broker(settings, job)
    journal = Journal()
    serving = await _serving(broker, monkeypatch)
    async with asyncio.timeout(20):
        run = broker.queue.submit(RunRequest(task="default"), journal)
        await journal.ready.wait()
        broker.signals.received()
        await journal.term.wait()  # draining: the job ignored SIGTERM and has a 60 s grace
        broker.signals.received()
        await serving
        result = await run.wait()
    assert exits == [1]
    assert result.reason == REASON_SHUTDOWN_CANCEL  # ended by the SIGKILL, not the grace


async def test_run_broker_stops_on_a_real_sigterm(
    make_settings: MakeSettings, short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = short_dir / "rb.sock"
    settings = make_settings(SOCKET=str(path), INTERVAL="off")
    listening = asyncio.Event()
    start = SocketServer.start

    async def start_and_tell(self: SocketServer) -> None:
        await start(self)
        listening.set()

    monkeypatch.setattr(SocketServer, "start", start_and_tell)
    serving = asyncio.create_task(run_broker(settings, _registry(DEFAULT), []))
    async with asyncio.timeout(10):
        await listening.wait()
        os.kill(os.getpid(), signal.SIGTERM)  # handled by the broker's loop handler
        assert await serving == 0
    assert not path.exists()


async def test_a_signal_during_start_up_stops_the_broker_once_it_runs(
    make_settings: MakeSettings, short_dir: Path
) -> None:
    path = short_dir / "rb.sock"
    settings = make_settings(SOCKET=str(path), INTERVAL="off")
    async with asyncio.timeout(10):
        assert await run_broker(settings, _registry(DEFAULT), [signal.SIGTERM]) == 0
    assert not path.exists()
