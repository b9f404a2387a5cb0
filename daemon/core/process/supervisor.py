"""The child supervisor: runs a command to its end and knows every child it started, by pid.

The reaper leaves the recorded children alone, because a reaper that took them would hang
uvloop's own wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from daemon.core.process.child import Child, Poller
from daemon.core.process.lines import LineSplitter, OutputSink
from daemon.core.process.reaper import OrphanReaper
from daemon.core.process.sigchld import reap_at_sigchld
from daemon.core.process.spawn import Spawner
from daemon.core.process.valve import OutputValve
from daemon.core.process.watchdog import Watchdog

LEFTOVER_PROBE_S = 0.05  # the longest pause between two looks at what a leader left behind


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


def _signal_group(pgid: int, signum: int) -> bool:
    """Signal a whole process group. False when it no longer exists."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class ChildSupervisor:
    """Spawns commands, tracks their pids, and reaps orphans that are not ours to wait for."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, job_dir: str | None = None
    ) -> None:
        """``job_dir``: where commands start, when not in the daemon's own directory."""
        self._spawn = Spawner(job_dir).spawn
        self._poller = Poller()
        self._owned: set[int] = set()
        self._reaper = OrphanReaper(self._owned, clock)
        self.watchdog = Watchdog()  # told of every group started, runs in ``guard_forever``

    async def run_command(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        sink: OutputSink,
        *,
        grace_s: Callable[[], float],
        valve: OutputValve | None = None,
        terminated: Callable[[CommandOutcome], None] | None = None,
        key: str = "",
    ) -> CommandOutcome:
        """Run ``argv`` to completion, streaming its lines to ``sink``, or raise ``SpawnError`` when
        it cannot start.

        Cancelling the calling task ends the process group (SIGTERM, ``grace_s()``, SIGKILL) and
        is raised again once the group is gone, after ``terminated`` was told how the job really
        ended, since a job that catches SIGTERM may exit 0. ``grace_s`` is asked at that moment,
        so that a shutdown can shorten it."""
        pid, out_read, err_read = self._spawn(argv, env)
        self._owned.add(pid)
        self.watchdog.watch(pid, key)
        child: Child | None = None
        collected = False
        try:
            splitters = {
                out_read: LineSplitter("stdout", sink),
                err_read: LineSplitter("stderr", sink),
            }
            child = Child(pid, splitters, self._poller)
            if valve is not None:
                valve.connect(child.pause_output, child.resume_output)
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
                if terminating.exception() is None:
                    with contextlib.suppress(ChildProcessError):  # the cancel goes on regardless
                        returncode = child.collect()
                        collected = True
                        if terminated is not None:
                            terminated(describe_returncode(returncode))
                raise
            returncode = child.collect()
            collected = True
            self._reaper.collected()
            # The leader is gone: what it left in its group does not outlive the run. (No other
            # group can have its id while one member is left: a group of none gets ESRCH.)
            try:
                if _signal_group(pid, signal.SIGTERM):
                    await self._end_leftovers(pid, grace_s())
                await child.last_words()
            except asyncio.CancelledError:
                if terminated is not None:  # cancelled after its end: it ended as it did
                    terminated(describe_returncode(returncode))
                raise
            return describe_returncode(returncode)
        finally:
            if valve is not None:
                valve.disconnect()
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
            self.watchdog.ended(pid)

    async def _end_leftovers(self, pgid: int, grace_s: float) -> None:
        """SIGKILL what is left in the group once ``grace_s`` has passed since its SIGTERM.
        A group has no exit to wait on: it is looked at after 5 ms, then twice as long each
        time up to ``LEFTOVER_PROBE_S`` (leftovers that obey SIGTERM are gone at once)."""
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + grace_s
        pause_s = 0.005
        while loop.time() < give_up_at:
            try:
                await asyncio.sleep(min(pause_s, max(0.0, give_up_at - loop.time())))
            except asyncio.CancelledError:
                _signal_group(pgid, signal.SIGKILL)  # a cancel does not skip what follows
                raise
            if not _signal_group(pgid, 0):
                return
            pause_s = min(2 * pause_s, LEFTOVER_PROBE_S)
        _signal_group(pgid, signal.SIGKILL)

    async def _terminate(self, child: Child, grace_s: float) -> None:
        pgid = child.pid
        child.stop_holding()  # a run being ended is not held back by its readers
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
        """Wait for zombie children that are not ours, and return the pids reaped."""
        return self._reaper.reap()

    async def guard_forever(self, period_s: float = 1.0, *, watchdog: bool = True) -> None:
        """The daemon's guard of its children, until cancelled: the watchdog process runs from
        the first command on (``watchdog``, when asked: ``watchdog_protects``), and orphans are
        reaped at each SIGCHLD and every ``period_s``."""
        if not watchdog:
            await reap_at_sigchld(self._reaper, period_s)
            return
        self.watchdog.arm(asyncio.get_running_loop())
        try:
            await reap_at_sigchld(self._reaper, period_s)
        finally:
            await self.watchdog.close()
