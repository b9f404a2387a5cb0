"""The owner-only unix socket server.

The socket is bound here, not by ``asyncio.start_unix_server(path=...)`` (which deletes whatever
is at the path, a live daemon's socket too): an flock beside it serialises daemons, a live socket
is never stolen, a stale one is replaced, and a path that is not a socket is never deleted. The
mode is 0600 before ``bind`` so there is no window where it is wider. Peers whose uid is neither
root nor ours are refused (SO_PEERCRED). Each connection has its own buffer, so a slow or
vanished client never blocks the executor or other clients. Payloads are never logged.

Each connection is a plain ``asyncio.Protocol`` (no StreamReader/StreamWriter pair, no task per
connection): the request is gathered in ``data_received`` under one deadline timer, and the
run's events are written to the transport as they come, the lines of one loop iteration in one
write. Memory is bounded per client (a request at most 8 MiB; output waiting for a slow reader
at most ``BUFFERED_BYTES_MAX``, beyond which output lines are dropped and counted, never the
lifecycle events) and across clients (unfinished requests together at most
``UNFINISHED_BYTES_MAX``; the connection that would pass it is refused).
"""

from __future__ import annotations

import _socket
import asyncio
import contextlib
import errno
import fcntl
import os
import socket
import stat
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemon.core.runqueue import Event, Rejected, Run, RunQueue, RunRequest
from daemon.core.tasks import TaskRegistry
from daemon.observe.logs import get_logger
from daemon.wire.protocol import (
    EVENT_DONE,
    EVENT_OUTPUT,
    MAX_REQUEST_BYTES,
    REASON_BUSY,
    REASON_FORBIDDEN,
    REASON_TOO_LARGE,
    REASON_TOO_SLOW,
    REQUEST_DEADLINE_S,
    ControlRequest,
    ProtocolError,
    SubmitRequest,
    clip,
    decode_request,
    encode_event,
    encode_fields,
    rejection,
)

log = get_logger("runbroker.server")

BUFFERED_BYTES_MAX = 4 * 1024 * 1024  # per client: output beyond this is dropped and counted
UNFINISHED_BYTES_MAX = 64 * 1024 * 1024  # all clients' requests still being received
WRITE_TIMEOUT_S = 60.0  # a client that reads nothing for this long is cut off
_PEERCRED = struct.Struct("3i")

ControlHandler = Callable[[ControlRequest], dict[str, Any]]


class SocketInUse(Exception):
    """Another daemon owns the socket, or the path is not ours to replace."""


def peer_uid(sock: socket.socket) -> int:
    """The uid of the peer of the connected unix socket ``sock`` (SO_PEERCRED).

    uvloop's transport hands out a stand-in whose every method builds a full ``socket.socket``
    from the descriptor (three syscalls to learn what it is); a bare ``_socket.socket`` told
    what it is, then detached, asks only the one question."""
    probe = _socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, sock.fileno())
    try:
        raw = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    finally:
        probe.detach()  # the descriptor stays the transport's
    _pid, uid, _gid = _PEERCRED.unpack(raw)
    return int(uid)


def bind_owner_only(path: Path) -> tuple[socket.socket, int]:
    """Bind a listening socket at ``path``; returns it and the held lock fd."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock_fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock_fd)
        raise SocketInUse(f"another runbroker daemon owns {path}") from None
    try:
        _clear_stale(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            os.fchmod(sock.fileno(), 0o600)
            sock.bind(os.fspath(path))
            sock.listen(128)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
    except BaseException:
        os.close(lock_fd)
        raise
    return sock, lock_fd


def _clear_stale(path: Path) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise SocketInUse(f"{path} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(os.fspath(path))
    except ConnectionRefusedError:
        os.unlink(path)  # stale: nobody listens
        log.info("socket.stale_replaced", path=str(path))
        return
    except FileNotFoundError:
        return
    except PermissionError:
        raise SocketInUse(
            f"{path} belongs to another user; refusing to replace it (permission denied)"
        ) from None
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.ETIMEDOUT):
            raise SocketInUse(f"a live daemon is listening on {path}") from None
        raise
    finally:
        probe.close()
    raise SocketInUse(f"a live daemon is listening on {path}")


# READING: gathering the request. DRAINING: answered (refused) before the request was all
# read: what the client still sends is read and dropped until its end, so that a client still
# writing learns why it was refused instead of meeting a broken pipe. STREAMING: answering.
_READING, _DRAINING, _STREAMING, _CLOSED = range(4)


class _Connection(asyncio.Protocol):
    """One client: its request, then the answer lines of its run or control request."""

    def __init__(self, server: SocketServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.state = _READING
        self.buffer = bytearray()
        self.pending: list[bytes] = []  # lines of this loop iteration, written together
        self.pending_bytes = 0
        self.flush_scheduled = False
        self.finished = False  # the last line is queued: close once it is written
        self.dropped_lines = 0
        self.deadline: asyncio.TimerHandle | None = None  # the request's
        self.stalled: asyncio.TimerHandle | None = None  # the client stopped reading
        self.closing = False

    # -- asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        server = self.server
        server.connections.add(self)
        self.deadline = server.loop.call_later(server.request_deadline_s, self._deadline)
        sock = transport.get_extra_info("socket")
        uid = peer_uid(sock) if sock is not None else -1
        if uid not in server.allowed_uids:
            log.warning("socket.refused", peer_uid=uid)
            self._refuse(REASON_FORBIDDEN)  # what it sends is never decoded

    def data_received(self, data: bytes) -> None:
        state = self.state
        if state == _READING:
            newline = data.find(b"\n")
            if newline < 0:
                self._gather(data)
                return
            line = data[: newline + 1]
            if self.buffer:
                self._gather(line)
                if self.state == _DRAINING:
                    self._finish()  # refused, and the request ends here
                    return
                line = bytes(self.buffer)
                self._forget_buffer()
            self._request(line)
        elif state == _DRAINING and b"\n" in data:
            self._finish()
        # Anything a client sends after its request is ignored.

    def eof_received(self) -> bool:
        if self.state == _READING:
            line = bytes(self.buffer)  # the client half-closed after its JSON, no newline
            self._forget_buffer()
            self._request(line)
        elif self.state == _DRAINING:
            self._finish()
        elif self.closing:
            return False  # the client read its last line and closed: done
        return True  # keep our half open to answer

    def connection_lost(self, exc: Exception | None) -> None:
        # A client that goes away does not cancel its run; it just stops listening.
        self.state = _CLOSED
        if self.buffer:
            self._forget_buffer()
        self.pending.clear()
        if self.deadline is not None:
            self._stop_deadline()
        if self.stalled is not None:
            self.stalled.cancel()
        self.server.connections.discard(self)
        if not self.server.connections:
            self.server.all_closed.set()

    def pause_writing(self) -> None:
        # The client stopped reading: cut it off unless it resumes in time.
        if self.stalled is None:
            self.stalled = self.server.loop.call_later(WRITE_TIMEOUT_S, self._abort)

    def resume_writing(self) -> None:
        if self.stalled is not None and not self.closing:
            self.stalled.cancel()
            self.stalled = None

    # -- the request ------------------------------------------------------------------------
    def _gather(self, data: bytes) -> None:
        size = len(self.buffer) + len(data)
        if size > MAX_REQUEST_BYTES + 1:
            self._forget_buffer()
            self._refuse(REASON_TOO_LARGE, "socket.bad_request")
            return
        server = self.server
        if server.unfinished_bytes + len(data) > server.unfinished_bytes_max:
            self._forget_buffer()
            self._refuse(REASON_BUSY, "socket.bad_request")
            return
        server.unfinished_bytes += len(data)
        self.buffer += data

    def _forget_buffer(self) -> None:
        if self.buffer:
            self.server.unfinished_bytes -= len(self.buffer)
            self.buffer = bytearray()

    def _deadline(self) -> None:
        self.deadline = None
        if self.state == _READING:
            self._forget_buffer()
            self._refuse(REASON_TOO_SLOW, "socket.bad_request", complete=True)
        elif self.state == _DRAINING:
            self._finish()

    def _request(self, line: bytes) -> None:
        if self.deadline is not None:
            self._stop_deadline()
        server = self.server
        try:
            request = decode_request(line)
        except ProtocolError as exc:
            self._refuse(exc.reason, "socket.bad_request", complete=True)
            return
        if isinstance(request, ControlRequest):
            self.state = _STREAMING
            self._send(encode_event(**server.control(request)))
            self._finish()
            return
        self._submit(request)

    def _refuse(self, reason: str, event: str = "", *, complete: bool = False) -> None:
        """Answer with a single ``done`` line; ``complete``: the request was all read."""
        if event:
            log.info(event, reason=clip(reason))
        self._send(rejection(reason))
        if complete:
            self.state = _STREAMING
            self._finish()
        else:
            self.state = _DRAINING  # closed once the client's request has ended

    def _submit(self, request: SubmitRequest) -> None:
        server = self.server
        run_request = RunRequest(
            task=request.task, trigger="external", args=request.args, env=request.env
        )
        refusal = server.tasks.refusal(run_request)
        if refusal is not None:
            log.info("run.rejected", task=clip(request.task), reason=clip(refusal, 200))
            self._refuse(refusal, complete=True)
            return
        self.state = _STREAMING
        try:
            server.queue.submit(run_request, self.on_event)
        except Rejected as exc:
            log.info("run.rejected", task=request.task, reason=exc.reason)
            self._refuse(exc.reason, complete=True)
            return

    # -- the answer -------------------------------------------------------------------------
    def on_event(self, run: Run, event: Event) -> None:
        """The run's listener: its events as wire lines, output bounded, lifecycle never."""
        if self.state != _STREAMING:
            return
        kind = event.kind
        fields = event.fields
        if kind == EVENT_OUTPUT:
            assert self.transport is not None
            backlog = self.transport.get_write_buffer_size() + self.pending_bytes
            if backlog >= BUFFERED_BYTES_MAX:
                self.dropped_lines += 1
                return
        elif kind == EVENT_DONE:
            if self.dropped_lines:
                fields = {**fields, "dropped_lines": self.dropped_lines}
            self._send(encode_fields(kind, fields))
            self._finish()
            return
        self._send(encode_fields(kind, fields))

    def _send(self, line: bytes) -> None:
        self.pending.append(line)
        self.pending_bytes += len(line)
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.server.flush_later(self)

    def _flush(self) -> None:
        self.flush_scheduled = False
        if self.state == _CLOSED or self.transport is None:
            return
        pending = self.pending
        if pending:
            self.transport.write(pending[0] if len(pending) == 1 else b"".join(pending))
            pending.clear()
            self.pending_bytes = 0
        if self.finished and not self.closing:
            self._close_after_write()

    def _finish(self) -> None:
        """The last line is queued: close once it is written."""
        self.finished = True
        if self.deadline is not None:
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

    def _abort(self) -> None:
        self.stalled = None
        if self.transport is not None:
            self.transport.abort()

    def _stop_deadline(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None


class SocketServer:
    def __init__(
        self,
        path: Path,
        queue: RunQueue,
        tasks: TaskRegistry,
        control: ControlHandler,
        *,
        allowed_uids: frozenset[int] | None = None,
        request_deadline_s: float = REQUEST_DEADLINE_S,
        unfinished_bytes_max: int = UNFINISHED_BYTES_MAX,
    ) -> None:
        self.path = path
        self.queue = queue
        self.tasks = tasks
        self.control = control
        self.allowed_uids = frozenset({0, os.getuid()}) if allowed_uids is None else allowed_uids
        self.request_deadline_s = request_deadline_s
        self._server: asyncio.Server | None = None
        self._lock_fd: int | None = None
        self.connections: set[_Connection] = set()
        self.all_closed = asyncio.Event()
        self.unfinished_bytes = 0
        self._dirty: list[_Connection] = []
        self.draining = False
        self._flush_scheduled = False
        self.unfinished_bytes_max = unfinished_bytes_max
        self.loop: asyncio.AbstractEventLoop  # the serving loop, from start()

    def flush_later(self, connection: _Connection) -> None:
        """Write ``connection``'s lines one loop turn later, with every other connection's:
        the executor's next step (a run started, a quick handler's result) joins the write."""
        self._dirty.append(connection)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush_soon)

    def _flush_soon(self) -> None:
        self.loop.call_soon(self._flush_dirty)

    def _flush_dirty(self) -> None:
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, []
        for connection in dirty:
            connection._flush()

    async def start(self) -> None:
        sock, self._lock_fd = bind_owner_only(self.path)
        self.loop = asyncio.get_running_loop()
        try:
            self._server = await self.loop.create_unix_server(lambda: _Connection(self), sock=sock)
        except BaseException:
            sock.close()
            raise

    def begin_drain(self) -> None:
        """The daemon is stopping: answers still go out, and each connection now ends only
        once its client has read the last line and closed (``close`` waits for them)."""
        self.draining = True

    def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()

    async def close(self, timeout_s: float) -> None:
        """Stop accepting, let streams finish their last lines, then drop the rest."""
        self.stop_accepting()
        if self.connections:
            self.all_closed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self.all_closed.wait()
            for connection in list(self.connections):
                connection.state = _CLOSED
                connection._abort()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
