"""A started child as the event loop sees it: its exit through a pidfd, its output through the
pipes' own descriptors, one epoll instance for all of them: no transports, no SIGCHLD."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import os
import select
from collections.abc import Callable

from daemon.core.process.lines import LineSplitter

DRAIN_AFTER_EXIT_S = 1.0  # without a byte from the pipes once the job has exited
DRAIN_AFTER_EXIT_MAX_S = 30.0  # reading what a job left in its pipes, at most
READ_CHUNK_BYTES = 64 * 1024
# Full reads of a pipe in one loop turn, at most: bigger batches, but well within what a run's
# journal keeps (a follower a turn behind must not find its lines dropped and hold the job).
READS_A_TURN = 2
# A job's pipes hold this much (Linux's default is 64 KiB): a job that writes a burst goes on
# while the daemon reads, as it would into a file. Unprivileged, Linux allows up to
# /proc/sys/fs/pipe-max-size (1 MiB by default), and a refusal keeps the default.
PIPE_BYTES = 1024 * 1024
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class Poller:
    """One epoll instance for every child's pidfd and pipes, watched by the loop as one descriptor.

    The loop's own readers cost libuv several epoll_ctl calls a descriptor, and here a descriptor
    costs one ``register``."""

    def __init__(self) -> None:
        self._epoll: select.epoll | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._callbacks: dict[int, Callable[[], None]] = {}

    def watch(self, fd: int, callback: Callable[[], None], loop: asyncio.AbstractEventLoop) -> None:
        """Call ``callback`` whenever ``fd`` is readable.

        ``loop`` is the running one, looked up once by the caller, because on CPython 3.11 a
        lookup costs a getpid."""
        if self._loop is not loop or self._epoll is None:
            self._start(loop)
        assert self._epoll is not None
        self._callbacks[fd] = callback
        self._epoll.register(fd, select.EPOLLIN)

    def pause(self, fd: int) -> None:
        """Stop watching ``fd`` for now (its callback is kept for ``resume``). Unregistered, not
        modified to no events: epoll reports a hang-up whatever the events asked for."""
        if self._epoll is not None and fd in self._callbacks:
            self._epoll.unregister(fd)

    def resume(self, fd: int) -> None:
        if self._epoll is not None and fd in self._callbacks:
            self._epoll.register(fd, select.EPOLLIN)

    def forget_closed(self, fd: int) -> None:
        """``fd`` is being closed: its registration goes with it."""
        self._callbacks.pop(fd, None)

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._epoll is not None:  # a new loop (tests): the old one's epoll is dropped
            self._epoll.close()
        self._epoll = select.epoll()  # close-on-exec
        self._loop = loop
        self._callbacks.clear()
        loop.add_reader(self._epoll.fileno(), self._ready)

    def _ready(self) -> None:
        assert self._epoll is not None
        callbacks = self._callbacks
        for fd, _events in self._epoll.poll(0):
            callback = callbacks.get(fd)
            if callback is not None:
                callback()


class Child:
    """One started command: its pidfd, its two pipes, and futures for its exit and EOFs."""

    def __init__(self, pid: int, pipes: dict[int, LineSplitter], poller: Poller) -> None:
        self.pid = pid
        self.loop = loop = asyncio.get_running_loop()
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()
        self.pipes = pipes
        self.poller = poller
        self.has_exited = False
        # Paused while a reader holds the output back (``pause_output``). A run being ended
        # is never held (``stop_holding``).
        self.paused = False
        self.holdable = True
        self._resumed: asyncio.Future[None] | None = None
        self._pausing: asyncio.Future[None] | None = None
        self.read_bytes = 0  # from the pipes, so far
        self.grown = False  # the pipes made larger (``_grow_pipes``)
        self.pidfd = os.pidfd_open(pid)  # our unreaped child: its pid cannot be reused
        poller.watch(self.pidfd, self._on_exit, loop)
        for fd in pipes:
            # Non-blocking, though the poller reads a pipe only when epoll says it is
            # readable: should a copy of a read end outlive this child (a process forked by
            # a handler's thread), a registration left behind under a reused number must not
            # block PID 1 in a read. One F_SETFL (os.set_blocking would ask F_GETFL first).
            fcntl.fcntl(fd, fcntl.F_SETFL, os.O_NONBLOCK)
            poller.watch(fd, functools.partial(self._on_output, fd), loop)

    def _on_exit(self) -> None:
        self._close_pidfd()  # waitpid by pid now: it cannot be reused before it is collected
        self.has_exited = True
        if not self.exited.done():
            self.exited.set_result(None)

    def exit_future(self) -> asyncio.Future[None]:
        """The exit, as a future no cancelled wait has cancelled (a cancel of the task that
        awaited ``exited`` cancels that future with it)."""
        if self.exited.cancelled():
            self.exited = self.loop.create_future()
            if self.has_exited:
                self.exited.set_result(None)
        return self.exited

    def _close_pidfd(self) -> None:
        if self.pidfd >= 0:
            self.poller.forget_closed(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = -1

    def _on_output(self, fd: int) -> None:
        """Read what the pipe holds, up to ``READS_A_TURN`` full reads: a chatty job's lines
        go on in bigger batches (to the journal, the clients, the log), each costing what a
        batch costs, and the followers are written to, and woken, fewer times. A reader that
        holds the output back (``pause_output``) stops it at once."""
        splitter = self.pipes[fd]
        for _ in range(READS_A_TURN):
            try:
                data = os.read(fd, READ_CHUNK_BYTES)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._close_pipe(fd)
                return
            self.read_bytes += len(data)
            if len(data) < READ_CHUNK_BYTES:  # the pipe is empty
                splitter.feed(data)
                return
            if not self.grown:
                self._grow_pipes()  # a chatty job: from its first full read
            splitter.feed(data)
            if self.paused:
                return

    def _grow_pipes(self) -> None:
        """Pipes of ``PIPE_BYTES``: a burst of output goes on while the daemon reads, as it
        would into a file. Only for a job that fills its pipe (two syscalls a run saved)."""
        self.grown = True
        for fd in self.pipes:
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_BYTES)

    def _close_pipe(self, fd: int) -> None:
        splitter = self.pipes.pop(fd)
        self.poller.forget_closed(fd)
        os.close(fd)
        splitter.close()
        if not self.pipes and not self.drained.done():
            self.drained.set_result(None)

    def pause_output(self) -> None:
        """A reader holds the output back: the pipes are not read (the job blocks once they
        are full, as it would writing into a pipe)."""
        if self.holdable:
            self._hold(True)

    def resume_output(self) -> None:
        self._hold(False)

    def _hold(self, paused: bool) -> None:
        """Pause or resume every pipe, and wake whoever waits for that change."""
        if self.paused == paused:
            return
        self.paused = paused
        for fd in self.pipes:
            (self.poller.pause if paused else self.poller.resume)(fd)
        if paused:
            waiter, self._pausing = self._pausing, None
        else:
            waiter, self._resumed = self._resumed, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def stop_holding(self) -> None:
        """The run is being ended: its output is read whatever its readers, from now on."""
        self.holdable = False
        self.resume_output()

    async def last_words(self) -> None:
        """What the pipes still hold once the leader is gone, read to the end while it keeps coming.

        Given up after ``DRAIN_AFTER_EXIT_S`` without a byte, after ``DRAIN_AFTER_EXIT_MAX_S`` in
        all, or once more than the pipes hold has come, so a process left holding them cannot
        keep the run open. The clocks stop while a reader holds the output back."""
        loop = self.loop
        held_at_most = self.read_bytes + len(self.pipes) * PIPE_BYTES
        idle_left_s, all_left_s = DRAIN_AFTER_EXIT_S, DRAIN_AFTER_EXIT_MAX_S
        seen = self.read_bytes
        while not self.drained.done() and idle_left_s > 0 and all_left_s > 0:
            if self.paused and self.read_bytes <= held_at_most:
                if self._resumed is None:
                    self._resumed = loop.create_future()
                await asyncio.shield(self._resumed)
                continue
            if self.read_bytes > held_at_most:
                self.stop_holding()  # more than the pipes held: another process writes on
            began = loop.time()
            self._pausing = pausing = loop.create_future()  # a hold stops the clocks
            await asyncio.wait(
                {self.drained, pausing},
                timeout=min(idle_left_s, all_left_s),
                return_when=asyncio.FIRST_COMPLETED,
            )
            self._pausing = None
            spent_s = loop.time() - began
            all_left_s -= spent_s
            if seen < self.read_bytes <= held_at_most:
                seen, idle_left_s = self.read_bytes, DRAIN_AFTER_EXIT_S  # the job's own, coming
            else:
                idle_left_s -= spent_s

    def collect(self) -> int:
        """The exit status of the (exited) child, reaped now: a returncode as subprocess's."""
        _pid, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)

    def close(self) -> None:
        """Stop watching: what the pipes still hold is not read."""
        self._close_pidfd()
        for fd in list(self.pipes):
            self._close_pipe(fd)
