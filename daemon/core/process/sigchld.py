"""Orphans reaped as soon as they exit: at each SIGCHLD, as tini does, and every second too.

The timer stays because uvloop takes SIGCHLD for good once a handler starts a subprocess
through it. The handler only asks the loop for a look, a callback rather than a task's turn.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

from daemon.core.process.reaper import OrphanReaper


async def reap_at_sigchld(reaper: OrphanReaper, period_s: float) -> None:
    """Reap at each SIGCHLD and every ``period_s``, until cancelled."""
    loop = asyncio.get_running_loop()
    asked = False
    ticking: list[asyncio.TimerHandle] = []

    def look() -> None:
        nonlocal asked
        asked = False
        reaper.reap()

    def ask() -> None:
        nonlocal asked
        if not asked:
            asked = True
            loop.call_soon(look)

    def on_sigchld(_signum: int, _frame: object) -> None:
        ask()  # a signal handler only asks the loop for a look

    def tick() -> None:
        ask()
        ticking[:] = [loop.call_later(period_s, tick)]

    tick()
    previous = _take_sigchld(on_sigchld)
    reaper.wake = ask
    try:
        await loop.create_future()  # until cancelled
    finally:
        reaper.wake = None
        ticking[0].cancel()
        if previous is not None:
            signal.signal(signal.SIGCHLD, previous)


def _take_sigchld(handler: Callable[[int, object], None]) -> signal.Handlers | None:
    """Install ``handler`` for SIGCHLD, and return the disposition it replaced.

    None when that is not possible here (off the main thread)."""
    try:
        previous = signal.signal(signal.SIGCHLD, handler)
    except ValueError:
        return None
    return previous  # type: ignore[return-value]
