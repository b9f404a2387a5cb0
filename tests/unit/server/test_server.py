"""The socket server: owner-only binding, peer checks, bad requests, and streaming that a slow
or vanished client cannot stall."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from daemon.core.executor import Executor
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import Event, Run, RunQueue, RunRequest
from daemon.core.tasks import RunContext, Task, TaskRegistry
from daemon.server.answers import BUFFERED_BYTES_MAX, HOLD_BYTES, STREAMING
from daemon.server.binding import SocketInUse, bind_owner_only
from daemon.server.connection import Connection
from daemon.server.server import SocketServer
from daemon.wire.codec import encode_fields
from daemon.wire.protocol import (
    MAX_REQUEST_BYTES,
    ControlRequest,
    output_lines_event,
)
from daemon.wire.reasons import REASON_BUSY
from tests.support.frames import answer_events
from tests.unit.conftest import JOB_ENV

Answer = list[dict[str, Any]]


def _sh(name: str, script: str, **options: Any) -> Task:
    return Task(name=name, command=("sh", "-c", script, name), **options)


def _no_control(request: ControlRequest) -> dict[str, Any]:
    raise AssertionError(f"unexpected control request {request}")


class Finished:
    """Runs as the queue releases them, with an event per task name."""

    def __init__(self, queue: RunQueue) -> None:
        self.runs: list[Run] = []
        self._events: dict[str, asyncio.Event] = {}
        queue.on_finish(self._on_finish)

    def _on_finish(self, run: Run) -> None:
        self.runs.append(run)
        self.event(run.request.task).set()

    def event(self, task: str) -> asyncio.Event:
        return self._events.setdefault(task, asyncio.Event())

    async def wait(self, task: str) -> Run:
        await self.event(task).wait()
        return next(run for run in self.runs if run.request.task == task)


@asynccontextmanager
async def serving(
    path: Path,
    *tasks: Task,
    capacity: int = 4,
    control: Any = _no_control,
    output_hold_s: float = 5.0,
    **server_options: Any,
) -> AsyncIterator[tuple[SocketServer, RunQueue, Finished]]:
    queue = RunQueue(capacity)
    registry = TaskRegistry({task.name: task for task in tasks})
    executor = Executor(
        queue,
        registry,
        ChildSupervisor(),
        default_grace_s=1.0,
        base_env=JOB_ENV,
        output_hold_s=output_hold_s,
    )
    server = SocketServer(path, queue, registry, control, **server_options)
    finished = Finished(queue)
    await server.start()
    consumer = asyncio.create_task(executor.run_forever())
    try:
        async with asyncio.timeout(30):
            yield server, queue, finished
    finally:
        queue.close()
        queue.cancel_all()
        executor.shutdown_running(0.0)
        async with asyncio.timeout(10):
            await consumer
            await server.close(timeout_s=1.0)


async def _read_answer(reader: asyncio.StreamReader) -> Answer:
    answer = []
    while True:
        try:
            line = await reader.readline()
        except ConnectionResetError:
            break
        if not line:
            break
        answer.append(json.loads(line))
    return answer


async def exchange(path: Path, payload: bytes) -> Answer:
    """Send one request and read every answer line until the server closes."""
    reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 20)
    try:
        writer.write(payload)
        return await _read_answer(reader)
    finally:
        writer.close()
        with suppress(ConnectionError):
            await writer.wait_closed()


# -- binding --------------------------------------------------------------------------------


@contextmanager
def _bound(path: Path) -> Iterator[socket.socket]:
    sock, lock_fd = bind_owner_only(path)
    try:
        yield sock
    finally:
        sock.close()
        os.close(lock_fd)


def _connects(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            return False
    return True


def test_socket_is_0600_even_with_a_permissive_umask(short_dir: Path) -> None:
    path = short_dir / "sub" / "rb.sock"
    old_umask = os.umask(0)
    try:
        with _bound(path):
            info = os.lstat(path)
            assert stat.S_ISSOCK(info.st_mode)
            assert stat.S_IMODE(info.st_mode) == 0o600
            assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
            assert _connects(path)
    finally:
        os.umask(old_umask)


def test_a_stale_socket_is_replaced(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # bound, never listening: connecting is refused
    assert not _connects(path)
    with _bound(path):
        assert _connects(path)


def test_a_live_socket_is_refused_and_left_alone(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as live:
        live.bind(str(path))
        live.listen(1)
        inode = os.lstat(path).st_ino
        with pytest.raises(SocketInUse, match="live daemon"):
            bind_owner_only(path)
        assert os.lstat(path).st_ino == inode
        assert _connects(path)
    # The failed attempt released its lock: once the live one is stale, binding works.
    with _bound(path):
        assert _connects(path)


@pytest.mark.parametrize("kind", ["file", "directory", "symlink"])
def test_a_path_that_is_not_a_socket_is_refused_and_kept(short_dir: Path, kind: str) -> None:
    path = short_dir / "rb.sock"
    target = short_dir / "precious"
    if kind == "file":
        path.write_text("precious")
    elif kind == "directory":
        path.mkdir()
    else:
        target.write_text("precious")
        path.symlink_to(target)
    with pytest.raises(SocketInUse, match="not a socket"):
        bind_owner_only(path)
    if kind == "file":
        assert path.read_text() == "precious"
    elif kind == "directory":
        assert path.is_dir()
    else:
        assert path.is_symlink()
        assert target.read_text() == "precious"


def test_a_second_binder_is_blocked_by_the_lock(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    with _bound(path):
        inode = os.lstat(path).st_ino
        with pytest.raises(SocketInUse, match="owns"):
            bind_owner_only(path)
        assert os.lstat(path).st_ino == inode
        assert _connects(path)


async def test_close_removes_the_socket_and_frees_the_path(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    async with serving(path):
        assert _connects(path)
    assert not path.exists()
    with _bound(path):
        assert _connects(path)


# -- requests -------------------------------------------------------------------------------


async def test_a_run_streams_queued_started_output_done(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    task = _sh("hello", 'echo "hello $1"; echo oops >&2', allow_args=True)
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
    async with serving(path, _sh("default", "true"), allowed_uids=others) as (_, queue, _f):
        answer = await exchange(path, b"{}\n")
        assert queue.statistics().accepted == 0
    assert answer == [
        {"event": "done", "ok": False, "reason": "permission denied", "code": "forbidden"}
    ]


async def test_an_oversized_request_is_refused(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    async with serving(path, _sh("default", "true")) as (_, queue, _f):
        payload = b'{"task":"' + b"x" * MAX_REQUEST_BYTES + b'"}\n'
        answer = await exchange(path, payload)
        assert queue.statistics().accepted == 0
    assert answer == [
        {"event": "done", "ok": False, "reason": "request too large", "code": "bad_request"}
    ]


async def test_a_slow_request_is_cut_off_while_others_are_served(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    async with serving(path, _sh("default", "echo served"), request_deadline_s=0.3):
        reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(b'{"task":')  # and nothing more
        served = await exchange(path, b"{}\n")
        assert served[-1]["ok"] is True
        slow = await _read_answer(reader)
        writer.close()
    too_slow = "request not received in time"
    assert slow == [{"event": "done", "ok": False, "reason": too_slow, "code": "bad_request"}]


async def test_a_request_without_newline_is_read_at_half_close(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    async with serving(path, _sh("default", "true")):
        reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(b"{}")
        writer.write_eof()
        answer = await _read_answer(reader)
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
    async with serving(path, _sh("default", "true")) as (_, queue, _f):
        answer = await exchange(path, payload)
        assert queue.statistics().accepted == 0
    assert [(event["event"], event["ok"], event["code"]) for event in answer] == [
        ("done", False, code)
    ]
    assert answer[0]["reason"].startswith(reason)


async def test_rejections_full_then_shutting_down(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    async with serving(path, _sh("default", "exec sleep 30"), capacity=0) as (_, queue, _f):
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
    seen: list[ControlRequest] = []

    def control(request: ControlRequest) -> dict[str, Any]:
        seen.append(request)
        return {"event": request.op, "ok": request.op != "cancel", "id": request.id}

    async with serving(path, _sh("default", "true"), control=control) as (_, queue, _f):
        status = await exchange(path, b'{"op":"status"}\n')
        health = await exchange(path, b'{"op":"health"}\n')
        cancel = await exchange(path, b'{"op":"cancel","id":"r9"}\n')
        assert queue.statistics().accepted == 0
    assert seen == [
        ControlRequest("status"),
        ControlRequest("health"),
        ControlRequest("cancel", "r9"),
    ]
    assert status == [{"event": "status", "ok": True, "id": ""}]
    assert health == [{"event": "health", "ok": True, "id": ""}]
    assert cancel == [{"event": "cancel", "ok": False, "id": "r9"}]


# -- clients that do not keep up ------------------------------------------------------------


async def _read_only_after_the_run(
    path: Path,
    task: str,
    finished: Finished,
    meanwhile: Callable[[], Awaitable[None]] | None = None,
) -> list[dict[str, Any]]:
    """Submit ``task`` and read not a byte until its run has succeeded (and ``meanwhile`` has
    run); then everything the server kept for this client."""
    loop = asyncio.get_running_loop()
    lazy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lazy.setblocking(False)
    try:
        await loop.sock_connect(lazy, str(path))
        await loop.sock_sendall(lazy, json.dumps({"task": task}).encode() + b"\n")
        run = await finished.wait(task)
        assert run.result is not None
        assert run.result.ok
        if meanwhile is not None:
            await meanwhile()
        data = b""
        while chunk := await loop.sock_recv(lazy, 1 << 20):
            data += chunk
    finally:
        lazy.close()
    return [json.loads(line) for line in data.splitlines()]


async def test_without_holding_a_client_that_never_reads_does_not_block_the_executor(
    short_dir: Path,
) -> None:
    path = short_dir / "rb.sock"
    lines = 120_000  # about 10 MB of answer lines: more than the per-client bound
    flood = _sh("flood", f"seq 1 {lines}")
    tasks = (flood, _sh("default", "echo next"))
    async with serving(path, *tasks, output_hold_s=0) as (_, queue, finished):

        async def others_are_served() -> None:
            # Other clients are served while the lazy one still has not read a byte.
            other = await exchange(path, b"{}\n")
            assert other[-1]["ok"] is True
            assert {"stdout"} == {e["stream"] for e in other if e["event"] == "output"}
            assert queue.statistics().finished == 2

        answer = await _read_only_after_the_run(path, "flood", finished, others_are_served)
    assert [answer[0]["event"], answer[1]["event"], answer[-1]["event"]] == [
        "queued",
        "started",
        "done",
    ]
    done = answer[-1]
    assert done["ok"] is True
    delivered = [e for e in answer if e["event"] == "output"]
    assert done["dropped_lines"] > 0
    assert len(delivered) + done["dropped_lines"] == lines
    # Output was dropped only once the client's backlog had reached the bound.
    delivered_bytes = sum(len(encode_fields("output", e)) for e in delivered)
    assert delivered_bytes >= BUFFERED_BYTES_MAX
    assert delivered[0]["line"] == "1"  # what was kept is in order, from the start
    numbers = [int(e["line"]) for e in delivered]
    assert numbers == sorted(numbers)


async def test_a_client_that_disconnects_does_not_cancel_its_run(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    release = asyncio.Event()

    async def gated(_run: RunContext) -> dict[str, Any] | None:
        await release.wait()
        return {"finished": True}

    task = Task(name="gated", handler=gated, handler_ref="tests:gated")
    async with serving(path, task, _sh("default", "true")) as (_, _queue, finished):
        reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(b'{"task":"gated"}\n')
        assert json.loads(await reader.readline())["event"] == "queued"
        assert json.loads(await reader.readline())["event"] == "started"
        writer.close()
        await writer.wait_closed()
        release.set()
        run = await finished.wait("gated")
        assert run.result is not None
        assert run.result.ok
        assert not run.result.cancelled
        assert run.result.output == {"finished": True}
        answer = await exchange(path, b"{}\n")
        assert answer[-1]["ok"] is True


async def test_a_client_that_never_reads_costs_at_most_a_few_mebibytes(short_dir: Path) -> None:
    """Far fewer lines than the line cap, but long ones: the byte bound is what holds."""
    path = short_dir / "rb.sock"
    lines, width = 300, 60_000  # ~18 MB of output
    flood = _sh("wide", f'yes "$(printf %0{width}d 0)" | head -n {lines}')
    async with serving(path, flood, output_hold_s=0) as (_, _queue, finished):
        answer = await _read_only_after_the_run(path, "wide", finished)
    done = answer[-1]
    delivered = [e for e in answer if e["event"] == "output"]
    assert done["dropped_lines"] > 0
    assert len(delivered) + done["dropped_lines"] == lines
    assert all(len(e["line"]) == width for e in delivered)
    # What stayed buffered fits the per-client bound (plus what the socket itself holds).
    assert len(delivered) * width < BUFFERED_BYTES_MAX + 2 * 1024 * 1024 + width


async def test_a_client_that_stops_reading_holds_the_job_for_the_bound_then_loses_lines(
    short_dir: Path,
) -> None:
    path = short_dir / "rb.sock"
    lines = 120_000
    flood = _sh("flood", f"seq 1 {lines}")
    tasks = (flood, _sh("default", "echo next"))
    async with serving(path, *tasks, output_hold_s=0.2) as (_, _queue, finished):

        async def others_are_served() -> None:
            assert (await exchange(path, b"{}\n"))[-1]["ok"] is True

        answer = await _read_only_after_the_run(path, "flood", finished, others_are_served)
    done = answer[-1]
    delivered = [e for e in answer if e["event"] == "output"]
    assert done["ok"] is True
    assert done["dropped_lines"] > 0
    assert len(delivered) + done["dropped_lines"] == lines
    numbers = [int(e["line"]) for e in delivered]
    assert numbers[0] == 1
    assert numbers == sorted(numbers)
    # Held back at HOLD_BYTES: what was kept for it is about that, not the hard bound.
    delivered_bytes = sum(len(encode_fields("output", e)) for e in delivered)
    assert HOLD_BYTES <= delivered_bytes < BUFFERED_BYTES_MAX


@pytest.mark.parametrize("batch", [False, True])
async def test_a_client_that_reads_slowly_loses_no_line(short_dir: Path, batch: bool) -> None:
    """A reader far slower than the job, that never stops: the job waits for it, as a job
    writing into a pipe waits for its reader; every line arrives, in order."""
    path = short_dir / "rb.sock"
    lines = 120_000  # about 8 MB of text: more than every per-client bound, batched or not
    flood = _sh("flood", f"seq -f 'line %060g' 1 {lines}")
    async with serving(path, flood) as (_, _queue, _finished):
        loop = asyncio.get_running_loop()
        slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        slow.setblocking(False)
        request = {"task": "flood", "batch": True} if batch else {"task": "flood"}
        try:
            await loop.sock_connect(slow, str(path))
            await loop.sock_sendall(slow, json.dumps(request).encode() + b"\n")
            data = b""
            while chunk := await loop.sock_recv(slow, 4096):  # a small read, a turn each
                data += chunk
                await asyncio.sleep(0)
        finally:
            slow.close()
    answer = answer_events(data)
    assert answer[-1]["event"] == "done"
    assert "dropped_lines" not in answer[-1]
    output = [e for e in answer if e["event"] == "output"]
    got = [line for e in output for line in (e["lines"] if batch else [e["line"]])]
    assert got == [f"line {n:060d}" for n in range(1, lines + 1)]
    if batch:
        assert len(output) < lines / 100  # a read's lines travel together


class _FakeTransport:
    """What a connection writes, and whether it closed; its peer is this process."""

    def __init__(self) -> None:
        self.written = b""
        self.closed = False
        self._ours, self._theirs = socket.socketpair()

    def get_extra_info(self, name: str) -> Any:
        return self._ours if name == "socket" else None

    def get_write_buffer_size(self) -> int:
        return 0

    def write(self, data: bytes) -> None:
        self.written += data

    def writelines(self, pieces: list[bytes]) -> None:
        self.write(b"".join(pieces))

    def close(self) -> None:
        self.closed = True
        self._ours.close()
        self._theirs.close()

    abort = close


class _WritesTransport(_FakeTransport):
    """A fake transport that keeps each write apart and tells when it is closed."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed_event = asyncio.Event()

    def write(self, data: bytes) -> None:
        super().write(data)
        self.writes.append(data)

    def close(self) -> None:
        super().close()
        self.closed_event.set()

    abort = close


async def test_a_quick_handlers_lines_go_out_in_one_write(short_dir: Path) -> None:
    """A run that starts at once and whose handler returns without waiting: its queued,
    started and done lines are written together, one write for the whole answer, one loop
    turn after the request (the executor's step the request wakes runs first)."""

    async def quick(_run: RunContext) -> dict[str, Any] | None:
        return {"quick": True}

    task = Task(name="default", handler=quick, handler_ref="tests:quick")
    async with serving(short_dir / "rb.sock", task) as (server, _queue, finished):
        for turn in ("warm-up", "measured"):  # the first: the executor is waiting for runs
            transport = _WritesTransport()
            connection = Connection(server)
            connection.connection_made(transport)  # type: ignore[arg-type]
            connection.data_received(b"{}\n")
            if turn == "measured":
                await asyncio.sleep(0)  # one turn of the loop, not a wait for time
                assert len(transport.writes) == 1
            async with asyncio.timeout(10):
                await transport.closed_event.wait()
        await finished.wait("default")
    assert len(transport.writes) == 1
    lines = [json.loads(line) for line in transport.writes[0].splitlines()]
    assert [line["event"] for line in lines] == ["queued", "started", "done"]
    assert lines[-1]["output"] == {"quick": True}


async def test_unfinished_requests_together_are_bounded(short_dir: Path) -> None:
    """Many clients each holding a partial request cannot take the daemon's memory: the one
    that would pass the bound is refused with a reason; finished requests free their share."""
    path = short_dir / "rb.sock"
    chunk = b'{"task":"' + b"x" * 40_000  # no newline: unfinished
    async with serving(path, _sh("default", "true"), unfinished_bytes_max=100_000) as (
        server,
        queue,
        finished,
    ):
        transports = [_FakeTransport() for _ in range(3)]
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
    task = _sh("default", "echo ran", allow_args=True)
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


class _BackloggedTransport(_WritesTransport):
    """A transport that already holds ``backlog`` bytes its client has not read."""

    def __init__(self, backlog: int) -> None:
        super().__init__()
        self.backlog = backlog

    def get_write_buffer_size(self) -> int:
        return self.backlog


@pytest.mark.parametrize("batch", [False, True])
async def test_one_read_of_many_short_lines_is_cut_at_the_clients_bound(
    short_dir: Path, batch: bool
) -> None:
    """A 64 KiB read of empty lines is 5 MiB of answer a line at a time: what would pass the
    per-client bound is dropped and counted, not queued."""
    async with serving(short_dir / "rb.sock", _sh("default", "true")) as (server, _queue, _):
        room = 30_000  # less than the read's lines take, batched (65 KB) or not (4.6 MB)
        transport = _BackloggedTransport(BUFFERED_BYTES_MAX - room)
        connection = Connection(server)
        connection.connection_made(transport)  # type: ignore[arg-type]
        connection.state = STREAMING
        connection.batch = batch
        run = Run(RunRequest(task="default"))
        lines = [""] * 65_536
        connection.on_event(run, Event("output", output_lines_event(run.id, "stdout", lines)))
        kept = sum(len(line) for line in connection.pending)
        sent = answer_events(b"".join(connection.pending))
        got = sum(len(frame["lines"]) if batch else 1 for frame in sent)
        assert kept <= room + 100  # at most a line past the bound
        assert got + connection.dropped_lines == len(lines)
        assert connection.dropped_lines > 0
        transport.close()
