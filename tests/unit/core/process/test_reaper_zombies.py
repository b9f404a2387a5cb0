"""Which zombies the reaper takes (daemon/core/process/reaper.py): one that is not its own, one
of its own session that nobody claims in time, never one the supervisor owns."""

from __future__ import annotations

import asyncio
import os
import select
from pathlib import Path

import pytest
import uvloop

from daemon.core.process import ChildSupervisor, CommandOutcome
from daemon.core.process.reaper import UNCLAIMED_ZOMBIE_S, zombie_children
from tests.unit.conftest import JOB_ENV, wait_readable
from tests.unit.core.process.running import each_line, grace_of, release_fifo


async def _exited(pid: int) -> None:
    pidfd = os.pidfd_open(pid)
    try:
        await wait_readable(pidfd)
    finally:
        os.close(pidfd)


async def test_reaper_reaps_a_zombie_that_is_not_its_own() -> None:
    pid = os.fork()
    if pid == 0:
        os.setsid()  # like an orphan of a job: a session other than the daemon's
        os._exit(5)
    await _exited(pid)
    assert pid in zombie_children(os.getpid())
    assert pid in ChildSupervisor().reap_orphans()
    assert pid not in zombie_children(os.getpid())
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # noqa: ASYNC222 (WNOHANG does not block)


async def test_reaper_leaves_a_fresh_zombie_of_the_daemons_own_session() -> None:
    """A Python handler's own subprocesses share the daemon's session; the event loop waits
    for them, so the reaper must not take an exit status that is about to be collected."""
    pid = os.fork()
    if pid == 0:
        os._exit(6)
    await _exited(pid)
    assert pid in zombie_children(os.getpid())
    assert pid not in zombie_children(os.getpid(), exclude_session=os.getsid(0))
    now = [100.0]
    supervisor = ChildSupervisor(clock=lambda: now[0])
    assert supervisor.reap_orphans() == []
    now[0] += UNCLAIMED_ZOMBIE_S / 2
    assert supervisor.reap_orphans() == []
    assert os.waitpid(pid, os.WNOHANG) == (pid, 6 << 8)  # noqa: ASYNC222 (does not block)


async def test_reaper_takes_a_zombie_of_its_own_session_that_nobody_claims() -> None:
    """Orphans of a handler's grandchildren, or of a docker exec session, are in the daemon's
    own session too: one that stays unclaimed is reaped, not left for good."""
    pid = os.fork()
    if pid == 0:
        os._exit(6)
    await _exited(pid)
    now = [100.0]
    supervisor = ChildSupervisor(clock=lambda: now[0])
    assert supervisor.reap_orphans() == []  # first seen
    now[0] += UNCLAIMED_ZOMBIE_S
    assert supervisor.reap_orphans() == [pid]
    assert pid not in zombie_children(os.getpid())


def test_reaper_never_takes_a_zombie_the_supervisor_owns(short_dir: Path) -> None:
    """uvloop (what the daemon runs) collects its children only on the loop's thread, so while
    this sink blocks the loop the job's leader is an owned zombie: the reaper must leave it,
    or ``proc.wait()`` would never return and the exit status would be lost."""
    fifo = short_dir / "go"
    os.mkfifo(fifo)
    seen: dict[str, list[int]] = {}
    supervisor = ChildSupervisor()

    def sink(_stream: str, line: str) -> None:
        leader = int(line)
        pidfd = os.pidfd_open(leader)
        try:
            release_fifo(fifo)
            readable, _, _ = select.select([pidfd], [], [], 10)
            assert readable, "the job did not exit"
        finally:
            os.close(pidfd)
        seen["leader"] = [leader]
        seen["zombies"] = zombie_children(os.getpid())
        seen["reaped"] = supervisor.reap_orphans()

    async def scenario() -> CommandOutcome:
        async with asyncio.timeout(20):
            return await supervisor.run_command(
                ["sh", "-c", 'echo $$; read x < "$1"; exit 7', "job", str(fifo)],
                JOB_ENV,
                each_line(sink),
                grace_s=grace_of,
            )

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        outcome = runner.run(scenario())
    assert seen["leader"][0] in seen["zombies"], "the scenario did not produce an owned zombie"
    assert seen["reaped"] == []
    assert outcome == CommandOutcome(7)
