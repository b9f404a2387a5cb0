"""How a ``logs`` answer ends when the run does not simply run: a handler's task or run (no
output lines: said), a followed queued run cancelled or refused before it starts (its ``done``
line), a queued run read without follow (an ``end`` line)."""

from __future__ import annotations

from typing import Any

from daemon.core.journal import Journal
from daemon.core.runqueue import Run, RunQueue, RunRequest, RunResult
from daemon.core.tasks import RunContext, Task
from daemon.server.server import SocketServer
from tests.unit.server.logs_serving import (
    CHATTY,
    SlowTransport,
    connect_reader,
    logs_server,
    loop_turns,
)


async def _quiet(_run: RunContext) -> dict[str, Any] | None:
    return None


QUIET = Task(name="quiet", handler=_quiet, handler_ref="tests:quiet")


def _server(journal: Journal, queue: RunQueue) -> SocketServer:
    return logs_server(journal, queue, (CHATTY, QUIET))


async def _answer(transport: SlowTransport) -> list[dict[str, Any]]:
    await loop_turns()
    transport.read_all()
    assert transport.closed
    return transport.answer()


async def test_a_handlers_task_or_run_is_said_to_have_no_output_lines() -> None:
    journal, queue = Journal(), RunQueue(4)
    server = _server(journal, queue)
    queue.submit(RunRequest(task="chatty"))  # runs first
    queued = queue.submit(RunRequest(task="quiet"))
    for request in (
        b'{"op":"logs","task":"quiet"}\n',
        b'{"op":"logs","id":"%s"}\n' % queued.id.encode(),
    ):
        (refusal,) = await _answer(connect_reader(server, request))
        assert refusal["event"] == "logs"
        assert refusal["ok"] is False
        assert "runs a Python handler: it has no output lines" in refusal["reason"]
    (refusal,) = await _answer(connect_reader(server, b'{"op":"logs","id":"r1234567-99"}\n'))
    assert "a Python handler's runs have no output lines" in refusal["reason"]


async def test_a_followed_queued_run_cancelled_before_it_starts_ends_with_its_done() -> None:
    journal, queue = Journal(), RunQueue(4)
    server = _server(journal, queue)
    queue.submit(RunRequest(task="chatty"))
    queued = queue.submit(RunRequest(task="chatty"))
    transport = connect_reader(
        server, b'{"op":"logs","id":"%s","follow":true}\n' % queued.id.encode()
    )
    await loop_turns()
    assert queued.listened
    queue.cancel_waiting(queued.id)
    header, done = await _answer(transport)
    assert header["state"] == "queued"
    assert (done["event"], done["ok"], done["id"]) == ("done", False, queued.id)
    assert not queued.listened


async def test_a_followed_queued_run_refused_at_its_start_ends_with_its_done() -> None:
    journal, queue = Journal(), RunQueue(4)
    server = _server(journal, queue)
    queued = queue.submit(RunRequest(task="chatty"))
    transport = connect_reader(
        server, b'{"op":"logs","id":"%s","follow":true}\n' % queued.id.encode()
    )
    await loop_turns()
    queued.finish(RunResult(ok=False, reason="unknown task 'chatty'"))  # as the executor does
    header, done = await _answer(transport)
    assert header["state"] == "queued"
    assert (done["event"], done["reason"]) == ("done", "unknown task 'chatty'")
    assert journal.find(queued.id) is None


async def test_a_queued_run_read_without_follow_ends_with_an_end_line() -> None:
    journal, queue = Journal(), RunQueue(4)
    server = _server(journal, queue)
    queue.submit(RunRequest(task="chatty"))
    queued = queue.submit(RunRequest(task="chatty"))
    header, end = await _answer(
        connect_reader(server, b'{"op":"logs","id":"%s"}\n' % queued.id.encode())
    )
    assert header["state"] == "queued"
    assert end == {"event": "end", "ok": True, "id": queued.id, "dropped_lines": 0}


async def test_a_run_that_ended_before_it_started_is_said_so_with_its_reason() -> None:
    journal, queue = Journal(), RunQueue(4)
    recent: list[Run] = []
    journal.recent = recent  # the broker's recent results, newest first (as the app sets)
    server = _server(journal, queue)
    queue.submit(RunRequest(task="chatty"))
    cancelled = queue.cancel_waiting(queue.submit(RunRequest(task="chatty")).id)
    assert cancelled is not None
    refused = Run(RunRequest(task="gone"))
    refused.finish(RunResult(ok=False, reason="unknown task 'gone'"))
    recent[:0] = [refused, cancelled]
    for run, reason in [
        (cancelled, "cancelled: cancelled by request"),
        (refused, "failed: unknown task 'gone'"),
    ]:
        request = b'{"op":"logs","id":"%s"}\n' % run.id.encode()
        (refusal,) = await _answer(connect_reader(server, request))
        assert refusal["reason"] == f"run {run.id} ended before it started: {reason}"


async def test_a_handlers_task_is_said_with_its_last_result() -> None:
    journal, queue = Journal(), RunQueue(4)
    server = _server(journal, queue)
    handled = Run(RunRequest(task="quiet"))
    handled.mark_started()
    handled.finish(RunResult(ok=True, duration_ms=7))
    journal.recent = [handled]
    for request in (
        b'{"op":"logs","task":"quiet"}\n',
        b'{"op":"logs","id":"%s"}\n' % handled.id.encode(),
    ):
        (refusal,) = await _answer(connect_reader(server, request))
        assert refusal["reason"].endswith(
            "'quiet', which runs a Python handler: it has no output lines;"
            " its last result: succeeded in 7 ms"
        )
