"""The request deadline of every connection still sending its request, under one timer.

A timer per connection cost a start and a cancel for nearly every request. Every deadline is
the same time after its accept, so the connections in arrival order are in deadline order and
one timer set for the earliest serves them all.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

__all__ = ["Expiring", "RequestDeadlines"]

# A timer may fire up to a millisecond early (the loop's clock has that resolution): a
# deadline that near is due, rather than a timer set again for what is left of it.
_EARLY_S = 0.001


class Expiring(Protocol):
    def request_expired(self) -> None:
        """Its request did not arrive in time."""
        ...


class RequestDeadlines:
    """Connections ``watch``ed as accepted and ``forget``ed once their request is complete.

    One still watched ``deadline_s`` later is told ``request_expired``."""

    def __init__(self, deadline_s: float) -> None:
        self.deadline_s = deadline_s
        self.loop: asyncio.AbstractEventLoop | None = None  # the serving loop, once watching
        self._due: dict[Expiring, float] = {}  # in the order watched: the order of deadlines
        self._timer: asyncio.TimerHandle | None = None

    def watch(self, who: Expiring) -> None:
        """Start ``who``'s deadline (once: a connection is watched as it is accepted)."""
        loop = self.loop
        if loop is None:  # looked up once: on CPython 3.11 each lookup is a getpid()
            loop = self.loop = asyncio.get_running_loop()
        due = loop.time() + self.deadline_s
        self._due[who] = due
        if self._timer is None:
            self._timer = loop.call_at(due, self._expire)

    def forget(self, who: Expiring) -> None:
        self._due.pop(who, None)

    def watched(self) -> int:
        return len(self._due)

    def oldest(self) -> Expiring | None:
        """The connection watched the longest: still sending its request (or an idle one)."""
        return next(iter(self._due), None)

    def _expire(self) -> None:
        self._timer = None
        loop = self.loop
        assert loop is not None
        now = loop.time() + _EARLY_S
        expired: list[Expiring] = []
        for who, due in self._due.items():
            if due > now:
                break
            expired.append(who)
        for who in expired:
            del self._due[who]
        try:
            for who in expired:
                who.request_expired()
        finally:  # whatever one of them raised, the others still have their deadlines
            if self._due and self._timer is None:
                self._timer = loop.call_at(next(iter(self._due.values())), self._expire)

    def close(self) -> None:
        """Stop the timer. What is still watched is never told."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._due.clear()
