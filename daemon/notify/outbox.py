"""One target's bounded queue of notices: the executor's side puts, the target's sender takes.

``put`` never blocks and never grows the queue past ``capacity``: when it is full, the oldest
notice is dropped (the newest say the most about the task now) and counted. A queue that drops
is one incident: logged once when it first drops, again only after it has emptied.
"""

from __future__ import annotations

import collections

from daemon.log.logs import get_logger
from daemon.notify.notice import Notice

log = get_logger("runbroker.notify")

OUTBOX_CAPACITY = 100  # each target's


class Outbox:
    def __init__(self, kind: str, capacity: int = OUTBOX_CAPACITY) -> None:
        self.kind = kind
        self.capacity = capacity
        self._notices: collections.deque[Notice] = collections.deque()
        self._dropping = False  # this incident was logged

    def put(self, notice: Notice) -> int:
        """O(1), never blocks: ``notice`` is queued, the oldest dropped when full; how many
        were dropped (0 or 1)."""
        dropped = self.drop_oldest("this target's queue is full") if self.full else 0
        self._notices.append(notice)
        return dropped

    @property
    def full(self) -> bool:
        return len(self._notices) >= self.capacity

    def drop_oldest(self, why: str) -> int:
        """Drop the oldest notice (how many: 0 or 1), logged once an incident."""
        if not self._notices:
            return 0
        old = self._notices.popleft()
        if not self._dropping:
            self._dropping = True
            log.warning(
                "notify.dropped",
                task=old.task,
                kind=self.kind,
                run_id=old.run_id,
                capacity=self.capacity,
                why=f"{why}: the oldest is dropped",
            )
        return 1

    def take(self) -> Notice | None:
        """The oldest notice, or None when there is none."""
        if not self._notices:
            self._dropping = False  # emptied: the next drop is a new incident
            return None
        return self._notices.popleft()

    def drop_all(self) -> int:
        """Drop every pending notice (the end of a shutdown's time for them); how many."""
        count = len(self._notices)
        self._notices.clear()
        return count

    def __len__(self) -> int:
        return len(self._notices)
