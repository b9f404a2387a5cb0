"""The owner-only unix socket server: binds the socket, accepts connections, and writes every
connection's lines of one loop turn together.

Each connection is a plain ``asyncio.Protocol`` with its own bounded buffer, so a slow or
vanished client never blocks the executor or other clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from pathlib import Path

from daemon.core.journal import Journal
from daemon.core.runqueue import RunQueue
from daemon.core.tasks import TaskRegistry
from daemon.core.ticker.busy import BusyPolicy
from daemon.server.answers import AnswerStream
from daemon.server.binding import SocketInUse, bind_owner_only
from daemon.server.connection import Connection, ControlHandler
from daemon.server.deadlines import RequestDeadlines
from daemon.server.limits import ConnectionLimits
from daemon.server.segments import SegmentCache
from daemon.wire.protocol import REQUEST_DEADLINE_S

__all__ = ["UNFINISHED_BYTES_MAX", "ControlHandler", "SocketInUse", "SocketServer"]

UNFINISHED_BYTES_MAX = 64 * 1024 * 1024  # all clients' requests still being received
MAX_CONNECTIONS = 1024  # connections held at once (``limits``: what happens past it)


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
        journal: Journal | None = None,
        max_connections: int = MAX_CONNECTIONS,
        busy: BusyPolicy | None = None,
    ) -> None:
        self.path = path
        self.queue = queue
        # A trigger of a task with an ``on_busy``; without an executor to cancel (a test's
        # server), a replaced running run goes on.
        self.busy = BusyPolicy(queue, lambda _run_id, _reason: "") if busy is None else busy
        self.tasks = tasks
        self.journal = Journal() if journal is None else journal  # what `logs` reads
        self.segments = SegmentCache()  # what `logs` readers send, encoded once for them all
        self.control = control
        self.allowed_uids = frozenset({0, os.getuid()}) if allowed_uids is None else allowed_uids
        self.deadlines = RequestDeadlines(request_deadline_s)
        self._server: asyncio.Server | None = None
        self._lock_fd: int | None = None
        self.connections: set[Connection] = set()
        self.all_closed = asyncio.Event()
        self.unfinished_bytes = 0
        self._dirty: list[AnswerStream] = []
        self.draining = False
        self._flush_scheduled = False
        self.unfinished_bytes_max = unfinished_bytes_max
        self.limits = ConnectionLimits(max_connections)
        self.loop: asyncio.AbstractEventLoop  # the serving loop, from start()

    def flush_later(self, stream: AnswerStream) -> None:
        """Write ``connection``'s lines at the end of this loop turn's callbacks, with every
        other connection's. The executor's step that a submission wakes comes first: the run
        it starts, and a quick handler's result, join the ``queued`` line in one write."""
        self._dirty.append(stream)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush_dirty)

    def _flush_dirty(self) -> None:
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, []
        for stream in dirty:
            stream.flush()

    async def start(self) -> None:
        sock, self._lock_fd = bind_owner_only(self.path)
        self.loop = asyncio.get_running_loop()
        try:
            # A partial: each accept makes its protocol without a Python frame around it.
            factory = functools.partial(Connection, self)
            self._server = await self.loop.create_unix_server(factory, sock=sock)
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
                connection.abort()
        self.deadlines.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
