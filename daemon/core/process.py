"""Child processes: the command runner (own session and process group, SIGTERM, grace,
SIGKILL) and the PID-1 orphan reaper.

Commands start with ``os.posix_spawn``, which glibc implements with ``clone(CLONE_VFORK)``: the
cost of a start does not grow with the daemon's memory, as a fork's (which copies the page
tables) does. The child gets /dev/null as stdin, a pipe each for stdout and stderr, a session of
its own, default dispositions for the signals Python ignores, and nothing else: every other
descriptor of the daemon is close-on-exec. Its exit is seen through a pidfd on the event loop,
its output through the pipes' own descriptors: no transports, no SIGCHLD.

Every child the daemon starts is recorded by pid while it lives. The reaper waits only for
zombies that are *not* recorded, by pid: orphans reparented to the daemon at once, and a zombie
of the daemon's own session (a Python handler's child, or one of a ``docker exec`` session)
only once it has stayed unclaimed for ``UNCLAIMED_ZOMBIE_S``, long after the event loop would
have collected a child it waits for (see FIELD-NOTES: a ``waitpid(-1)`` reaper makes uvloop
hang).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import os
import select
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from daemon.observe.logs import get_logger

log = get_logger("runbroker.process")

LINE_LIMIT_BYTES = 64 * 1024
DRAIN_AFTER_EXIT_S = 1.0
READ_CHUNK_BYTES = 64 * 1024
UNCLAIMED_ZOMBIE_S = 2.0  # a zombie of our own session nobody collected in this time is reaped
# Python starts with these ignored; an ignored disposition survives exec, a job must not
# inherit it (what subprocess's restore_signals does).
_RESTORED_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ", "SIGXFZ") if hasattr(signal, name)
)


def _ignored_signals() -> tuple[int, ...]:
    """Every signal the daemon ignores now, and those Python ignores: a job starts with all of
    them at their defaults (a handled signal is reset by exec itself)."""
    ignored = set(_RESTORED_SIGNALS)
    for signum in signal.valid_signals():
        try:
            if signal.getsignal(signum) is signal.SIG_IGN:
                ignored.add(signum)
        except (ValueError, OSError):
            continue
    return tuple(sorted(ignored))


OutputSink = Callable[[str, str], None]  # (stream, line)
_UTF8_DECODER = codecs.getincrementaldecoder("utf-8")


@dataclass(frozen=True)
class CommandOutcome:
    exit_code: int
    """The process's status, with death by signal N reported the shell's way, as 128 + N."""
    signal_name: str | None = None


class SpawnError(Exception):
    """The command could not be started (missing, not executable, bad interpreter line)."""


def describe_returncode(returncode: int) -> CommandOutcome:
    if returncode >= 0:
        return CommandOutcome(returncode)
    signum = -returncode
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return CommandOutcome(128 + signum, name)


class LineSplitter:
    """Bytes of one stream in, lines out: a line longer than ``LINE_LIMIT_BYTES`` arrives in
    pieces, a character cut by a piece's end is carried to the next, ``\\r\\n`` counts as an end
    of line, and what is left at the end of the stream is a last line."""

    __slots__ = ("_buffer", "_cut", "_decoder", "_name", "_sink")

    def __init__(self, name: str, sink: OutputSink) -> None:
        self._name = name
        self._sink = sink
        self._buffer = b""
        self._cut = False  # the last piece was cut at the limit
        self._decoder: codecs.IncrementalDecoder | None = None  # made by the first bytes

    def feed(self, data: bytes) -> None:
        buffer = self._buffer + data if self._buffer else data
        if self._decoder is None:
            self._decoder = _UTF8_DECODER("replace")
        name, sink, decode = self._name, self._sink, self._decoder.decode
        limit = LINE_LIMIT_BYTES
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            stop = len(buffer) if end < 0 else end
            while stop - start > limit:  # a long line, in pieces of the limit
                sink(name, decode(buffer[start : start + limit]))
                self._cut = True
                start += limit
            if end < 0:
                break
            if self._cut and end == start:
                # The cut fell just before this line's end: no empty piece.
                text = decode(b"", True)
                if text:
                    sink(name, text)
            else:
                text = decode(buffer[start:end], True)
                sink(name, text[:-1] if text.endswith("\r") else text)
            self._cut = False
            start = end + 1
        self._buffer = buffer[start:]

    def close(self) -> None:
        if self._decoder is None:
            return  # the stream said nothing
        text = self._decoder.decode(self._buffer, True)
        self._buffer = b""
        if text:
            self._sink(self._name, text)


def _signal_group(pgid: int, signum: int) -> bool:
    """Signal a whole process group; False when it no longer exists."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


class _ProgramPaths:
    """Where a bare program name is found in a PATH, as execvpe would search it; remembered,
    since a search costs a stat per directory and a task runs the same program each time.
    A remembered file that is gone is searched for again (``forget``)."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, str], str] = {}

    def resolve(self, program: str, env: Mapping[str, str]) -> str:
        if "/" in program:
            return program
        key = (program, env.get("PATH", os.defpath))
        found = self._found.get(key)
        if found is None:
            found = shutil.which(program, path=key[1])
            if found is None:
                raise SpawnError(f"cannot start {program!r}: not found in PATH")
            if len(self._found) > 256:
                self._found.clear()
            self._found[key] = found
        return found

    def forget(self, program: str, env: Mapping[str, str]) -> bool:
        """Drop what was remembered for ``program``; whether there was anything."""
        return self._found.pop((program, env.get("PATH", os.defpath)), None) is not None


class _Poller:
    """One epoll instance for every child's pidfd and pipes, which the event loop watches as a
    single descriptor. The loop's own readers cost libuv about seven epoll_ctl calls a
    descriptor (a probe, the add, the removes), 21 for a command's three; here a descriptor
    costs one ``register``, and closing it is its removal."""

    def __init__(self) -> None:
        self._epoll: select.epoll | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._callbacks: dict[int, Callable[[], None]] = {}

    def watch(self, fd: int, callback: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._epoll is None:
            self._start(loop)
        assert self._epoll is not None
        self._callbacks[fd] = callback
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


class _Child:
    """One started command: its pidfd, its two pipes, and futures for its exit and EOFs."""

    def __init__(self, pid: int, pipes: dict[int, LineSplitter], poller: _Poller) -> None:
        self.pid = pid
        self.loop = asyncio.get_running_loop()
        self.exited: asyncio.Future[None] = self.loop.create_future()
        self.drained: asyncio.Future[None] = self.loop.create_future()
        self.pipes = pipes
        self.poller = poller
        self.has_exited = False
        self.pidfd = os.pidfd_open(pid)  # our unreaped child: its pid cannot be reused
        poller.watch(self.pidfd, self._on_exit)
        for fd in pipes:
            os.set_blocking(fd, False)
            poller.watch(fd, functools.partial(self._on_output, fd))

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
        try:
            data = os.read(fd, READ_CHUNK_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.pipes[fd].feed(data)
            return
        self._close_pipe(fd)

    def _close_pipe(self, fd: int) -> None:
        splitter = self.pipes.pop(fd)
        self.poller.forget_closed(fd)
        os.close(fd)
        splitter.close()
        if not self.pipes and not self.drained.done():
            self.drained.set_result(None)

    async def last_words(self) -> None:
        """What the pipes still hold once the leader is gone, as far as it comes within
        ``DRAIN_AFTER_EXIT_S`` (a process left holding them must not keep the run open)."""
        if not self.drained.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.drained), DRAIN_AFTER_EXIT_S)

    def collect(self) -> int:
        """The exit status of the (exited) child, reaped now: a returncode as subprocess's."""
        _pid, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)

    def close(self) -> None:
        """Stop watching: what the pipes still hold is not read."""
        self._close_pidfd()
        for fd in list(self.pipes):
            self._close_pipe(fd)


def keep_descriptors_private() -> int:
    """Mark every open descriptor but 0, 1 and 2 close-on-exec; returns how many were not.

    A job must inherit only stdin, stdout and stderr. Every descriptor Python, uvloop and
    asyncpg open is close-on-exec already (PEP 446); this covers the ones the daemon itself
    inherited (from its parent, a test runner, an init) at start. A scan of /proc/self/fd costs
    too much to repeat before every spawn; a handler that makes a descriptor inheritable on
    purpose (``os.set_inheritable``) hands it to the jobs that follow."""
    changed = 0
    try:
        entries = os.listdir("/proc/self/fd")
    except OSError:
        return 0
    for entry in entries:
        fd = int(entry)
        if fd <= 2:
            continue
        try:
            if os.get_inheritable(fd):
                os.set_inheritable(fd, False)
                changed += 1
        except OSError:
            continue  # the listing's own descriptor, closed by now
    return changed


class ChildSupervisor:
    """Spawns commands, tracks their pids, and reaps orphans that are not ours to wait for."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        keep_descriptors_private()
        self._default_signals = _ignored_signals()
        self._programs = _ProgramPaths()
        self._poller = _Poller()
        self._owned: set[int] = set()
        self._clock = clock
        self._unclaimed: dict[int, float] = {}  # zombie of our session -> first seen

    def _spawn(self, argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, int, int]:
        """Start ``argv``; returns its pid and the read ends of its stdout and stderr."""
        if not argv or not argv[0]:
            raise SpawnError("cannot start an empty command")
        try:
            return self._spawn_program(self._programs.resolve(argv[0], env), argv, env)
        except FileNotFoundError:
            if self._programs.forget(argv[0], env):
                # The remembered file is gone (an upgrade moved it): search the PATH again.
                with contextlib.suppress(FileNotFoundError):
                    return self._spawn_program(self._programs.resolve(argv[0], env), argv, env)
            program = self._programs.resolve(argv[0], env)
            if os.path.exists(program):
                # execve says ENOENT for a script whose #! line names a missing interpreter.
                raise SpawnError(
                    f"cannot start {argv[0]!r}: its interpreter (#! line) was not found"
                ) from None
            raise SpawnError(f"cannot start {argv[0]!r}: No such file or directory") from None

    def _spawn_program(
        self, program: str, argv: Sequence[str], env: Mapping[str, str]
    ) -> tuple[int, int, int]:
        out_read, out_write = os.pipe2(os.O_CLOEXEC)
        err_read, err_write = os.pipe2(os.O_CLOEXEC)
        try:
            pid = os.posix_spawn(
                program,
                list(argv),
                env,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, out_write, 1),
                    (os.POSIX_SPAWN_DUP2, err_write, 2),
                ],
                setsid=True,
                setsigdef=self._default_signals,
                setsigmask=(),
            )
        except FileNotFoundError:
            os.close(out_read)
            os.close(err_read)
            raise  # the caller may search the PATH again
        except (OSError, ValueError) as exc:
            os.close(out_read)
            os.close(err_read)
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise SpawnError(f"cannot start {argv[0]!r}: {detail}") from None
        finally:
            os.close(out_write)
            os.close(err_write)
        return pid, out_read, err_read

    async def run_command(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        sink: OutputSink,
        *,
        grace_s: Callable[[], float],
    ) -> CommandOutcome:
        """Run ``argv`` to completion, streaming its lines to ``sink``; ``SpawnError`` when it
        cannot start.

        Cancelling the calling task terminates the process group: SIGTERM, then SIGKILL after
        ``grace_s()`` (asked at that moment, so a shutdown can shorten it); the cancellation is
        re-raised once the group is gone.
        """
        pid, out_read, err_read = self._spawn(argv, env)
        self._owned.add(pid)
        child: _Child | None = None
        collected = False
        try:
            splitters = {
                out_read: LineSplitter("stdout", sink),
                err_read: LineSplitter("stderr", sink),
            }
            child = _Child(pid, splitters, self._poller)
            try:
                await child.exited
            except asyncio.CancelledError:
                # Terminating is not itself cancellable: a second cancel (another `cancel`, or
                # SIGTERM during a timeout's grace) must not skip the SIGKILL and forget the
                # group while the job still runs.
                terminating = asyncio.ensure_future(self._terminate(child, grace_s()))
                while not terminating.done():
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.shield(terminating)
                raise
            # The leader is gone: what it left in its group does not outlive the run.
            _signal_group(pid, signal.SIGTERM)
            returncode = child.collect()
            collected = True
            await child.last_words()
            return describe_returncode(returncode)
        finally:
            if child is None:  # the pidfd or the readers could not be had
                os.close(out_read)
                os.close(err_read)
                _signal_group(pid, signal.SIGKILL)
            else:
                child.close()
            if not collected:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)  # noqa: ASYNC222 - it has exited, or was just SIGKILLed
            self._owned.discard(pid)

    async def _terminate(self, child: _Child, grace_s: float) -> None:
        pgid = child.pid
        _signal_group(pgid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(child.exit_future()), grace_s)
        except TimeoutError:
            _signal_group(pgid, signal.SIGKILL)
            await asyncio.shield(child.exit_future())
        _signal_group(pgid, signal.SIGKILL)
        await child.last_words()

    def kill_all(self) -> None:
        """SIGKILL every process group we started (the forced-exit path)."""
        for pgid in list(self._owned):
            _signal_group(pgid, signal.SIGKILL)

    # -- the reaper ---------------------------------------------------------------------------
    def reap_orphans(self) -> list[int]:
        """Wait for zombie children that are not ours; returns the pids reaped."""
        if not _has_zombie_child():
            self._unclaimed.clear()
            return []  # the common case, without scanning /proc
        reaped = []
        own_session = os.getsid(0)
        now = self._clock()
        unclaimed: dict[int, float] = {}
        for pid, session in zombie_children_with_session(os.getpid()):
            if pid in self._owned:
                continue
            if session == own_session:
                # Perhaps a child the event loop or a handler is about to collect: only one
                # that nobody claims for a while is an orphan.
                first_seen = self._unclaimed.get(pid, now)
                if now - first_seen < UNCLAIMED_ZOMBIE_S:
                    unclaimed[pid] = first_seen
                    continue
            try:
                done_pid, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if done_pid == pid:
                reaped.append(pid)
        self._unclaimed = unclaimed
        if reaped:
            log.debug("reaper.reaped", count=len(reaped))
        return reaped

    async def reap_forever(self, period_s: float = 1.0) -> None:
        while True:
            self.reap_orphans()
            await asyncio.sleep(period_s)


def _has_zombie_child() -> bool:
    """Peek, without reaping, whether any child of ours has exited."""
    try:
        info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return info is not None


def _children_of(parent_pid: int) -> list[str] | None:
    """The pids of ``parent_pid``'s children, from its threads' ``children`` files (a handful
    of reads instead of one per process on the machine); None where the kernel has no such
    file."""
    pids: list[str] = []
    try:
        tasks = os.listdir(f"/proc/{parent_pid}/task")
        for task in tasks:
            with open(f"/proc/{parent_pid}/task/{task}/children", "rb") as children:
                pids.extend(children.read().decode().split())
    except FileNotFoundError:
        return None
    except OSError:
        return []
    return pids


def zombie_children_with_session(parent_pid: int) -> list[tuple[int, int]]:
    """(pid, session) of the zombie processes whose parent is ``parent_pid``, from /proc."""
    found: list[tuple[int, int]] = []
    candidates = _children_of(parent_pid)
    if candidates is None:
        try:
            candidates = [entry for entry in os.listdir("/proc") if entry.isdigit()]
        except OSError:
            return found
    for entry in candidates:
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                stat = stat_file.read()
        except OSError:
            continue
        # Fields after the parenthesised command name: state, ppid, pgrp, session, ...
        tail = stat[stat.rfind(b")") + 2 :].split()
        if len(tail) < 4 or tail[0] != b"Z" or int(tail[1]) != parent_pid:
            continue
        found.append((int(entry), int(tail[3])))
    return found


def zombie_children(parent_pid: int, exclude_session: int | None = None) -> list[int]:
    """Pids of zombie processes whose parent is ``parent_pid`` (outside ``exclude_session``)."""
    return [
        pid
        for pid, session in zombie_children_with_session(parent_pid)
        if exclude_session is None or session != exclude_session
    ]
