"""A client's reading pace (daemon/server/answers.py): a slow but steady reader gets every line
and its ``done``, however long the answer takes; one that reads nothing for ``WRITE_TIMEOUT_S``
is cut off, whether its answer is still being written or already closed. On timers a test
drives, with a transport whose client reads what and when the test says."""

from __future__ import annotations

import asyncio
import heapq
import json
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from daemon.server import answers
from daemon.server.answers import READ_CHECK_S, WRITE_TIMEOUT_S, AnswerStream
from daemon.wire.codec import encode_fields
from daemon.wire.protocol import EVENT_DONE
from tests.unit.core.executing import sh_task
from tests.unit.server.serving import serving

HIGH_WATER_BYTES = 64 * 1024  # as a transport's marks: pause above, resume below the low one
LOW_WATER_BYTES = 16 * 1024
LINE = b'{"event": "output", "stream": "stdout", "lines": ["' + b"x" * 1000 + b'"]}\n'


@dataclass(order=True)
class _Timer:
    when_s: float
    seq: int
    callback: Callable[[], object] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class ManualTimers:
    """A loop's clock and ``call_later`` that move only when the test advances them."""

    def __init__(self) -> None:
        self.now_s = 0.0
        self._timers: list[_Timer] = []
        self._seq = 0

    def time(self) -> float:
        return self.now_s

    def call_later(self, delay: float, callback: Callable[[], object]) -> _Timer:
        self._seq += 1
        timer = _Timer(self.now_s + delay, self._seq, callback)
        heapq.heappush(self._timers, timer)
        return timer

    def advance_to(self, when_s: float) -> None:
        """Fire every timer due by ``when_s``, in order, at its own time."""
        while self._timers and self._timers[0].when_s <= when_s:
            timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                self.now_s = timer.when_s
                timer.callback()
        self.now_s = when_s


class FakeServer:
    def __init__(self) -> None:
        self.loop = ManualTimers()
        self.draining = False

    def flush_later(self, stream: AnswerStream) -> None:
        stream.flush()  # at once: the test has no loop turns


class ReaderTransport:
    """A transport whose buffer its client empties only by ``read``; pauses and resumes its
    protocol at its marks, as asyncio's and uvloop's do."""

    def __init__(self) -> None:
        self.stream: AnswerStream | None = None
        self.buffer = bytearray()
        self.delivered = bytearray()
        self.paused = False
        self.closing = False
        self.aborted = False

    def get_write_buffer_size(self) -> int:
        return len(self.buffer)

    def write(self, data: bytes) -> None:
        assert not self.closing
        self.buffer += data
        if len(self.buffer) > HIGH_WATER_BYTES and not self.paused:
            self.paused = True
            assert self.stream is not None
            self.stream.pause_writing()

    def writelines(self, pieces: list[bytes]) -> None:
        self.write(b"".join(pieces))

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.aborted = True

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.closing = True

    def read(self, size: int) -> None:
        """The client reads up to ``size`` bytes."""
        if self.aborted:
            return
        self.delivered += self.buffer[:size]
        del self.buffer[:size]
        if self.paused and len(self.buffer) <= LOW_WATER_BYTES:
            self.paused = False
            assert self.stream is not None
            self.stream.resume_writing()


def _answer(lines: int) -> tuple[FakeServer, ReaderTransport, AnswerStream]:
    """An answer of ``lines`` output lines and its ``done``, all handed to the transport."""
    server = FakeServer()
    transport = ReaderTransport()
    stream = AnswerStream(server, lambda: None)
    transport.stream = stream
    stream.attach(transport)  # type: ignore[arg-type]  # what the stream uses of a transport
    stream.begin()
    for _ in range(lines):
        stream.send(LINE)
    stream.send(encode_fields(EVENT_DONE, {"id": "r1", "ok": True}))
    stream.finish()
    return server, transport, stream


def _read_steadily(
    server: FakeServer, transport: ReaderTransport, every_s: float, size: int, until_s: float
) -> None:
    """The client reads ``size`` bytes every ``every_s`` until its answer is all read."""
    at_s = 0.0
    while transport.buffer and not transport.aborted and at_s < until_s:
        at_s += every_s
        server.loop.advance_to(at_s)
        transport.read(size)


def test_a_slow_steady_reader_gets_its_done_however_long_the_answer_takes() -> None:
    lines = 2_000  # about 2 MiB at 8 KiB every half second: over 2 minutes of reading
    server, transport, stream = _answer(lines)
    assert transport.closing  # the answer closed: its last lines wait in the transport
    _read_steadily(server, transport, every_s=0.5, size=8 * 1024, until_s=1_000.0)
    assert server.loop.now_s > 2 * WRITE_TIMEOUT_S
    assert not transport.aborted
    assert not stream.closed
    assert transport.delivered.count(b"\n") == lines + 1
    assert transport.delivered.endswith(b'"ok":true}\n')


def test_a_reader_that_pauses_for_just_under_the_limit_each_time_is_never_cut_off() -> None:
    server, transport, _stream = _answer(1_000)
    every_s = WRITE_TIMEOUT_S - 1.0
    _read_steadily(server, transport, every_s=every_s, size=64 * 1024, until_s=10_000.0)
    assert server.loop.now_s > 10 * every_s
    assert not transport.aborted
    assert not transport.buffer


def test_a_reader_that_reads_nothing_is_cut_off_after_the_limit() -> None:
    server, transport, stream = _answer(1_000)
    server.loop.advance_to(WRITE_TIMEOUT_S - 1.0)
    assert not transport.aborted
    server.loop.advance_to(WRITE_TIMEOUT_S)
    assert transport.aborted
    assert stream.closed


def test_a_reader_that_stops_is_cut_off_after_the_limit_from_its_last_read() -> None:
    server, transport, _stream = _answer(2_000)
    _read_steadily(server, transport, every_s=0.5, size=8 * 1024, until_s=100.0)
    last_read_s = server.loop.now_s
    assert not transport.aborted
    server.loop.advance_to(last_read_s + WRITE_TIMEOUT_S - 1.0)
    assert not transport.aborted
    server.loop.advance_to(last_read_s + WRITE_TIMEOUT_S + READ_CHECK_S)
    assert transport.aborted


def test_a_paused_answer_still_being_written_cuts_off_only_an_idle_reader() -> None:
    server = FakeServer()
    transport = ReaderTransport()
    stream = AnswerStream(server, lambda: None)
    transport.stream = stream
    stream.attach(transport)  # type: ignore[arg-type]
    stream.begin()
    for _ in range(400):  # about 400 KiB, far past the high mark: paused, not finished
        stream.send(LINE)
    assert transport.paused
    at_s = 0.0
    while len(transport.buffer) > LOW_WATER_BYTES + 8 * 1024:  # drains slowly, stays paused
        at_s += 0.5
        server.loop.advance_to(at_s)
        transport.read(1024)
    assert at_s > WRITE_TIMEOUT_S
    assert not transport.aborted
    server.loop.advance_to(at_s + WRITE_TIMEOUT_S + READ_CHECK_S)
    assert transport.aborted


async def test_a_slow_steady_reader_of_a_real_socket_gets_its_done(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on the serving loop and a real socket, the limit made short: what the
    transport reports as buffered is what its client has not read yet."""
    limit_s = 1.0
    monkeypatch.setattr(answers, "WRITE_TIMEOUT_S", limit_s)
    monkeypatch.setattr(answers, "READ_CHECK_S", limit_s / 4)
    path = short_dir / "rb.sock"
    flood = sh_task("flood", "seq 1 15000")  # about 1 MB of answer lines
    async with serving(path, flood, output_hold_s=0) as (_, _queue, finished):
        # The run writes it all at once; its answer waits in the transport, closed once done.
        loop = asyncio.get_running_loop()
        slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # little held in the kernel
        slow.setblocking(False)
        try:
            await loop.sock_connect(slow, str(path))
            await loop.sock_sendall(slow, b'{"task": "flood"}\n')
            started_s = loop.time()
            data = b""
            while chunk := await loop.sock_recv(slow, 4 * 1024):
                data += chunk
                await asyncio.sleep(0.01)  # the reader's pace: at most 4 KiB every 10 ms
        finally:
            slow.close()
        assert (await finished.wait("flood")).result is not None
    assert loop.time() - started_s > 2 * limit_s  # reading took longer than the limit
    done = json.loads(data.splitlines()[-1])
    assert done["event"] == "done"
    assert done["ok"] is True
