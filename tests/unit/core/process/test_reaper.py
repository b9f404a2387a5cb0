"""Orphans reaped at SIGCHLD, as tini does, without taking an exit status the executor or a
handler waits for. The daemon runs on uvloop, so these tests do too."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable

import uvloop

from daemon.core.process import ChildSupervisor, CommandOutcome
from daemon.core.process.reaper import zombie_children
from tests.support.eventually import eventually_async
from tests.unit.conftest import JOB_ENV

HOUR_S = 3600.0  # the fallback poll never comes within a test: only SIGCHLD can wake it


def _on_uvloop(scenario: Callable[[ChildSupervisor], Awaitable[None]]) -> None:
    """Run ``scenario`` with the supervisor's guard running, as in the daemon."""

    async def guarded() -> None:
        supervisor = ChildSupervisor()
        guard = asyncio.create_task(supervisor.guard_forever(period_s=HOUR_S))
        try:
            async with asyncio.timeout(30):
                await asyncio.sleep(0)  # the guard's first turn: its handler is installed
                await scenario(supervisor)
        finally:
            guard.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await guard

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(guarded())


def _orphan_exiting_on(release: int) -> int:
    """A child in a session of its own (as a job's orphan is) that exits once ``release`` is
    readable."""
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.read(release, 1)
        os._exit(0)
    return pid


def test_an_orphan_is_reaped_at_its_sigchld_not_at_the_next_poll() -> None:
    async def scenario(_supervisor: ChildSupervisor) -> None:
        release_read, release_write = os.pipe()
        try:
            pid = _orphan_exiting_on(release_read)
            await asyncio.sleep(0)
            os.write(release_write, b"x")
            await eventually_async(
                lambda: pid not in zombie_children(os.getpid()) and _gone(pid),
                "the orphan to be reaped",
                timeout_s=10,
            )
        finally:
            os.close(release_read)
            os.close(release_write)

    _on_uvloop(scenario)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_executors_and_the_loops_own_children_keep_their_statuses() -> None:
    """Every SIGCHLD of a job's own exit wakes the reaper: it must leave the job's status to
    the supervisor, and a handler's subprocess's to the event loop."""

    async def scenario(supervisor: ChildSupervisor) -> None:
        outcomes = await asyncio.gather(
            *(
                supervisor.run_command(
                    ["sh", "-c", f"exit {code}"], JOB_ENV, lambda _s, _l: None, grace_s=lambda: 1.0
                )
                for code in range(20)
            )
        )
        assert outcomes == [CommandOutcome(code) for code in range(20)]
        handler_child = await asyncio.create_subprocess_exec("sh", "-c", "exit 3")
        assert await handler_child.wait() == 3
        after = await supervisor.run_command(
            ["sh", "-c", "exit 4"], JOB_ENV, lambda _s, _l: None, grace_s=lambda: 1.0
        )
        assert after == CommandOutcome(4)

    _on_uvloop(scenario)
