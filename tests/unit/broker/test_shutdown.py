"""The ordered shutdown (daemon/broker/shutdown.py), in process, signals simulated through
``Signals.received``: its order, its budget, a second signal forcing the exit, a signal during
start-up."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from daemon.broker.app import Broker, run_broker
from daemon.core.runqueue import Event, Rejected, Run, RunRequest
from daemon.server.server import SocketServer
from daemon.wire.reasons import REASON_CLOSED, REASON_SHUTDOWN_CANCEL
from tests.unit.broker.conftest import DEFAULT, TERM_TRAP, Logs, MakeSettings, broker_of
from tests.unit.core.executing import deaf_task, registry_of, sh_task


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
    job = sh_task("default", TERM_TRAP.format(action="echo term; exit 143"))
    broker = broker_of(settings, job)
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
    job = sh_task("default", TERM_TRAP.format(action="echo got-term"), grace_s=60.0)
    broker = broker_of(settings, job)
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
    job = sh_task("default", TERM_TRAP.format(action="echo got-term"), grace_s=60.0)
    broker = broker_of(settings, job)
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
    serving = asyncio.create_task(run_broker(settings, registry_of(DEFAULT), []))
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
        assert await run_broker(settings, registry_of(DEFAULT), [signal.SIGTERM]) == 0
    assert not path.exists()


async def test_a_stray_that_ends_in_the_budget_is_awaited_and_the_exit_is_clean(
    make_settings: MakeSettings, short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    settings = make_settings(SOCKET=str(short_dir / "rb.sock"), INTERVAL="off")
    broker = broker_of(settings, deaf_task(entered, release), DEFAULT)
    serving = await _serving(broker, monkeypatch)
    async with asyncio.timeout(20):
        run = broker.queue.submit(RunRequest(task="deaf"))
        assert (await run.wait()).timed_out
        assert len(broker.executor.strays) == 1
        broker.signals.received()
        release.set()  # the stray ends while the shutdown drains, which waits for it
        assert await serving == 0
    assert len(broker.executor.strays) == 0


async def test_a_stray_that_never_ends_cannot_hold_the_exit_past_the_budget(
    make_settings: MakeSettings, short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exits: list[int] = []
    exited = asyncio.Event()

    def fake_exit(code: int) -> None:
        exits.append(code)  # PID 1 exits here; the test process must not
        exited.set()

    monkeypatch.setattr(os, "_exit", fake_exit)
    entered, release = asyncio.Event(), asyncio.Event()
    settings = make_settings(
        SOCKET=str(short_dir / "rb.sock"), INTERVAL="off", SHUTDOWN_TIMEOUT="1s"
    )
    broker = broker_of(settings, deaf_task(entered, release), DEFAULT)
    serving = await _serving(broker, monkeypatch)
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(20):
            assert (await broker.queue.submit(RunRequest(task="deaf")).wait()).timed_out
            stopped_at = loop.time()
            broker.signals.received()
            await exited.wait()
            took_s = loop.time() - stopped_at
    finally:
        # What the real exit ends: the stray, and the notifier a stuck shutdown does not drain.
        release.set()
        serving.cancel()
        async with asyncio.timeout(10):
            await asyncio.wait({serving})
        # Its pipe is closed, so it exits; collected here, as the real exit would leave none.
        await broker.children.watchdog.close(timeout_s=10)
    assert exits == [1]
    assert took_s < 1.5
