"""The records and errors of the administration (``runbroker jobs``), apart from the runner's
port.

A command that cannot be carried out raises a ``JobError`` whose text is the user's message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from daemon.pg.store.base import Dependency, Misfire


class JobError(Exception):
    """A ``jobs`` command that cannot be carried out. ``str()`` is the user's message."""


class JobNotFound(JobError):
    pass


class JobInvalid(JobError):
    """The job as given cannot be added (a usage error: exit 2)."""


class JobExists(JobError):
    pass


class JobBusy(JobError):
    pass


@dataclass(frozen=True)
class NewJob:
    name: str
    task: str
    schedule: str
    tz: str
    next_run_at: datetime | None
    following_run_at: datetime | None = None  # the occurrence after next_run_at, if known
    payload: Any = field(default_factory=dict)
    enabled: bool = True
    max_attempts: int | None = None
    misfire: Misfire = "coalesce"
    depends_on: tuple[Dependency, ...] = ()


@dataclass(frozen=True)
class JobInfo:
    id: int
    name: str
    task: str
    payload: Any
    schedule: str
    tz: str
    enabled: bool
    next_run_at: datetime | None
    scheduled_for: datetime | None
    attempt: int
    max_attempts: int | None
    misfire: str
    depends_on: tuple[Dependency, ...]
    lease_owner: str | None
    lease_expires_at: datetime | None
    last_run_at: datetime | None
    last_status: str | None
    last_error: str | None

    @property
    def state(self) -> str:
        if self.lease_owner is not None:
            return "running"
        if not self.enabled:
            return "disabled"
        if self.scheduled_for is not None:
            return "retrying"
        return "scheduled" if self.next_run_at is not None else "done"


@dataclass(frozen=True)
class RunInfo:
    id: int
    job: str
    scheduled_for: datetime
    attempt: int
    status: str
    owner: str | None
    claimed_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    output: Any
    tz: str = "UTC"  # the job's zone: the history table shows times in it
    occurrences: int = 1  # more for a row of occurrences coalesced or missed (attempt 0)
