"""Virtual time for code that sleeps: sleepers wake in the order of their times on a
``ManualClock``, so a test of a week of ticks takes milliseconds and never waits for real.

Give ``sleep`` and ``monotonic`` to what would sleep on the event loop (the daemon's ``Ticker``
takes both); ``advance_to`` moves the clock to a time, waking each sleeper on its way at its
own time, and ``step`` jumps to the next wake-up, further when a host was suspended.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from datetime import datetime, timedelta

from daemon.testing.clock import ManualClock

QUIET_TURNS = 30  # loop turns after a wake-up: every woken task runs on until it sleeps again
MONOTONIC_ORIGIN_S = 5000.0  # what ``monotonic()`` reads at the clock's first time


class VirtualTime:
    """Sleepers on ``clock``: ``sleep(seconds)`` returns when the clock has been moved past its
    time by ``advance_to`` or ``step``, never by the wall clock."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._origin = clock()
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._order = itertools.count()  # equal times wake in the order they slept

    def monotonic(self) -> float:
        """Seconds on a monotonic scale that moves with the clock."""
        return (self.clock() - self._origin).total_seconds() + MONOTONIC_ORIGIN_S

    async def sleep(self, seconds: float) -> None:
        """Return once the clock reads ``seconds`` later than now (at once for zero or less,
        after the next move of the clock)."""
        future = asyncio.get_running_loop().create_future()
        wake = self.clock() + timedelta(seconds=max(seconds, 0.0))
        heapq.heappush(self._sleepers, (wake, next(self._order), future))
        await future

    async def quiet(self) -> None:
        """Let every task run until it waits again (nothing here does real I/O): until no
        callback is ready on asyncio's own loop, or ``QUIET_TURNS`` turns on another."""
        ready = getattr(asyncio.get_running_loop(), "_ready", None)  # asyncio's run queue
        for _ in range(QUIET_TURNS):
            await asyncio.sleep(0)
            if ready is not None and not ready:
                return

    def next_wake(self) -> datetime | None:
        """When the next sleeper wakes (None: nobody sleeps)."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)  # a cancelled sleeper
        return self._sleepers[0][0] if self._sleepers else None

    async def _wake_due(self) -> None:
        while self._sleepers and self._sleepers[0][0] <= self.clock():
            _wake, _order, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)
        await self.quiet()

    async def step(self, stall_s: float = 0.0) -> bool:
        """Move to the next wake-up (``stall_s`` past it: a host suspended that long) and wake
        who is due; False when nobody sleeps."""
        await self.quiet()
        wake = self.next_wake()
        if wake is None:
            return False
        self.clock.set(max(wake, self.clock()) + timedelta(seconds=stall_s))
        await self._wake_due()
        return True

    async def advance_to(self, when: datetime) -> None:
        """Move the clock to ``when``, waking every sleeper on the way at its own time."""
        await self.quiet()
        while (wake := self.next_wake()) is not None and wake <= when:
            self.clock.set(max(wake, self.clock()))
            await self._wake_due()
        self.clock.set(when)
        await self._wake_due()
