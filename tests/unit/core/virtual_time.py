"""A clock of virtual time for the ticker's tests: sleepers wake in the order of their times
on a ``ManualClock``, and a step may jump further, as a suspended host does."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from datetime import UTC, datetime, timedelta

from daemon.testing import ManualClock

START = datetime(2026, 3, 27, 22, 0, tzinfo=UTC)  # Europe/Berlin springs forward on the 29th


class VirtualTime:
    """Sleepers wake in the order of their times on a ``ManualClock``; ``step`` moves the
    clock to the next wake-up, ``stall_s`` further when the host was suspended."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        return (self.clock() - START).total_seconds() + 5000.0

    async def sleep(self, seconds: float) -> None:
        future = asyncio.get_running_loop().create_future()
        wake = self.clock() + timedelta(seconds=max(seconds, 0.0))
        heapq.heappush(self._sleepers, (wake, next(self._order), future))
        await future

    async def quiet(self) -> None:
        for _ in range(30):  # every task runs until it sleeps again: nothing here does I/O
            await asyncio.sleep(0)

    async def step(self, stall_s: float) -> bool:
        await self.quiet()
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)  # a cancelled sleeper (a deadline's watch)
        if not self._sleepers:
            return False
        wake = self._sleepers[0][0]
        self.clock.set(max(wake, self.clock()) + timedelta(seconds=stall_s))
        while self._sleepers and self._sleepers[0][0] <= self.clock():
            _wake, _n, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)
        await self.quiet()
        return True

    async def until(self, when: datetime) -> None:
        """Step (no host suspended) until the clock reads ``when``."""
        while self.clock() < when:
            assert await self.step(0.0), "nothing sleeps: the clock cannot get there"
