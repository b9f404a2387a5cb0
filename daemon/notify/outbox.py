"""The notifications' own bounded queue: the executor's side puts, the one sender takes.

``put`` never blocks and never grows the queue past ``capacity``: when it is full, the oldest
notice is dropped (the newest say the most about the task now) and counted. A full outbox is
one incident: logged once when it first drops, again only after it has emptied.
"""

from __future__ import annotations

import asyncio
import collections

from daemon.log.logs import get_logger
from daemon.notify.notice import Notice

log = get_logger("runbroker.notify")

OUTBOX_CAPACITY = 100


class Outbox:
    def __init__(self, capacity: int = OUTBOX_CAPACITY) -> None:
        self.capacity = capacity
        self._notices: collections.deque[Notice] = collections.deque()
        self._ready = asyncio.Event()
        self.dropped = 0
        self._dropping = False  # this incident was logged

    def put(self, notice: Notice) -> None:
        """O(1), never blocks: ``notice`` is queued, the oldest dropped when full."""
        if len(self._notices) >= self.capacity:
            old = self._notices.popleft()
            self.dropped += 1
            if not self._dropping:
                self._dropping = True
                log.warning(
                    "notify.dropped",
                    task=old.task,
                    run_id=old.run_id,
                    capacity=self.capacity,
                    why="the notifications' queue is full: the oldest is dropped",
                )
        self._notices.append(notice)
        self._ready.set()

    def wake(self) -> None:
        """Wake the sender without a notice (a stop, a reload's new silences)."""
        self._ready.set()

    def take(self) -> Notice | None:
        """The oldest notice, or None when there is none."""
        if not self._notices:
            self._dropping = False  # emptied: the next drop is a new incident
            return None
        return self._notices.popleft()

    async def wait(self, timeout_s: float | None) -> None:
        """Until a notice is put (or ``timeout_s`` passes)."""
        if self._notices:
            return
        try:
            async with asyncio.timeout(timeout_s):
                await self._ready.wait()
        except TimeoutError:
            pass
        self._ready.clear()

    def drop_all(self) -> int:
        """Drop every pending notice (the end of a shutdown's time for them); how many."""
        count = len(self._notices)
        self._notices.clear()
        self.dropped += count
        return count

    def __len__(self) -> int:
        return len(self._notices)
