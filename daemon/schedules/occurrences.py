"""A schedule's occurrences walked, counted and searched: the one home of the questions every
part asks of them (the ticker, a start's catch-up, the Postgres planner, ``next``, the
dead-man's switch), each answer the same as stepping ``next_after`` one occurrence at a time.

Any schedule answers by walking ``next_after``, bounded, or by a search over it; one whose every
occurrence is a fixed step after the one before (``every``: ``Stepped``) answers by arithmetic,
however far the walk would go.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

WALK_STEPS = 8  # occurrences walked before a search for the latest: the usual gap is one or two
_MICROSECOND = timedelta(microseconds=1)
_FIRST_PROBE = timedelta(seconds=1)


class Occurrences(Protocol):
    """A schedule as the occurrence math sees it: only its occurrences."""

    def next_after(self, t: datetime, /) -> datetime | None: ...


@dataclass(frozen=True)
class Walk:
    """Occurrences walked from a first one through a bound: how many, the last of them, and
    whether the walk stopped at its limit short of the bound (more may follow ``last``)."""

    count: int
    last: datetime
    stopped: bool = False


@dataclass(frozen=True)
class Span:
    """Occurrences within a stretch, in Unix seconds as the slot record keeps them: how many,
    the first and the newest; ``more``: counted up to the walk's limit, and there were more."""

    count: int = 0
    first_s: float = 0.0
    newest_s: float = 0.0
    more: bool = False


@runtime_checkable
class Stepped(Protocol):
    """A schedule whose next occurrence is a fixed step after any time (``every``): a walk from
    wherever it starts is a grid, which arithmetic answers in one step."""

    def next_after(self, t: datetime, /) -> datetime | None: ...

    def walk_through(self, first: datetime, until: datetime, /) -> Walk:
        """``walk_through`` of this module without a limit: never ``stopped``."""

    def grid_between(self, anchor_s: float, after_s: float, until_s: float, /) -> Span:
        """``span_between`` of this module, on the grid of a walk from ``anchor_s``."""


def following(sched: Occurrences, after: datetime) -> Iterator[datetime]:
    """The occurrences strictly after ``after``, one ``next_after`` at a time, until none."""
    at = sched.next_after(after)
    while at is not None:
        yield at
        at = sched.next_after(at)


def gaps_after(sched: Occurrences, after: datetime, count: int) -> list[timedelta]:
    """The gaps between the first ``count`` + 1 occurrences after ``after`` (fewer: the
    schedule ends)."""
    times: list[datetime] = []
    for at in following(sched, after):
        times.append(at)
        if len(times) > count:
            break
    return [later - earlier for earlier, later in itertools.pairwise(times)]


def walk_through(sched: Occurrences, first: datetime, until: datetime, *, walk_max: int) -> Walk:
    """The occurrences from the occurrence ``first`` through ``until``, walked at most
    ``walk_max`` of them (then ``stopped``, with ``last`` short of ``until``)."""
    if isinstance(sched, Stepped):
        return sched.walk_through(first, until)
    count, at = 1, first
    while at < until:
        if count >= walk_max:
            return Walk(count, at, stopped=True)
        after = sched.next_after(at)
        if after is None or after > until:
            break
        count, at = count + 1, after
    return Walk(count, at)


def step_grid(step: timedelta, first: datetime, until: datetime) -> Walk:
    """``walk_through`` of a grid ``step`` apart: ``first`` + k * ``step`` for the largest k
    not past ``until``, as a walk adds it up (``timedelta`` sums are exact microseconds)."""
    k = max(0, (until - first) // step)
    return Walk(k + 1, first + step * k)


def latest_at_or_before(
    sched: Occurrences, known: datetime, until: datetime
) -> tuple[datetime, datetime | None]:
    """From an occurrence ``known`` (<= ``until``): the latest occurrence <= ``until`` and the
    first after it (None: none), in bounded work however far behind ``known`` lies."""
    latest = known
    for _ in range(WALK_STEPS):
        after = sched.next_after(latest)
        if after is None or after > until:
            return latest, after
        latest = after
    if isinstance(sched, Stepped):
        latest = sched.walk_through(latest, until).last
    else:
        latest = _search_latest(sched, latest, until)
    return latest, sched.next_after(latest)


def _search_latest(sched: Occurrences, known: datetime, until: datetime) -> datetime:
    """The latest occurrence <= ``until``, given an occurrence ``known`` <= it: a search for the
    boundary of "the first occurrence after t is not after ``until``", which holds for t before
    that occurrence and not from it on. ``lo`` always holds it, ``hi`` never does."""

    def before_latest(t: datetime) -> datetime | None:
        """The first occurrence after ``t`` when it is not after ``until`` (``t`` < the
        latest)."""
        found = sched.next_after(t)
        return found if found is not None and found <= until else None

    lo, hi, probe = known, until, _FIRST_PROBE
    while probe < until - lo:  # look back from the bound, doubling, for a time before the latest
        t = until - probe
        found = before_latest(t)
        if found is not None:
            lo = max(t, found - _MICROSECOND)
            break
        hi = t
        probe *= 2
    while hi - lo > _MICROSECOND:
        mid = lo + (hi - lo) / 2
        found = before_latest(mid)
        if found is None:
            hi = mid
        else:  # the occurrence found is itself not after the latest: start just before it
            lo = max(mid, found - _MICROSECOND)
    latest = sched.next_after(lo)
    return known if latest is None or latest > until else latest


def span_between(
    sched: Occurrences, anchor_s: float, after_s: float, until_s: float, *, walk_max: int
) -> Span:
    """The occurrences of a walk from the occurrence at ``anchor_s`` (<= ``after_s``) that lie
    after ``after_s`` and not after ``until_s`` (Unix seconds), counted up to ``walk_max``;
    past it the newest is searched for, not walked to."""
    if until_s <= after_s:
        return Span()
    if isinstance(sched, Stepped):
        return sched.grid_between(anchor_s, after_s, until_s)
    first = sched.next_after(datetime.fromtimestamp(after_s, UTC))
    if first is None or first.timestamp() > until_s:
        return Span()
    until = _utc_at_or_before(until_s)
    walk = walk_through(sched, first, until, walk_max=walk_max)
    if not walk.stopped:
        return Span(walk.count, first.timestamp(), walk.last.timestamp())
    newest, _after = latest_at_or_before(sched, walk.last, until)
    return Span(walk.count, first.timestamp(), newest.timestamp(), more=newest > walk.last)


def grid_between(anchor_s: float, step_s: float, after_s: float, until_s: float) -> Span:
    """``span_between`` of a grid: ``anchor_s`` plus a whole number of ``step_s``."""
    if until_s <= after_s:
        return Span()
    first_k = math.floor((after_s - anchor_s) / step_s) + 1
    last_k = math.floor((until_s - anchor_s) / step_s)
    if last_k < first_k:
        return Span()
    newest_s = min(anchor_s + last_k * step_s, until_s)  # a float's rounding never past it
    return Span(last_k - first_k + 1, anchor_s + first_k * step_s, newest_s)


def _utc_at_or_before(t_s: float) -> datetime:
    """The latest whole microsecond not after the Unix time ``t_s``: an occurrence is not
    after the one exactly when it is not after the other."""
    at = datetime.fromtimestamp(t_s, UTC)
    return at - _MICROSECOND if at.timestamp() > t_s else at
