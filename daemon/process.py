"""Child processes: the command runner (own session and process group, SIGTERM, grace,
SIGKILL) and the PID-1 orphan reaper.

Every child the daemon starts goes through ``ChildSupervisor.run_command``, which records its pid
while it lives. The reaper only ever waits for zombies that are *not* recorded (orphans that the
kernel reparented to us), by pid, so the event loop's own ``wait`` for its children is never
robbed of an exit status (see FIELD-NOTES: a ``waitpid(-1)`` reaper makes uvloop hang).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from daemon.logs import get_logger

log = get_logger("runbroker.process")

LINE_LIMIT_BYTES = 64 * 1024
DRAIN_AFTER_EXIT_S = 1.0

OutputSink = Callable[[str, str], None]  # (stream, line)


@dataclass(frozen=True)
class CommandOutcome:
    exit_code: int
    """The process's status, with death by signal N reported the shell's way, as 128 + N."""
    signal_name: str | None = None


def describe_returncode(returncode: int) -> CommandOutcome:
    if returncode >= 0:
        return CommandOutcome(returncode)
    signum = -returncode
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return CommandOutcome(128 + signum, name)


async def _pump(stream: asyncio.StreamReader | None, name: str, sink: OutputSink) -> None:
    if stream is None:
        return
    decoder = codecs.getincrementaldecoder("utf-8")("replace")  # a cut may split a character
    cut = False  # the last piece was cut at the line limit
    while True:
        try:
            chunk = await stream.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            text = decoder.decode(exc.partial, final=True)
            if text:
                sink(name, text)
            return
        except asyncio.LimitOverrunError as exc:
            chunk = await stream.readexactly(exc.consumed)
            sink(name, decoder.decode(chunk))
            cut = True
            continue
        if cut and chunk == b"\n":
            cut = False  # the cut fell just before this line's end: no empty piece
            text = decoder.decode(b"", final=True)
            if text:
                sink(name, text)
            continue
        cut = False
        sink(name, decoder.decode(chunk[:-1], final=True).removesuffix("\r"))


async def _exited(pid: int) -> None:
    """Return once our child ``pid`` has exited. Not ``proc.wait()``: the stdlib loop's (not
    uvloop's) also waits until every holder of the child's stdout and stderr is gone, so a
    background process left in the group would keep the run open."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # already exited and collected
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()

    def on_exit() -> None:
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(pidfd, on_exit)
    try:
        await exited
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)


def _signal_group(pgid: int, signum: int) -> bool:
    """Signal a whole process group; False when it no longer exists."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


class ChildSupervisor:
    """Spawns commands, tracks their pids, and reaps orphans that are not ours to wait for."""

    def __init__(self) -> None:
        self._owned: set[int] = set()
        self._spawning = 0
        self._groups: set[int] = set()

    async def run_command(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        sink: OutputSink,
        *,
        grace_s: Callable[[], float],
        cwd: str | None = None,
    ) -> CommandOutcome:
        """Run ``argv`` to completion, streaming its lines to ``sink``.

        Cancelling the calling task terminates the process group: SIGTERM, then SIGKILL after
        ``grace_s()`` (asked at that moment, so a shutdown can shorten it); the cancellation is
        re-raised once the group is gone.
        """
        self._spawning += 1
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
                limit=LINE_LIMIT_BYTES,
            )
        finally:
            self._spawning -= 1
        pid = proc.pid
        self._owned.add(pid)
        self._groups.add(pid)
        pumps = asyncio.gather(
            _pump(proc.stdout, "stdout", sink), _pump(proc.stderr, "stderr", sink)
        )
        try:
            try:
                await _exited(pid)
                # The leader is gone: what it left in its group does not outlive the run.
                _signal_group(pid, signal.SIGTERM)
                returncode = await proc.wait()
            except asyncio.CancelledError:
                # Terminating is not itself cancellable: a second cancel (another `cancel`, or
                # SIGTERM during a timeout's grace) must not skip the SIGKILL and forget the
                # group while the job still runs.
                terminating = asyncio.ensure_future(self._terminate(proc, grace_s()))
                while not terminating.done():
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.shield(terminating)
                raise
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(pumps), DRAIN_AFTER_EXIT_S)
            return describe_returncode(returncode)
        finally:
            if not pumps.done():
                pumps.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pumps
            for transport_stream in (proc.stdout, proc.stderr):
                if transport_stream is not None:
                    transport_stream.feed_eof()
            self._owned.discard(pid)
            self._groups.discard(pid)

    async def _terminate(self, proc: asyncio.subprocess.Process, grace_s: float) -> None:
        pgid = proc.pid
        _signal_group(pgid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), grace_s)
        except TimeoutError:
            _signal_group(pgid, signal.SIGKILL)
            await asyncio.shield(proc.wait())
        _signal_group(pgid, signal.SIGKILL)

    def kill_all(self) -> None:
        """SIGKILL every process group we started (the forced-exit path)."""
        for pgid in list(self._groups):
            _signal_group(pgid, signal.SIGKILL)

    # -- the reaper ---------------------------------------------------------------------------
    def reap_orphans(self) -> list[int]:
        """Wait for zombie children that are not ours; returns the pids reaped."""
        if self._spawning:
            return []  # a pid we are about to record may already be a zombie
        if not _has_zombie_child():
            return []  # the common case, without scanning /proc
        reaped = []
        own_session = os.getsid(0)
        for pid in zombie_children(os.getpid(), exclude_session=own_session):
            if pid in self._owned:
                continue
            try:
                done_pid, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if done_pid == pid:
                reaped.append(pid)
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


def zombie_children(parent_pid: int, exclude_session: int | None = None) -> list[int]:
    """Pids of zombie processes whose parent is ``parent_pid``, from /proc.

    ``exclude_session`` leaves out zombies of that session: the daemon's own session holds the
    children that Python handlers start (and that the event loop waits for); orphans come
    from jobs, which run in sessions of their own, or from ``docker exec`` sessions."""
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                stat = stat_file.read()
        except OSError:
            continue
        # Fields after the parenthesised command name: state, ppid, pgrp, session, ...
        tail = stat[stat.rfind(b")") + 2 :].split()
        if len(tail) < 4 or tail[0] != b"Z" or int(tail[1]) != parent_pid:
            continue
        if exclude_session is not None and int(tail[3]) == exclude_session:
            continue
        found.append(int(entry))
    return found
