"""The claim's plain case, written once: when a due row runs its own occurrence as attempt 1
with nothing else to decide.

Its conditions are data that both render to SQL (``CLAIM_PLAIN``) and evaluate in Python
(``plan_claim``), so the statement cannot drift from the planner.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from daemon.pg.store.base import DueJob

# A time a row holds outside these is out of range: BC and '-infinity' (which the claim reads as
# the year 1, the earliest time Python holds), 'infinity' and the years after 9999 (read as the
# last day of 9999), or a time that no zone's wall clock can hold. ``plan_claim`` takes such a
# time as unset, and the plain case never runs one.
EARLIEST_USABLE = datetime(1, 1, 2, tzinfo=UTC)
LATEST_USABLE = datetime(9999, 12, 30, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Seen:
    """What a condition reads in Python: the due row (its fields are named as the columns), the
    database's now, the misfire grace, and the occurrence after next_run_at (asked for only
    when a condition needs it: schedule math)."""

    job: DueJob
    now: datetime
    misfire_grace_s: float
    following: Callable[[], datetime]

    def column(self, name: str) -> Any:
        return getattr(self.job, name)


class Condition(Protocol):
    def sql(self, grace_s: str) -> str:
        """The condition in SQL, ``grace_s`` being the statement's expression of the grace."""
        ...

    def holds(self, seen: Seen) -> bool: ...


@dataclass(frozen=True)
class IsNull:
    column: str

    def sql(self, grace_s: str) -> str:
        return f"{self.column} IS NULL"

    def holds(self, seen: Seen) -> bool:
        return seen.column(self.column) is None


@dataclass(frozen=True)
class IsFalse:
    column: str  # a NOT NULL boolean column

    def sql(self, grace_s: str) -> str:
        return f"NOT {self.column}"

    def holds(self, seen: Seen) -> bool:
        return not seen.column(self.column)


@dataclass(frozen=True)
class Equals:
    column: str
    value: str

    def sql(self, grace_s: str) -> str:
        return f"{self.column} = '{self.value}'"

    def holds(self, seen: Seen) -> bool:
        return bool(seen.column(self.column) == self.value)


@dataclass(frozen=True)
class NotBefore:
    column: str
    earliest: datetime

    def sql(self, grace_s: str) -> str:
        return f"{self.column} >= timestamptz '{self.earliest.isoformat(sep=' ')}'"

    def holds(self, seen: Seen) -> bool:
        at: datetime = seen.column(self.column)
        return at >= self.earliest


@dataclass(frozen=True)
class WithinGrace:
    """At most the misfire grace before now."""

    column: str

    def sql(self, grace_s: str) -> str:
        return f"{self.column} >= now() - {grace_s} * interval '1 second'"

    def holds(self, seen: Seen) -> bool:
        at: datetime = seen.column(self.column)
        return (seen.now - at).total_seconds() <= seen.misfire_grace_s


@dataclass(frozen=True)
class NoneMissedSince:
    """No occurrence between next_run_at and now: the one after it is later than now."""

    def sql(self, grace_s: str) -> str:
        return "following_run_at > now()"

    def holds(self, seen: Seen) -> bool:
        return seen.following() > seen.now


@dataclass(frozen=True)
class AnyOf:
    conditions: tuple[Condition, ...]

    def sql(self, grace_s: str) -> str:
        return "(" + " OR ".join(c.sql(grace_s) for c in self.conditions) + ")"

    def holds(self, seen: Seen) -> bool:
        return any(c.holds(seen) for c in self.conditions)


# A fresh occurrence (no lease, no schedule to recompute, no retry, a next_run_at in range),
# none missed since, and for misfire = skip not later than the grace. Checked in this order:
# the schedule is computed only for a row that passed the others.
PLAIN_CASE: tuple[Condition, ...] = (
    IsNull("lease_owner"),
    IsFalse("needs_schedule"),
    IsNull("scheduled_for"),
    NotBefore("next_run_at", EARLIEST_USABLE),
    NoneMissedSince(),
    AnyOf((Equals("misfire", "coalesce"), WithinGrace("next_run_at"))),
)


def plain_sql(grace_s: str) -> str:
    """The plain case as one SQL boolean expression over a scheduled_jobs row."""
    return "(" + "\n    AND ".join(c.sql(grace_s) for c in PLAIN_CASE) + ")"


def is_plain(
    job: DueJob, now: datetime, misfire_grace_s: float, following: Callable[[], datetime]
) -> bool:
    """Whether the row runs as its own occurrence, attempt 1 (``following``: the occurrence
    after its next_run_at, ``NO_OCCURRENCE`` when none)."""
    seen = Seen(job, now, misfire_grace_s, following)
    return all(c.holds(seen) for c in PLAIN_CASE)
