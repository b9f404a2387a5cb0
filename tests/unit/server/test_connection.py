"""One client's request (daemon/server/connection.py): a run streamed, peer checks, oversized,
slow, unfinished and bad requests refused with a reason, rejections, control requests."""

from __future__ import annotations

import asyncio
import gc
import json
import os
from pathlib import Path
from typing import Any

import pytest

from daemon.core.runqueue import Event, Run, RunRequest
from daemon.core.tasks import RunContext, Task
from daemon.server.connection import Connection
from daemon.wire.protocol import (
    MAX_REQUEST_BYTES,
    AnsweredRequest,
    CancelRequest,
    HealthRequest,
    StatusRequest,
)
from daemon.wire.reasons import REASON_BUSY
from tests.unit.core.executing import sh_task
from tests.unit.server.serving import FakeTransport, exchange, read_answer, serving


async def test_a_run_streams_queued_started_output_done(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    task = sh_task("hello", 'echo "hello $1"; echo oops >&2', allow_args=True)
    async with serving(path, task):
        answer = await exchange(path, b'{"task":"hello","args":["world"]}\n')
    kinds = [event["event"] for event in answer]
    assert kinds[0] == "queued"
    assert kinds[1] == "started"
    assert kinds[-1] == "done"
    outputs = {(event["stream"], event["line"]) for event in answer if event["event"] == "output"}
    assert outputs == {("stdout", "hello world"), ("stderr", "oops")}
    assert answer[0]["position"] == 1
    assert {event["id"] for event in answer} == {answer[0]["id"]}
    done = answer[-1]
    assert done["ok"] is True
    assert done["exit_code"] == 0
    assert done["duration_ms"] >= 1
    assert "reason" not in done


async def test_a_peer_of_another_uid_is_refused_and_nothing_queued(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    others = frozenset({os.getuid() + 4242})
    async with serving(path, sh_task("default", "true"), allowed_uids=others) as (_, queue, _f):
        answer = await exchange(path, b"{}\n")
        assert queue.statistics().accepted == 0
    assert answer == [
        {"event": "done", "ok": False, "reason": "permission denied", "code": "forbidden"}
    ]


async def test_an_oversized_request_is_refused(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    async with serving(path, sh_task("default", "true")) as (_, queue, _f):
        payload = b'{"task":"' + b"x" * MAX_REQUEST_BYTES + b'"}\n'
        answer = await exchange(path, payload)
        assert queue.statistics().accepted == 0
    assert answer == [
        {"event": "done", "ok": False, "reason": "request too large", "code": "bad_request"}
    ]


async def test_a_slow_request_is_cut_off_while_others_are_served(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    async with serving(path, sh_task("default", "echo served"), request_deadline_s=0.3):
        reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(b'{"task":')  # and nothing more
        served = await exchange(path, b"{}\n")
        assert served[-1]["ok"] is True
        slow = await read_answer(reader)
        writer.close()
    too_slow = "request not received in time"
    assert slow == [{"event": "done", "ok": False, "reason": too_slow, "code": "bad_request"}]


async def test_a_request_without_newline_is_read_at_half_close(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    async with serving(path, sh_task("default", "true")):
        reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(b"{}")
        writer.write_eof()
        answer = await read_answer(reader)
        writer.close()
    assert [event["event"] for event in answer] == ["queued", "started", "done"]
    assert answer[-1]["ok"] is True
    assert answer[-1]["exit_code"] == 0


@pytest.mark.parametrize(
    ("payload", "reason", "code"),
    [
        (
            b'{"task":"ghost"}\n',
            "unknown task 'ghost': this container defines default",
            "unknown_task",
        ),
        (b'{"args":["x"]}\n', "task 'default' does not accept args", "not_allowed"),
        (b'{"env":{"SECRET":"x"}}\n', "task 'default' does not allow env 'SECRET'", "not_allowed"),
        (b"nonsense\n", "undecodable request", "bad_request"),
        (b'{"tsak":"x"}\n', "invalid request: unknown field 'tsak' (", "bad_request"),
    ],
)
async def test_refused_requests_queue_nothing(
    short_dir: Path, payload: bytes, reason: str, code: str
) -> None:
    path = short_dir / "rb.sock"
    async with serving(path, sh_task("default", "true")) as (_, queue, _f):
        answer = await exchange(path, payload)
        assert queue.statistics().accepted == 0
    assert [(event["event"], event["ok"], event["code"]) for event in answer] == [
        ("done", False, code)
    ]
    assert answer[0]["reason"].startswith(reason)


async def test_rejections_full_then_shutting_down(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    async with serving(path, sh_task("default", "exec sleep 30"), capacity=0) as (_, queue, _f):
        started = asyncio.Event()

        def on_event(_run: Run, event: Event) -> None:
            if event.kind == "started":
                started.set()

        busy = queue.submit(RunRequest(), on_event)
        await started.wait()  # running: the queue is busy, and capacity 0 lets nothing wait
        assert queue.current is busy
        full = await exchange(path, b"{}\n")
        queue.close()
        closed = await exchange(path, b"{}\n")
    assert full == [
        {"event": "done", "ok": False, "reason": "run queue is full", "code": "queue_full"}
    ]
    shutting_down = {"reason": "scheduler is shutting down", "code": "shutting_down"}
    assert closed == [{"event": "done", "ok": False, **shutting_down}]


async def test_control_requests_get_the_handlers_single_answer(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    seen: list[AnsweredRequest] = []

    def control(request: AnsweredRequest) -> dict[str, Any]:
        seen.append(request)
        run_id = request.id if isinstance(request, CancelRequest) else ""
        return {"event": request.op, "ok": request.op != "cancel", "id": run_id}

    async with serving(path, sh_task("default", "true"), control=control) as (_, queue, _f):
        status = await exchange(path, b'{"op":"status"}\n')
        health = await exchange(path, b'{"op":"health"}\n')
        cancel = await exchange(path, b'{"op":"cancel","id":"r9"}\n')
        assert queue.statistics().accepted == 0
    assert seen == [
        StatusRequest(),
        HealthRequest(),
        CancelRequest("r9"),
    ]
    assert status == [{"event": "status", "ok": True, "id": ""}]
    assert health == [{"event": "health", "ok": True, "id": ""}]
    assert cancel == [{"event": "cancel", "ok": False, "id": "r9"}]


async def test_unfinished_requests_together_are_bounded(short_dir: Path) -> None:
    """Many clients each holding a partial request cannot take the daemon's memory: the one
    that would pass the bound is refused with a reason; finished requests free their share."""
    path = short_dir / "rb.sock"
    chunk = b'{"task":"' + b"x" * 40_000  # no newline: unfinished
    async with serving(path, sh_task("default", "true"), unfinished_bytes_max=100_000) as (
        server,
        queue,
        finished,
    ):
        transports = [FakeTransport() for _ in range(3)]
        holders = [Connection(server) for _ in transports]
        for connection, transport in zip(holders, transports, strict=True):
            connection.connection_made(transport)  # type: ignore[arg-type]
        holders[0].data_received(chunk)
        holders[1].data_received(chunk)
        assert server.unfinished_bytes == 2 * len(chunk)
        holders[2].data_received(chunk)  # would pass the bound
        assert server.unfinished_bytes == 2 * len(chunk)
        holders[2].data_received(b"\n")  # the end of its request: the answer is complete
        await asyncio.sleep(0)  # the answer is written a loop turn later
        await asyncio.sleep(0)
        assert json.loads(transports[2].written) == {
            "event": "done",
            "ok": False,
            "reason": REASON_BUSY,
            "code": "busy",
        }
        assert transports[2].closed
        for connection in holders[:2]:
            connection.connection_lost(None)
        assert server.unfinished_bytes == 0
        served = await exchange(path, b"{}\n")
        assert served[-1]["ok"] is True
        assert queue.statistics().accepted == 1
        await finished.wait("default")


async def test_a_request_with_a_nul_in_its_args_runs_nothing(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    task = sh_task("default", "echo ran", allow_args=True)
    async with serving(path, task) as (_, queue, _f):
        answer = await exchange(path, b'{"args": ["safe\\u0000; rm -rf /"]}\n')
        assert queue.statistics().accepted == 0
    assert answer == [
        {
            "event": "done",
            "ok": False,
            "reason": "invalid request: args must not contain NUL characters",
            "code": "bad_request",
        }
    ]


async def test_a_client_that_leaves_mid_run_is_not_an_error(
    short_dir: Path, logs: list[dict[str, Any]]
) -> None:
    path = short_dir / "rb.sock"
    release = asyncio.Event()

    async def gated(_run: RunContext) -> dict[str, Any] | None:
        await release.wait()
        return None

    task = Task(name="gated", handler=gated, handler_ref="tests:gated")
    async with serving(path, task) as (_, _queue, finished):
        reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(b'{"task":"gated"}\n')
        assert json.loads(await reader.readline())["event"] == "queued"
        writer.transport.abort()  # gone, without reading the rest
        release.set()
        run = await finished.wait("gated")
    assert run.result is not None
    assert run.result.ok
    assert [e for e in logs if e.get("log_level") in ("error", "critical")] == []


async def test_a_closed_connection_is_freed_without_the_cycle_collector(short_dir: Path) -> None:
    """The serving daemon makes full collections rare: a closed connection must go by its
    reference count alone, or every one keeps its buffers until a collection comes."""
    path = short_dir / "rb.sock"

    def control(request: AnsweredRequest) -> dict[str, Any]:
        return {"event": request.op, "ok": True, "id": ""}

    async with serving(path, sh_task("default", "true"), control=control) as (server, _q, _f):
        gc.collect()
        gc.disable()
        try:
            for request in (b'{"task":"default"}\n', b'{"op":"status"}\n'):
                server.all_closed.clear()
                await exchange(path, request)
                await server.all_closed.wait()
            alive = sum(isinstance(thing, Connection) for thing in gc.get_objects())
        finally:
            gc.enable()
    assert alive == 0


async def test_a_control_answer_to_come_is_written_when_given(short_dir: Path) -> None:
    """A reload's answer is a future the reload loop sets later; meanwhile other requests are
    answered, and a client that goes cancels its future."""
    path = short_dir / "rb.sock"
    later: asyncio.Queue[asyncio.Future[dict[str, Any]]] = asyncio.Queue()

    def control(request: AnsweredRequest) -> dict[str, Any] | asyncio.Future[dict[str, Any]]:
        if request.op != "reload":
            return {"event": request.op, "ok": True}
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        later.put_nowait(answer)
        return answer

    done = {"event": "reload", "ok": True, "added": ["fresh"]}
    async with serving(path, sh_task("default", "true"), control=control), asyncio.timeout(10):
        reload = asyncio.create_task(exchange(path, b'{"op":"reload"}\n'))
        first = await later.get()
        assert await exchange(path, b'{"op":"health"}\n') == [{"event": "health", "ok": True}]
        assert not reload.done()
        first.set_result(done)
        assert await reload == [done]


async def test_a_control_answer_to_come_is_cancelled_when_its_client_has_gone(
    short_dir: Path,
) -> None:
    path = short_dir / "rb.sock"
    later: list[asyncio.Future[dict[str, Any]]] = []

    def control(request: AnsweredRequest) -> asyncio.Future[dict[str, Any]]:
        later.append(asyncio.get_running_loop().create_future())
        return later[-1]

    async with serving(path, sh_task("default", "true"), control=control) as (server, _q, _f):
        transport = FakeTransport()
        connection = Connection(server)
        connection.connection_made(transport)  # type: ignore[arg-type]
        connection.data_received(b'{"op":"reload","dry_run":true}\n')
        (answer,) = later
        connection.connection_lost(None)
        assert answer.cancelled()  # a dry run waiting its turn is then dropped
        assert transport.written == b""
