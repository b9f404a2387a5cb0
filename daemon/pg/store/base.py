"""The runner's port to its job store: the records it reads and writes, and ``JobStore``.

Narrow on purpose: the administration of ``runbroker jobs`` is beside it, not in it. Times are
aware UTC datetimes, and "now" is always the database's clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

Policy = Literal["stop", "skip"]
Misfire = Literal["coalesce", "skip"]
RunStatus = Literal[
    "queued", "running", "succeeded", "failed", "cancelled", "abandoned", "coalesced", "missed"
]
SlotStatus = Literal["coalesced", "missed"]  # a job_runs row of occurrences that did not run
FinalStatus = Literal["succeeded", "failed", "cancelled"]


class StoreUnavailable(Exception):
    """The database cannot be reached now, and the caller retries with backoff."""


class StoreSchemaMissing(Exception):
    """The tables are not there: ``runbroker migrate`` has not been run."""


@dataclass(frozen=True)
class Dependency:
    job: str
    policy: Policy = "stop"


@dataclass(slots=True)
class DueJob:
    """A job row locked by ``claim``: due for an occurrence, a retry, or an expired lease."""

    id: int
    name: str
    task: str
    payload: Any
    schedule: str
    tz: str
    next_run_at: datetime
    scheduled_for: datetime | None  # set: the occurrence being retried
    attempt: int  # attempts already made for scheduled_for
    max_attempts: int | None
    misfire: Misfire
    depends_on: tuple[Dependency, ...]
    needs_schedule: bool
    lease_owner: str | None  # set: another replica's lease expired
    current_run_id: int | None
    # set: why the row cannot be run as written (a payload or depends_on that cannot be read).
    # Its run fails with this reason instead of running, and every other job goes on.
    unusable: str | None = None


@dataclass(slots=True)
class PassedOver:
    """Occurrences a claim passes over, recorded as one ``job_runs`` row in its transaction:
    ``coalesced`` into the run it makes, or ``missed`` (misfire = skip). The row's key is
    (job, ``first``, attempt 0): no run has attempt 0, and a claim made again after a release
    replaces it."""

    status: SlotStatus
    first: datetime  # the first occurrence passed over
    count: int  # how many (at least this many when ``note`` says so)
    note: str  # what the row says to people, in its error column


@dataclass(slots=True)
class ClaimPlan:
    """What ``claim`` does with one due job, decided by the planner inside the transaction.

    ``run``: insert a run row for (scheduled_for, attempt) and lease the job. Otherwise the job
    is only rescheduled: next_run_at, scheduled_for and attempt are written as given.
    ``abandon_error``: the expired lease's run becomes ``abandoned`` with this error.
    """

    run: bool
    scheduled_for: datetime | None
    attempt: int
    next_run_at: datetime | None = None
    enabled: bool = True
    last_status: str | None = None
    last_error: str | None = None
    abandon_error: str | None = None
    unusable: str | None = None  # why the row cannot be used as written (reported as such)
    passed_over: PassedOver | None = None  # occurrences this claim neither runs nor leaves due


Planner = Callable[[DueJob, datetime], ClaimPlan]

# ``following_run_at`` of a schedule with no occurrence after next_run_at (PostgreSQL stores
# it as 'infinity'): nothing can be missed before it.
NO_OCCURRENCE = datetime.max.replace(tzinfo=UTC)

# DueJob, ClaimPlan, Claimed, Finish, Release and Started are made per run on the runner's hot
# path: plain slotted dataclasses, treated as immutable but not frozen (a frozen dataclass's
# constructor sets every field through object.__setattr__, several times slower).


@dataclass(slots=True)
class Claimed:
    """A run this replica now owns: the job (as claimed) and its run row."""

    job: DueJob
    run_id: int
    scheduled_for: datetime
    attempt: int


class ClaimIncomplete(Exception):
    """A claim failed after committing some runs.

    ``claimed`` are this replica's now, to start or release. ``__cause__`` is what failed."""

    def __init__(self, claimed: list[Claimed]) -> None:
        super().__init__(f"the claim failed after claiming {len(claimed)} runs")
        self.claimed = claimed


@dataclass(slots=True)
class Finish:
    """A run's result and the job's next state, written in one transaction guarded by owner."""

    job_id: int
    run_id: int
    status: FinalStatus
    started_at: datetime | None
    finished_at: datetime
    output: dict[str, Any] | None
    error: str | None
    next_run_at: datetime | None  # used when retry_in_s is None
    retry_in_s: float | None  # a retry: next_run_at = database now + this
    scheduled_for: datetime | None  # kept for a retry, None when the occurrence is over
    attempt: int  # kept for a retry, 0 when the occurrence is over
    # the occurrence after next_run_at (NO_OCCURRENCE: none, None: not known, as for a retry)
    following_run_at: datetime | None = None


@dataclass(slots=True)
class Release:
    """A claimed run that never started: delete its row and give the job back as it was."""

    job_id: int
    run_id: int


@dataclass(slots=True)
class Started:
    run_id: int
    started_at: datetime


@dataclass
class WriteBatch:
    starts: list[Started] = field(default_factory=list)
    finishes: list[Finish] = field(default_factory=list)
    releases: list[Release] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.starts) + len(self.finishes) + len(self.releases)


@dataclass(frozen=True)
class WriteOutcome:
    """Run ids whose finish or release was refused: the lease was no longer ours."""

    lost_run_ids: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Renewal:
    """A heartbeat's answer: the jobs whose leases it renewed, and those no longer there
    (removed while their runs were held: not a lease another replica took)."""

    kept: set[int]
    gone: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class SchedulerFlags:
    paused: bool = False
    enabled: bool = True
    interval_s: float | None = None  # scheduler.interval_seconds: the fallback poll interval

    @property
    def claiming(self) -> bool:
        return self.enabled and not self.paused


@dataclass(frozen=True)
class Outlook:
    """One look at the database: the scheduler flags and how soon something is due."""

    flags: SchedulerFlags
    # the earliest next_run_at or lease expiry, from now (None: none, or for PostgresStore not
    # looked at, while the scheduler is paused or disabled)
    due_in_s: float | None


@dataclass(frozen=True)
class DependencyState:
    """``pending``: the job has a run in flight or an occurrence at or before ours to run."""

    exists: bool
    pending: bool
    last_status: str | None


class Subscription(Protocol):
    """A live LISTEN. ``lost`` is set when the connection goes away."""

    @property
    def lost(self) -> bool: ...

    async def wait_lost(self) -> None: ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...


class JobStore(Protocol):
    async def claim(
        self,
        owner: str,
        limit: int,
        lease_s: float,
        planner: Planner,
        *,
        misfire_grace_s: float = 0.0,
    ) -> list[Claimed]:
        """Lease up to ``limit`` due jobs and insert their runs, deciding each with ``planner``
        (``misfire_grace_s`` is the planner's own: a store may decide the plain case, a fresh
        occurrence with none missed, without calling it, and must then decide it the same)."""
        ...

    async def heartbeat(self, owner: str, job_ids: Sequence[int], lease_s: float) -> Renewal: ...

    async def write(self, owner: str, batch: WriteBatch) -> WriteOutcome: ...

    async def outlook(self) -> Outlook: ...

    async def dependency_states(
        self, names: Sequence[str], scheduled_for: datetime
    ) -> dict[str, DependencyState]: ...

    async def prune(self, retention_s: float) -> int: ...

    async def schema_problem(self) -> str | None:
        """Why the schema does not fit this runbroker (not migrated, or older), or None."""
        ...

    async def listen(self, on_message: Callable[[str], None]) -> Subscription: ...

    async def close(self) -> None: ...
