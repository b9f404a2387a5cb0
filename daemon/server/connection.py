"""One client's connection: its request gathered under its deadline, checked and answered.

A peer of another uid and an oversized request are answered while the rest of the request is
read and dropped, so that the client learns why. The answer is written by ``AnswerStream``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from daemon.core.journal import Journal
from daemon.core.runqueue import Rejected, RunQueue, RunRequest
from daemon.core.tasks import TaskRefused, TaskRegistry
from daemon.core.ticker.busy import BusyPolicy
from daemon.log.logs import get_logger
from daemon.server.answers import AnswerServer, AnswerStream
from daemon.server.binding import peer_uid
from daemon.server.deadlines import RequestDeadlines
from daemon.server.limits import ConnectionLimits
from daemon.server.logstream import open_logs
from daemon.server.segments import SegmentCache
from daemon.wire import reasons
from daemon.wire.codec import decode_request, encode_event, rejection
from daemon.wire.protocol import (
    MAX_REQUEST_BYTES,
    AnsweredRequest,
    ControlRequest,
    LogsRequest,
    ProtocolError,
    SubmitRequest,
    clip,
)

log = get_logger("runbroker.server")

# READING: gathering the request. DRAINING: refused before the request was all read, so what
# the client still sends is read and dropped until its end: a client still writing learns why
# it was refused instead of meeting a broken pipe. ANSWERING: the answer is being written.
READING, DRAINING, ANSWERING, CLOSED = range(4)

# A control request's one answer, or its future (a reload's: made later, off the event loop).
ControlHandler = Callable[
    [AnsweredRequest], "Mapping[str, Any] | asyncio.Future[Mapping[str, Any]]"
]


class ConnectionServer(AnswerServer, Protocol):
    """What a connection needs of the server (``SocketServer`` is one): where a request goes,
    who may send one, and the bounds shared by every connection."""

    deadlines: RequestDeadlines  # every connection's, until its request has ended
    queue: RunQueue
    tasks: TaskRegistry
    busy: BusyPolicy  # a trigger of a task that sets ``on_busy``
    journal: Journal
    segments: SegmentCache  # what ``logs`` readers send, encoded once for them all
    control: ControlHandler
    allowed_uids: frozenset[int]
    connections: set[Connection]
    all_closed: asyncio.Event  # set when the last connection has gone
    unfinished_bytes: int
    unfinished_bytes_max: int
    limits: ConnectionLimits


class Connection(asyncio.Protocol):
    """One client: its request, then the answer lines of its run or control request."""

    # Slotted: one is made per connection (``asyncio.Protocol`` has no ``__dict__`` of its own).
    __slots__ = ("answers", "buffer", "control_only", "later", "server", "state")

    def __init__(self, server: ConnectionServer) -> None:
        self.server = server
        self.state = READING
        self.buffer = bytearray()  # the request, while it is gathered
        self.control_only = False  # past the bound: status, health, cancel and reload only
        self.answers = AnswerStream(server, self._stop_deadline)
        self.later: asyncio.Future[Mapping[str, Any]] | None = None  # an answer to come

    # -- asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.answers.attach(transport)  # type: ignore[arg-type]  # uvloop's is not a subclass
        server = self.server
        server.connections.add(self)
        server.deadlines.watch(self)
        sock = transport.get_extra_info("socket")
        uid = peer_uid(sock) if sock is not None else -1
        if uid not in server.allowed_uids:
            log.warning("socket.refused", peer_uid=uid)
            # What it sends is never decoded.
            self._refuse(reasons.REASON_FORBIDDEN, reasons.CODE_FORBIDDEN)
        limit = server.limits.meets(len(server.connections), sock.fileno() if sock else -1)
        if limit and self.state == READING:
            self._past_the_bound()

    def pause_writing(self) -> None:
        self.answers.pause_writing()

    def resume_writing(self) -> None:
        self.answers.resume_writing()

    def _past_the_bound(self) -> None:
        """Make room (the oldest connection still sending its request goes), else take only a
        control request, within the reserve, else refuse at once (``limits``)."""
        server = self.server
        oldest = server.deadlines.oldest()
        if isinstance(oldest, Connection) and oldest is not self:
            oldest.evict()
        elif len(server.connections) > server.limits.reserve_end:
            self._refuse(reasons.REASON_CONNECTIONS, reasons.CODE_BUSY, complete=True)
        else:
            self.control_only = True

    def evict(self) -> None:
        """Closed to make room for a newer connection: it has not sent its request yet."""
        if self.state == READING:
            self._forget_buffer()
            self._refuse(reasons.REASON_CONNECTIONS, reasons.CODE_BUSY, complete=True)
        elif self.state == DRAINING:
            self.answers.finish()

    def data_received(self, data: bytes) -> None:
        state = self.state
        if state == READING:
            newline = data.find(b"\n")
            if newline < 0:
                self._gather(data)
                return
            line = data[: newline + 1]
            if self.buffer:
                self._gather(line)
                if self.state == DRAINING:
                    self.answers.finish()  # refused, and the request ends here
                    return
                line = bytes(self.buffer)
                self._forget_buffer()
            self._request(line)
        elif state == DRAINING and b"\n" in data:
            self.answers.finish()
        # Anything a client sends after its request is ignored.

    def eof_received(self) -> bool:
        if self.state == READING:
            line = bytes(self.buffer)  # the client half-closed after its JSON, no newline
            self._forget_buffer()
            self._request(line)
        elif self.state == DRAINING:
            self.answers.finish()
        elif self.answers.closing:
            return False  # the client read its last line and closed: done
        return True  # keep our half open to answer

    def connection_lost(self, exc: Exception | None) -> None:
        # A client that goes away does not cancel its run; it just stops listening.
        answering = self.state == ANSWERING  # its request has ended, and its deadline with it
        self.state = CLOSED
        if self.buffer:
            self._forget_buffer()
        if self.later is not None:  # nobody to answer: a dry run waiting its turn is dropped
            self.later.cancel()
        self.answers.close()
        server = self.server
        if not answering:
            server.deadlines.forget(self)
        server.connections.discard(self)
        server.limits.settle(len(server.connections))
        if not server.connections:
            server.all_closed.set()

    def abort(self) -> None:
        """Drop the connection now: the daemon is stopping and its time for answers is up."""
        self.state = CLOSED
        self.answers.abort()

    def _stop_deadline(self) -> None:
        """The request has ended (or the connection): its deadline no longer applies."""
        self.server.deadlines.forget(self)

    # -- the request ------------------------------------------------------------------------
    def _gather(self, data: bytes) -> None:
        size = len(self.buffer) + len(data)
        if size > MAX_REQUEST_BYTES + 1:
            self._forget_buffer()
            self._refuse(reasons.REASON_TOO_LARGE, reasons.CODE_BAD_REQUEST, "socket.bad_request")
            return
        server = self.server
        if server.unfinished_bytes + len(data) > server.unfinished_bytes_max:
            self._forget_buffer()
            self._refuse(reasons.REASON_BUSY, reasons.CODE_BUSY, "socket.bad_request")
            return
        server.unfinished_bytes += len(data)
        self.buffer += data

    def _forget_buffer(self) -> None:
        if self.buffer:
            self.server.unfinished_bytes -= len(self.buffer)
            self.buffer = bytearray()

    def request_expired(self) -> None:
        if self.state == READING:
            self._forget_buffer()
            self._refuse(
                reasons.REASON_TOO_SLOW,
                reasons.CODE_BAD_REQUEST,
                "socket.bad_request",
                complete=True,
            )
        elif self.state == DRAINING:
            self.answers.finish()

    def _request(self, line: bytes) -> None:
        self._stop_deadline()
        server = self.server
        try:
            request = decode_request(line)
        except ProtocolError as exc:
            self._refuse(exc.reason, exc.code, "socket.bad_request", complete=True)
            return
        if self.control_only and (
            not isinstance(request, ControlRequest) or isinstance(request, LogsRequest)
        ):
            self._refuse(
                reasons.REASON_CONNECTIONS, reasons.CODE_BUSY, "socket.bad_request", complete=True
            )
            return
        if not isinstance(request, SubmitRequest):
            self.state = ANSWERING
            answers = self.answers
            if isinstance(request, LogsRequest):  # streamed here, not answered by the broker
                answers.begin(batch=request.batch)
                reader = open_logs(
                    answers, server.journal, server.queue, server.tasks, request, server.segments
                )
                answers.read_from(reader)
                return
            answers.begin()
            answer = server.control(request)
            if isinstance(answer, asyncio.Future):
                self.later = answer
                answer.add_done_callback(self._answered_later)
                return
            answers.send(encode_event(**answer))
            answers.finish()
            return
        self._submit(request)

    def _answered_later(self, answer: asyncio.Future[Mapping[str, Any]]) -> None:
        self.later = None
        if self.state == CLOSED or answer.cancelled():
            return
        self.answers.send(encode_event(**answer.result()))
        self.answers.finish()

    def _refuse(self, reason: str, code: str, event: str = "", *, complete: bool = False) -> None:
        """Answer with a single ``done`` line; ``complete``: the request was all read."""
        if event:
            log.info(event, reason=clip(reason))
        self.answers.send(rejection(reason, code))
        if complete:
            self.state = ANSWERING
            self.answers.finish()
        else:
            self.state = DRAINING  # closed once the client's request has ended

    def _submit(self, request: SubmitRequest) -> None:
        server = self.server
        run_request = RunRequest(
            task=request.task, trigger="external", args=request.args, env=request.env
        )
        try:
            task = server.tasks.admit(run_request)
        except TaskRefused as refused:
            log.info("run.rejected", task=clip(request.task), reason=clip(refused.reason, 200))
            self._refuse(refused.reason, refused.code, complete=True)
            return
        self.state = ANSWERING
        self.answers.begin(batch=request.batch)
        try:
            if task.on_busy is None:
                server.queue.submit(run_request, self.answers.on_event)
            else:
                server.busy.submit(run_request, task.on_busy, self.answers.on_event)
        except Rejected as exc:
            log.info("run.rejected", task=request.task, reason=exc.reason)
            self._refuse(exc.reason, exc.code, complete=True)
            return
