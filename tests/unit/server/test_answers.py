"""A client's answer lines (daemon/server/answers.py): a slow or vanished client cannot stall the
executor, holds a job only up to its bound, loses no line when it reads slowly, and a quick
answer goes out in one write."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from daemon.core.runqueue import Event, Run, RunRequest
from daemon.core.tasks import RunContext, Task
from daemon.server.answers import BUFFERED_BYTES_MAX, HOLD_BYTES
from daemon.server.connection import Connection
from daemon.wire.codec import encode_fields
from daemon.wire.protocol import output_lines_event
from tests.support.frames import answer_events
from tests.unit.core.executing import sh_task
from tests.unit.server.serving import Finished, WritesTransport, exchange, serving


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
    flood = sh_task("flood", f"seq 1 {lines}")
    tasks = (flood, sh_task("default", "echo next"))
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
    async with serving(path, task, sh_task("default", "true")) as (_, _queue, finished):
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
    flood = sh_task("wide", f'yes "$(printf %0{width}d 0)" | head -n {lines}')
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
    flood = sh_task("flood", f"seq 1 {lines}")
    tasks = (flood, sh_task("default", "echo next"))
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
    flood = sh_task("flood", f"seq -f 'line %060g' 1 {lines}")
    async with serving(path, flood) as (_, _queue, _finished):
        loop = asyncio.get_running_loop()
        slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        slow.setblocking(False)
        request = {"task": "flood", "batch": True} if batch else {"task": "flood"}
        try:
            await loop.sock_connect(slow, str(path))
            await loop.sock_sendall(slow, json.dumps(request).encode() + b"\n")
            data = bytearray()  # grows in place: a bytes joined anew each read is quadratic
            while chunk := await loop.sock_recv(slow, 4096):  # a small read, a turn each
                data += chunk
                await asyncio.sleep(0)
        finally:
            slow.close()
    answer = answer_events(bytes(data))
    assert answer[-1]["event"] == "done"
    assert "dropped_lines" not in answer[-1]
    output = [e for e in answer if e["event"] == "output"]
    got = [line for e in output for line in (e["lines"] if batch else [e["line"]])]
    assert got == [f"line {n:060d}" for n in range(1, lines + 1)]
    if batch:
        assert len(output) < lines / 100  # a read's lines travel together


async def test_a_quick_handlers_lines_go_out_in_one_write(short_dir: Path) -> None:
    """A run that starts at once and whose handler returns without waiting: its queued,
    started and done lines are written together, one write for the whole answer, one loop
    turn after the request (the executor's step the request wakes runs first)."""

    async def quick(_run: RunContext) -> dict[str, Any] | None:
        return {"quick": True}

    task = Task(name="default", handler=quick, handler_ref="tests:quick")
    async with serving(short_dir / "rb.sock", task) as (server, _queue, finished):
        for turn in ("warm-up", "measured"):  # the first: the executor is waiting for runs
            transport = WritesTransport()
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


class _BackloggedTransport(WritesTransport):
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
    async with serving(short_dir / "rb.sock", sh_task("default", "true")) as (server, _queue, _):
        room = 30_000  # less than the read's lines take, batched (65 KB) or not (4.6 MB)
        transport = _BackloggedTransport(BUFFERED_BYTES_MAX - room)
        connection = Connection(server)
        connection.connection_made(transport)  # type: ignore[arg-type]
        answers = connection.answers
        answers.begin(batch=batch)
        run = Run(RunRequest(task="default"))
        lines = [""] * 65_536
        answers.on_event(run, Event("output", output_lines_event(run.id, "stdout", lines)))
        kept = sum(len(line) for line in answers.pending)
        sent = answer_events(b"".join(answers.pending))
        got = sum(len(frame["lines"]) if batch else 1 for frame in sent)
        assert kept <= room + 100  # at most a line past the bound
        assert got + answers.dropped_lines == len(lines)
        assert answers.dropped_lines > 0
        transport.close()
