"""The rows of the in-memory ``MemoryStore`` (a job, a run) and its LISTEN."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from daemon.pg.store.base import Dependency, StoreUnavailable


@dataclass
class MemJob:
    id: int
    name: str
    task: str
    schedule: str
    next_run_at: datetime | None
    tz: str = "UTC"
    payload: Any = field(default_factory=dict)
    enabled: bool = True
    needs_schedule: bool = False
    scheduled_for: datetime | None = None
    attempt: int = 0
    max_attempts: int | None = None
    misfire: str = "coalesce"
    depends_on: tuple[Dependency, ...] = ()
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    current_run_id: int | None = None
    last_run_at: datetime | None = None
    last_status: str | None = None
    last_error: str | None = None

    def due_at(self) -> datetime | None:
        """When the claim's filter first takes the row: at its occurrence, and not while a
        lease on it lasts (``SELECT_DUE``'s condition)."""
        if self.next_run_at is None or self.lease_expires_at is None:
            return self.next_run_at
        return max(self.next_run_at, self.lease_expires_at)


@dataclass
class MemRun:
    id: int
    job_id: int
    scheduled_for: datetime
    attempt: int
    owner: str
    status: str = "queued"
    started_at: datetime | None = None
    finished_at: datetime | None = None
    output: Any = None
    error: str | None = None
    occurrences: int = 1  # more for a row of occurrences passed over (attempt 0)


class MemSubscription:
    """A LISTEN of the memory store: lost when dropped, closed, or pinged in an outage."""

    def __init__(self, in_outage: Callable[[], bool]) -> None:
        self._in_outage = in_outage
        self._lost = asyncio.Event()

    def drop(self) -> None:
        """The connection went away (the store dropped its listeners)."""
        self._lost.set()

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    async def wait_lost(self) -> None:
        await self._lost.wait()

    async def ping(self) -> None:
        if self._in_outage():
            self._lost.set()
            raise StoreUnavailable("outage")

    async def close(self) -> None:
        self._lost.set()
