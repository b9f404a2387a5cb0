"""The daemon's side of its watchdog (``watchdog_main``), the process that ends the jobs'
process groups when the daemon cannot.

A stopped or blocked daemon fires no timer of its own, so the deadlines live in another
process. Each line is shorter than PIPE_BUF, so it is written whole or not at all.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import sys
from pathlib import Path

from daemon.log.logs import get_logger

log = get_logger("runbroker.process")

SCRIPT = str(Path(__file__).with_name("watchdog_main.py"))
RESTART_AFTER_S = 1.0
BACKLOG_MAX = 10_000  # lines kept while its pipe is full (it is stopped, or slow)


def watchdog_protects(*, pid1: bool, database: bool) -> bool:
    """Whether a watchdog process protects anything: a database runner's leases need a killer
    that a stopped daemon does not stop, and the jobs of a daemon that is not PID 1 would
    outlive it. As PID 1 without a database the kernel ends every process of the namespace
    when the daemon dies, and no lease needs fencing: a second interpreter buys nothing."""
    return database or not pid1


class Watchdog:
    """Starts the watchdog process and tells it about groups and lease deadlines."""

    def __init__(self) -> None:
        self._armed = False  # ``arm``ed and not started yet: the first group starts it
        self._retry_due = False  # a start is set for RESTART_AFTER_S later (``_restart_later``)
        self.pid = -1
        self._to_dog = -1  # the write end of its stdin
        self._from_dog = -1  # the read end of its stdout: its answers, and its end
        self._loop: asyncio.AbstractEventLoop | None = None
        self._groups: dict[int, str] = {}  # live group -> run id, told again after a restart
        self._deadlines: dict[str, float] = {}  # run id -> monotonic deadline, the same
        self._backlog: collections.deque[bytes] = collections.deque(maxlen=BACKLOG_MAX)
        self._closed = False

    def arm(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the process with the first job's group.

        Until a command runs there is nothing to kill: a daemon whose tasks are all handlers
        never pays for a second interpreter (about 10 MiB). The deadlines told meanwhile are
        kept, and told at its start."""
        if self._closed or self._to_dog >= 0:
            return
        self._loop = loop
        self._armed = True
        if self._groups:  # a job started before the guard did
            self.start(loop)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the process now. Should that fail, the next job's group tries again, and a
        second later while groups are unguarded."""
        self._armed = False
        self._loop = loop
        try:
            to_dog, from_dog = self._spawn()
        except OSError as exc:
            self._armed = True
            log.error("watchdog.not_started", error=str(exc), retry_in_s=RESTART_AFTER_S)
            if self._groups:
                self._restart_later()
            return
        os.set_blocking(to_dog, False)
        os.set_blocking(from_dog, False)
        self._to_dog, self._from_dog = to_dog, from_dog
        loop.add_reader(from_dog, self._on_readable)
        self._send_all([f"W {pgid} {key}" for pgid, key in self._groups.items()])
        self._send_all([f"D {key} {at!r}" for key, at in self._deadlines.items()])
        log.debug("watchdog.started", pid=self.pid)

    def _spawn(self) -> tuple[int, int]:
        """The process, started: the write end of its stdin and the read end of its stdout."""
        opened: list[int] = []
        try:
            their_stdin, to_dog = os.pipe2(os.O_CLOEXEC)
            opened += [their_stdin, to_dog]
            from_dog, their_stdout = os.pipe2(os.O_CLOEXEC)
            opened += [from_dog, their_stdout]
            self.pid = os.posix_spawn(
                sys.executable,
                [sys.executable, "-I", "-S", SCRIPT],
                {},
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, their_stdin, 0),
                    (os.POSIX_SPAWN_DUP2, their_stdout, 1),
                ],
                setpgroup=0,
                setsigmask=(),
            )
        except OSError:
            for fd in opened:
                os.close(fd)
            raise
        os.close(their_stdin)
        os.close(their_stdout)
        return to_dog, from_dog

    def watch(self, pgid: int, key: str) -> None:
        """A job's process group (``key``: its run id) was started."""
        self._groups[pgid] = key
        if self._armed and self._loop is not None and not self._closed:
            self.start(self._loop)  # told of every group and deadline it knows, this one too
            return
        self._send(f"W {pgid} {key}")

    def ended(self, pgid: int) -> None:
        """The group is gone (the watchdog sees that itself: nothing is sent)."""
        self._groups.pop(pgid, None)

    def deadline(self, key: str, at_s: float) -> None:
        """Run ``key``'s group is SIGKILLed at ``at_s`` (``time.monotonic``'s clock)."""
        self._deadlines[key] = at_s
        self._send(f"D {key} {at_s!r}")

    def forget(self, key: str) -> None:
        if self._deadlines.pop(key, None) is not None:
            self._send(f"F {key}")

    def _send(self, text: str) -> None:
        if self._to_dog < 0:
            return
        line = f"{text}\n".encode()
        if self._backlog:
            self._backlog.append(line)
            return
        try:
            os.write(self._to_dog, line)
        except BlockingIOError:
            self._backlog.append(line)
            assert self._loop is not None
            self._loop.add_writer(self._to_dog, self._flush)
        except OSError:
            pass  # it is gone: its end of file restarts it, and it is told everything again

    def _send_all(self, texts: list[str]) -> None:
        for text in texts:
            self._send(text)

    def _flush(self) -> None:
        assert self._loop is not None
        while self._backlog:
            try:
                os.write(self._to_dog, self._backlog[0])
            except BlockingIOError:
                return
            except OSError:
                break
            self._backlog.popleft()
        self._backlog.clear()
        self._loop.remove_writer(self._to_dog)

    def _on_readable(self) -> None:
        try:
            data = os.read(self._from_dog, 64 * 1024)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            for line in data.decode("ascii", "replace").splitlines():
                _kind, key, pgid = line.split(" ")
                log.warning("job.watchdog_killed", run_id=key, pgid=int(pgid), reason=KILLED_WHY)
            return
        self._stop()
        if not self._closed:
            log.error("watchdog.lost", pid=self.pid, restart_in_s=RESTART_AFTER_S)
            self._restart_later()

    def _restart_later(self) -> None:
        """Start it again ``RESTART_AFTER_S`` from now (once, however often this is asked)."""
        if self._closed or self._retry_due or self._loop is None:
            return
        self._retry_due = True
        self._loop.call_later(RESTART_AFTER_S, self._restart)

    def _restart(self) -> None:
        self._retry_due = False
        if not self._closed and self._loop is not None and self._to_dog < 0:
            self.start(self._loop)

    def _stop(self) -> None:
        to_dog, from_dog = self._to_dog, self._from_dog
        self._to_dog = self._from_dog = -1
        if from_dog >= 0:
            if self._loop is not None:
                self._loop.remove_reader(from_dog)
                if self._backlog:
                    self._loop.remove_writer(to_dog)
            os.close(from_dog)
            os.close(to_dog)
        self._backlog.clear()
        if self.pid > 0:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, os.WNOHANG)

    async def close(self, timeout_s: float = 0.2) -> None:
        """End it (at its end of file it SIGKILLs the groups it still knows: none, after a
        clean drain) and collect it, waiting ``timeout_s`` at most (it exits at once unless it
        is stopped: the shutdown's budget is not spent on it)."""
        self._closed = True
        pid = self.pid
        try:
            pidfd = os.pidfd_open(pid) if pid > 0 else -1
        except OSError:
            pidfd = -1
        self._stop()
        if pidfd < 0:
            return
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[None] = loop.create_future()

        def on_exit() -> None:
            if not exited.done():
                exited.set_result(None)

        loop.add_reader(pidfd, on_exit)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(exited, timeout_s)
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # noqa: ASYNC222 - WNOHANG: it does not block


KILLED_WHY = (
    "the daemon did not renew the run's lease in time (stopped, blocked, or cut off): its "
    "watchdog killed the job's process group before the lease could expire"
)
