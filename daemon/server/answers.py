"""How a connection's answer lines reach its client: the writing half of the connection.

The run's events are written to the transport as they come, the lines of one loop iteration in
one write (``SocketServer.flush_later``). A client that falls ``HOLD_BYTES`` behind holds the
run's output back (``OutputFlow``: the job's pipes are not read, as with a pipe to a slow
reader) until it has caught up, for at most the flow's bound; one that has not caught up by
then is let go and loses output lines until it has (counted, and said in ``done``'s
``dropped_lines``), never the lifecycle events. Output waiting for a reader is bounded at
``BUFFERED_BYTES_MAX`` whatever happens; a client that stops reading for ``WRITE_TIMEOUT_S`` is
cut off.

A ``runbroker logs`` client reads from a ``LineSource`` instead (``logstream``): its lines are
pulled as the client reads, at most ``FILL_BYTES`` ahead of it, so a slow one holds no copy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

from daemon.core.runqueue import Event, Run
from daemon.log.logs import get_logger
from daemon.server.deadlines import RequestDeadlines
from daemon.wire.codec import encode_fields, encode_output
from daemon.wire.protocol import EVENT_DONE, EVENT_OUTPUT

BUFFERED_BYTES_MAX = 4 * 1024 * 1024  # per client: output beyond this is dropped and counted
HOLD_BYTES = 1024 * 1024  # a client this far behind holds the run's output back
WRITE_TIMEOUT_S = 60.0  # a client that reads nothing for this long is cut off
FILL_BYTES = 256 * 1024  # a line source's lines written ahead of what its client has read

log = get_logger("runbroker.server")

# READING: gathering the request. DRAINING: answered (refused) before the request was all
# read: what the client still sends is read and dropped until its end, so that a client still
# writing learns why it was refused instead of meeting a broken pipe. STREAMING: answering.
READING, DRAINING, STREAMING, CLOSED = range(4)


class AnswerServer(Protocol):
    """What a connection's answers need of the server (``SocketServer`` is one)."""

    loop: asyncio.AbstractEventLoop
    draining: bool  # the daemon is stopping: a connection ends once its client has closed

    deadlines: RequestDeadlines  # every connection's until its request has ended

    def flush_later(self, connection: AnswerStream) -> None: ...


class LineSource(Protocol):
    """Where a connection's lines come from when it does not listen to a run (``logs``)."""

    def fill(self, stream: AnswerStream, budget_bytes: int) -> bool:
        """Queue lines on ``stream`` (``pending``) up to about ``budget_bytes``; True when
        more are ready at once. Sets ``stream.finished`` after the last line."""
        ...

    def close(self) -> None:
        """The connection has gone: stop following."""
        ...


class AnswerStream(asyncio.Protocol):
    """The answer lines of one client's connection; ``Connection`` is one, and its
    ``__init__`` sets every attribute below (one constructor per connection, no chain)."""

    server: AnswerServer
    transport: asyncio.Transport | None
    state: int
    pending: list[bytes]  # lines of this loop iteration, written together
    pending_bytes: int
    flush_scheduled: bool
    finished: bool  # the last line is queued: close once it is written
    dropped_lines: int
    stalled: asyncio.TimerHandle | None  # the client stopped reading
    closing: bool
    source: LineSource | None  # a logs request's lines
    batch: bool  # the client asked for a read's output lines together (``encode_output``)
    holding: Run | None  # the run whose output this client holds back
    lagging: bool  # let go for holding too long: output is dropped until the client catches up

    def pause_writing(self) -> None:
        # The client stopped reading: cut it off unless it resumes in time.
        if self.stalled is None:
            self.stalled = self.server.loop.call_later(WRITE_TIMEOUT_S, self._abort)

    def resume_writing(self) -> None:
        if self.stalled is not None and not self.closing:
            self.stalled.cancel()
            self.stalled = None
        self.lagging = False  # caught up
        if self.holding is not None:
            self.release_hold()
        if self.source is not None:
            self.wake()

    def release_hold(self) -> None:
        run, self.holding = self.holding, None
        if run is not None and run.flow is not None:
            run.flow.release(self.let_go)

    def let_go(self) -> None:
        """Held the run's output back for too long (``OutputFlow``): lose lines from now on,
        until caught up."""
        run, self.holding = self.holding, None
        self.lagging = True
        if run is not None:
            log.info("output.reader_behind", run_id=run.id, dropping=True)

    def wake(self) -> None:
        """Lines are ready at the source: write them in the next flush."""
        if not self.flush_scheduled and self.state == STREAMING:
            self.flush_scheduled = True
            self.server.flush_later(self)

    # -- the answer -------------------------------------------------------------------------
    def on_event(self, run: Run, event: Event) -> None:
        """The run's listener: its events as wire lines, output bounded, lifecycle never."""
        if self.state != STREAMING:
            return
        kind = event.kind
        fields = event.fields
        if kind == EVENT_OUTPUT:
            self._output(run, fields)
            return
        if kind == EVENT_DONE:
            if self.holding is not None:
                self.release_hold()
            if self.dropped_lines:
                fields = {**fields, "dropped_lines": self.dropped_lines}
            self._send(encode_fields(kind, fields))
            self._finish()
            return
        self._send(encode_fields(kind, fields))

    def _output(self, run: Run, fields: Mapping[str, Any]) -> None:
        """A read's output lines: sent, the run held back past ``HOLD_BYTES``, or dropped
        (counted) by a client that was let go or is at ``BUFFERED_BYTES_MAX``."""
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
        self._send(data)
        if backlog + len(data) >= HOLD_BYTES and self.holding is None:
            flow = run.flow
            if flow is not None and flow.hold(self.let_go):
                self.holding = run

    def _send(self, line: bytes) -> None:
        self.pending.append(line)
        self.pending_bytes += len(line)
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.server.flush_later(self)

    def _flush(self) -> None:
        self.flush_scheduled = False
        if self.state == CLOSED or self.transport is None:
            return
        source = self.source
        more = False
        if source is not None and not self.finished and self.stalled is None:
            budget = FILL_BYTES - self.transport.get_write_buffer_size() - self.pending_bytes
            more = source.fill(self, budget)
        pending = self.pending
        if pending:
            if len(pending) == 1:
                self.transport.write(pending[0])
            else:  # uvloop writes them together (a writev), without joining them first
                self.transport.writelines(pending)
            pending.clear()
            self.pending_bytes = 0
            if self.holding is not None and self.stalled is None:
                self.release_hold()  # the transport took it all without pausing: caught up
        if more and self.stalled is None:  # not paused by the transport: go on next turn
            self.wake()
        if self.finished and not self.closing:
            self._close_after_write()

    def _finish(self) -> None:
        """The last line is queued: close once it is written."""
        self.finished = True
        self._stop_deadline()
        if not self.flush_scheduled:
            self._flush()

    def _close_after_write(self) -> None:
        transport = self.transport
        assert transport is not None
        self.closing = True
        if self.server.draining and transport.can_write_eof():
            # The daemon is about to exit, and with PID 1 every process of the container goes:
            # a client must have read its last line before that, so the connection ends when
            # the client closes it (the shutdown waits for that, within its budget).
            transport.write_eof()
            if self.stalled is None:
                self.stalled = self.server.loop.call_later(WRITE_TIMEOUT_S, self._abort)
            return
        transport.close()  # what is still buffered is written first
        if transport.get_write_buffer_size() and self.stalled is None:
            self.stalled = self.server.loop.call_later(WRITE_TIMEOUT_S, self._abort)

    def request_expired(self) -> None:
        """The request did not arrive in time (``RequestDeadlines``): ``Connection`` answers
        why; a stream without a request of its own to wait for just ends."""
        self._abort()

    def _abort(self) -> None:
        self.stalled = None
        if self.transport is not None:
            self.transport.abort()

    def _stop_deadline(self) -> None:
        """The request has ended (or the connection): its deadline no longer applies."""
        self.server.deadlines.forget(self)
