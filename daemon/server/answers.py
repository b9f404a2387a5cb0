"""How a connection's answer lines reach its client: the writing half of the connection.

The lines of one loop turn go out in one write (``SocketServer.flush_later``). A client that
falls ``HOLD_BYTES`` behind holds the run's output back (``OutputFlow``), as a pipe to a slow
reader would, for at most the flow's bound. One still behind then is let go: it loses output
lines (counted in ``done``'s ``dropped_lines``) until it catches up, never lifecycle events.
A ``logs`` client pulls its lines from a ``LineSource`` as it reads, so a slow one holds no copy.
A client is cut off only when it reads nothing for ``WRITE_TIMEOUT_S``: the transport tells
when its buffer fills and drains below a mark, not each read, so while one is buffered the
bytes it has passed on are checked every ``READ_CHECK_S``, and each that moved counts as a read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from daemon.core.runqueue import Event, Run
from daemon.log.logs import get_logger
from daemon.wire.codec import encode_fields, encode_output
from daemon.wire.protocol import EVENT_DONE, EVENT_OUTPUT

BUFFERED_BYTES_MAX = 4 * 1024 * 1024  # per client: output beyond this is dropped and counted
HOLD_BYTES = 1024 * 1024  # a client this far behind holds the run's output back
WRITE_TIMEOUT_S = 60.0  # a client that reads nothing for this long is cut off
READ_CHECK_S = WRITE_TIMEOUT_S / 4  # so one is cut off within 60 to 75 s of its last read
_EARLY_S = 0.001  # a timer may fire this early: what is left of the limit is due
FILL_BYTES = 256 * 1024  # a line source's lines written ahead of what its client has read

log = get_logger("runbroker.server")


def _nothing() -> None:
    """A closed stream's ``request_ended``: the request has ended with its connection."""


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Timers(Protocol):
    """The serving loop's clock and timers (a test drives its own)."""

    def time(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], object]) -> Cancellable: ...


class AnswerServer(Protocol):
    """What a connection's answers need of the server (``SocketServer`` is one)."""

    @property
    def loop(self) -> Timers: ...

    draining: bool  # the daemon is stopping: a connection ends once its client has closed

    def flush_later(self, stream: AnswerStream) -> None: ...


class LineSource(Protocol):
    """Where a connection's lines come from when it does not listen to a run (``logs``)."""

    def fill(self, stream: AnswerStream, budget_bytes: int) -> bool:
        """Queue about ``budget_bytes`` of lines on ``stream``: True when more are ready."""
        ...

    def close(self) -> None:
        """The connection has gone: stop following."""
        ...


class AnswerStream:
    """The answer lines of one client's connection, and the flow control of its transport."""

    # Slotted: one is made per connection, and its attributes are read at every line.
    __slots__ = (
        "_request_ended",
        "batch",
        "closed",
        "closing",
        "dropped_lines",
        "finished",
        "flush_scheduled",
        "holding",
        "lagging",
        "passed_on_bytes",
        "paused",
        "pending",
        "pending_bytes",
        "read_at_s",
        "reader_check",
        "server",
        "source",
        "streaming",
        "transport",
        "written_bytes",
    )

    def __init__(self, server: AnswerServer, request_ended: Callable[[], None]) -> None:
        self.server = server
        self._request_ended = request_ended  # the connection's deadline no longer applies
        self.transport: asyncio.Transport | None = None
        self.streaming = False  # answering a request: a run's events or a source's lines
        self.closed = False
        self.pending: list[bytes] = []  # lines of this loop turn, written together
        self.pending_bytes = 0
        self.flush_scheduled = False
        self.finished = False  # the last line is queued: close once it is written
        self.dropped_lines = 0
        self.paused = False  # the transport's buffer is full: the client is behind
        self.reader_check: Cancellable | None = None  # watching a client that may have stopped
        self.written_bytes = 0  # handed to the transport, in all
        self.passed_on_bytes = 0  # of them, what had left the transport at the last check
        self.read_at_s = 0.0  # when the client was last seen reading
        self.closing = False
        self.source: LineSource | None = None  # a logs request's lines
        self.batch = False  # the client takes a read's output lines together (``encode_output``)
        self.holding: Run | None = None  # the run whose output this client holds back
        self.lagging = False  # let go for holding too long: output dropped until caught up

    def attach(self, transport: asyncio.Transport) -> None:
        self.transport = transport

    def begin(self, *, batch: bool = False) -> None:
        """The request is accepted: what follows is its answer (its deadline is over)."""
        self.streaming = True
        self.batch = batch
        self._request_ended = _nothing

    def read_from(self, source: LineSource | None) -> None:
        """Take the rest of the answer from ``source``, as fast as the client reads."""
        self.source = source

    # -- the transport's flow control (forwarded by the connection) -------------------------
    def pause_writing(self) -> None:
        self.paused = True
        self._watch_reader()  # cut off unless the client reads again in time

    def resume_writing(self) -> None:
        self.paused = False
        if self.reader_check is not None and not self.closing:  # closing: its last lines
            self.reader_check.cancel()
            self.reader_check = None
        self.lagging = False  # caught up
        if self.holding is not None:
            self._release_hold()
        if self.source is not None:
            self.wake()

    # -- a client that reads nothing for WRITE_TIMEOUT_S is cut off ---------------------------
    def _watch_reader(self) -> None:
        if self.reader_check is None:
            timers = self.server.loop
            self.read_at_s = timers.time()
            self.passed_on_bytes = self._passed_on()
            self.reader_check = timers.call_later(READ_CHECK_S, self._check_reader)

    def _passed_on(self) -> int:
        """The bytes the transport has passed on to the client (its socket buffer and beyond)."""
        assert self.transport is not None
        return self.written_bytes - self.transport.get_write_buffer_size()

    def _check_reader(self) -> None:
        timers = self.server.loop
        now_s = timers.time()
        passed_on = self._passed_on()
        if passed_on > self.passed_on_bytes:  # it read since the last check
            self.passed_on_bytes, self.read_at_s = passed_on, now_s
        left_s = self.read_at_s + WRITE_TIMEOUT_S - now_s
        if left_s <= _EARLY_S:
            self.reader_check = None
            self.abort()
            return
        self.reader_check = timers.call_later(min(READ_CHECK_S, left_s), self._check_reader)

    def _release_hold(self) -> None:
        run, self.holding = self.holding, None
        if run is not None and run.flow is not None:
            run.flow.release(self._let_go)

    def _let_go(self) -> None:
        """Held the run's output back too long (``OutputFlow``): lose lines until caught up."""
        run, self.holding = self.holding, None
        self.lagging = True
        if run is not None:
            log.info("output.reader_behind", run_id=run.id, dropping=True)

    # -- the answer -------------------------------------------------------------------------
    def wake(self) -> None:
        """Lines are ready at the source: write them in the next flush."""
        if not self.flush_scheduled and self.streaming and not self.closed:
            self.flush_scheduled = True
            self.server.flush_later(self)

    def on_event(self, run: Run, event: Event) -> None:
        """The run's listener: its events as wire lines, output bounded, lifecycle never."""
        if not self.streaming or self.closed:
            return
        kind = event.kind
        fields = event.fields
        if kind == EVENT_OUTPUT:
            self._output(run, fields)
            return
        if kind == EVENT_DONE:
            if self.holding is not None:
                self._release_hold()
            if self.dropped_lines:
                fields = {**fields, "dropped_lines": self.dropped_lines}
            self.send(encode_fields(kind, fields))
            self.finish()
            return
        self.send(encode_fields(kind, fields))

    def _output(self, run: Run, fields: Mapping[str, Any]) -> None:
        """A read's lines: sent, the run held back past ``HOLD_BYTES``, or dropped and counted."""
        lines: list[str] = fields["lines"]
        assert self.transport is not None
        backlog = self.transport.get_write_buffer_size() + self.pending_bytes
        if self.lagging or backlog >= BUFFERED_BYTES_MAX:
            self.dropped_lines += len(lines)
            return
        data = encode_output(fields, self.batch)
        room = BUFFERED_BYTES_MAX - backlog
        if len(data) > room:  # what fits goes; the rest, and what follows until caught up, not
            kept = lines[: len(lines) * room // len(data)]
            self.dropped_lines += len(lines) - len(kept)
            self.lagging = True
            if not kept:
                return
            data = encode_output({**fields, "lines": kept}, self.batch)
        self.send(data)
        if backlog + len(data) >= HOLD_BYTES and self.holding is None:
            flow = run.flow
            if flow is not None and flow.hold(self._let_go):
                self.holding = run

    def send(self, line: bytes) -> None:
        """Queue ``line`` for this loop turn's write."""
        self.pending.append(line)
        self.pending_bytes += len(line)
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.server.flush_later(self)

    def queue_lines(self, chunks: list[bytes], size_bytes: int) -> None:
        """Queue a source's ``chunks`` within the flush that asked for them (``fill``)."""
        self.pending.extend(chunks)
        self.pending_bytes += size_bytes

    def last_line_queued(self) -> None:
        """Close once what is queued is written, without a flush of its own (``fill``)."""
        self.finished = True

    def finish(self) -> None:
        """The last line is queued: close once it is written."""
        self.finished = True
        self._request_ended()
        if not self.flush_scheduled:
            self.flush()

    def flush(self) -> None:
        """Write what this loop turn queued, and what the source has ready within its budget."""
        self.flush_scheduled = False
        if self.closed or self.transport is None:
            return
        source = self.source
        more = False
        if source is not None and not self.finished and not self.paused:
            budget = FILL_BYTES - self.transport.get_write_buffer_size() - self.pending_bytes
            more = source.fill(self, budget)
        pending = self.pending
        if pending:
            self.written_bytes += self.pending_bytes  # before the write: it may pause us
            if len(pending) == 1:
                self.transport.write(pending[0])
            else:  # uvloop writes them together (a writev), without joining them first
                self.transport.writelines(pending)
            pending.clear()
            self.pending_bytes = 0
            if self.holding is not None and not self.paused:
                self._release_hold()  # the transport took it all without pausing: caught up
        if more and not self.paused:  # not paused by the transport: go on next turn
            self.wake()
        if self.finished and not self.closing:
            self._close_after_write()

    def _close_after_write(self) -> None:
        transport = self.transport
        assert transport is not None
        self.closing = True
        if self.server.draining and transport.can_write_eof():
            # With PID 1 every process of the container goes when the daemon exits: the client
            # must read its last line first, so the connection ends when the client closes it.
            transport.write_eof()
            self._watch_reader()
            return
        transport.close()  # what is still buffered is written first
        if transport.get_write_buffer_size():
            self._watch_reader()

    def abort(self) -> None:
        """Drop the connection now, unwritten lines and all."""
        self.closed = True
        if self.reader_check is not None:
            self.reader_check.cancel()
            self.reader_check = None
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        """The connection has gone: let go of the run, the source, the timer and the
        connection's callback (a cycle through it would keep every closed connection until a
        full garbage collection, which the serving daemon makes rare)."""
        self.closed = True
        self._request_ended = _nothing
        self.pending.clear()
        if self.source is not None:
            self.source.close()
        if self.holding is not None:
            self._release_hold()
        if self.reader_check is not None:
            self.reader_check.cancel()
            self.reader_check = None
