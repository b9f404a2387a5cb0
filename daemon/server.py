"""The owner-only unix socket server.

The socket is bound here, not by ``asyncio.start_unix_server(path=...)`` (which deletes whatever
is at the path, a live daemon's socket too): an flock beside it serialises daemons, a live socket
is never stolen, a stale one is replaced, and a path that is not a socket is never deleted. The
mode is 0600 before ``bind`` so there is no window where it is wider. Peers whose uid is neither
root nor ours are refused (SO_PEERCRED). Each connection has its own buffer, so a slow or
vanished client never blocks the executor or other clients. Payloads are never logged.
"""

from __future__ import annotations

import asyncio
import collections
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

from daemon.logs import get_logger
from daemon.protocol import (
    MAX_REQUEST_BYTES,
    REASON_FORBIDDEN,
    REASON_TOO_LARGE,
    REASON_TOO_SLOW,
    REQUEST_DEADLINE_S,
    ControlRequest,
    ProtocolError,
    SubmitRequest,
    decode_request,
    encode_event,
)
from daemon.runqueue import Event, Rejected, Run, RunQueue, RunRequest
from daemon.tasks import TaskRegistry

log = get_logger("runbroker.server")

BUFFERED_EVENTS_MAX = 4096
BUFFERED_BYTES_MAX = 4 * 1024 * 1024  # per client: output beyond this is dropped and counted
WRITE_TIMEOUT_S = 60.0
_PEERCRED = struct.Struct("3i")

ControlHandler = Callable[[ControlRequest], dict[str, Any]]


class SocketInUse(Exception):
    """Another daemon owns the socket, or the path is not ours to replace."""


def peer_uid(sock: socket.socket) -> int:
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
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


class _Outbox:
    """One client's pending answer lines; output is bounded (lines and bytes), lifecycle events
    never are."""

    def __init__(self) -> None:
        self.lines: collections.deque[bytes] = collections.deque()
        self.ready = asyncio.Event()
        self.finished = False
        self.dropped_lines = 0
        self.buffered_bytes = 0
        self.attached = True

    def on_event(self, run: Run, event: Event) -> None:
        if not self.attached:
            return
        if event.kind == "output" and (
            len(self.lines) >= BUFFERED_EVENTS_MAX or self.buffered_bytes >= BUFFERED_BYTES_MAX
        ):
            self.dropped_lines += 1
            return
        fields = dict(event.fields)
        ok = bool(fields.pop("ok", True))
        if event.kind == "done":
            self.finished = True
            if self.dropped_lines:
                fields["dropped_lines"] = self.dropped_lines
        line = encode_event(event.kind, ok, **fields)
        self.lines.append(line)
        self.buffered_bytes += len(line)
        self.ready.set()

    def pop(self) -> bytes:
        line = self.lines.popleft()
        self.buffered_bytes -= len(line)
        return line


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
    ) -> None:
        self.path = path
        self.queue = queue
        self.tasks = tasks
        self.control = control
        self.allowed_uids = frozenset({0, os.getuid()}) if allowed_uids is None else allowed_uids
        self.request_deadline_s = request_deadline_s
        self._server: asyncio.Server | None = None
        self._lock_fd: int | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        sock, self._lock_fd = bind_owner_only(self.path)
        self._server = await asyncio.start_unix_server(
            self._on_connect, sock=sock, limit=MAX_REQUEST_BYTES + 1
        )

    def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()

    async def close(self, timeout_s: float) -> None:
        """Stop accepting, let streams finish their last lines, then drop the rest."""
        self.stop_accepting()
        if self._connections:
            _done, pending = await asyncio.wait(set(self._connections), timeout=timeout_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, TimeoutError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _send(self, writer: asyncio.StreamWriter, line: bytes) -> None:
        writer.write(line)
        async with asyncio.timeout(WRITE_TIMEOUT_S):
            await writer.drain()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        uid = peer_uid(sock) if sock is not None else -1
        if uid not in self.allowed_uids:
            log.warning("socket.refused", peer_uid=uid)
            await self._send(writer, encode_event("done", False, reason=REASON_FORBIDDEN))
            return
        try:
            request = decode_request(await self._read_request(reader))
        except ProtocolError as exc:
            log.info("socket.bad_request", reason=exc.reason)
            await self._send(writer, encode_event("done", False, reason=exc.reason))
            return
        if isinstance(request, ControlRequest):
            answer = self.control(request)
            await self._send(writer, encode_event(**answer))
            return
        await self._stream_run(request, writer)

    async def _read_request(self, reader: asyncio.StreamReader) -> bytes:
        try:
            async with asyncio.timeout(self.request_deadline_s):
                return await reader.readuntil(b"\n")
        except TimeoutError:
            raise ProtocolError(REASON_TOO_SLOW) from None
        except asyncio.LimitOverrunError:
            raise ProtocolError(REASON_TOO_LARGE) from None
        except asyncio.IncompleteReadError as exc:
            if len(exc.partial) > MAX_REQUEST_BYTES:
                raise ProtocolError(REASON_TOO_LARGE) from None
            return exc.partial  # the client half-closed after its JSON without a newline

    async def _stream_run(self, request: SubmitRequest, writer: asyncio.StreamWriter) -> None:
        run_request = RunRequest(
            task=request.task, trigger="external", args=request.args, env=request.env
        )
        refusal = self.tasks.refusal(run_request)
        if refusal is not None:
            log.info("run.rejected", task=request.task, reason=refusal)
            await self._send(writer, encode_event("done", False, reason=refusal))
            return
        outbox = _Outbox()
        try:
            run = self.queue.submit(run_request, outbox.on_event)
        except Rejected as exc:
            log.info("run.rejected", task=request.task, reason=exc.reason)
            await self._send(writer, encode_event("done", False, reason=exc.reason))
            return
        log.info("run.queued", run_id=run.id, task=request.task, trigger="external")
        try:
            while outbox.lines or not outbox.finished:
                if not outbox.lines:
                    outbox.ready.clear()
                    await outbox.ready.wait()
                    continue
                await self._send(writer, outbox.pop())
        finally:
            # A client that goes away does not cancel its run; it just stops listening.
            outbox.attached = False
            outbox.lines.clear()
