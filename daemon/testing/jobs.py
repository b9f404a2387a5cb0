"""Scheduled jobs on a manual clock: add jobs as ``runbroker jobs add`` does, move time, see
which fire, record how their runs ended.

``JobBoard`` decides nothing itself (the daemon's in-memory store and planner do), so it cannot
drift from what the daemon does with the same jobs.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal

from daemon.core.runqueue import RunResult
from daemon.pg.admin.args import schedule_spec
from daemon.pg.bridge import run_request
from daemon.pg.plan import plan_claim, plan_finish, plan_first_run
from daemon.pg.store.base import Claimed, WriteBatch
from daemon.pg.store.memory import MemoryStore
from daemon.schedules import parse_schedule
from daemon.testing.clock import ManualClock
from daemon.testing.handlers import Handler, HandlerResult, run_handler

OWNER = "testing"  # the one replica that claims on the board
# A firing stays claimed until the test records it: the board does not heartbeat, so its
# lease (which in the daemon ends a replica's lost run) outlasts any test's clock.
LEASE_S = 100 * 365 * 86400.0
ADD_LIMIT = 10_000  # claimed at most per advance: far more than a test's jobs


@dataclass(frozen=True)
class Firing:
    """One run of a job that the clock made due: its occurrence and attempt (1 for the first,
    2 for the first retry). Record how it ended with ``JobBoard.record`` (or ``succeed``,
    ``fail``, ``run``)."""

    name: str
    task: str
    scheduled_for: datetime
    attempt: int
    payload: Any
    claimed: Claimed = field(repr=False, compare=False)


@dataclass(frozen=True)
class Outcome:
    """What a recorded run did to its job: a retry at ``next_run_at`` (``retry`` True, the
    same occurrence), or the next occurrence (None: the job has no more)."""

    status: Literal["succeeded", "failed", "cancelled"]
    retry: bool
    next_run_at: datetime | None


class JobBoard:
    """Jobs and their schedules on ``clock``, with the daemon's defaults for retries:
    ``max_attempts`` (RUNBROKER_RETRY_ATTEMPTS), ``backoff_s`` (RUNBROKER_RETRY_BACKOFF) and
    ``misfire_grace_s`` (how late a ``misfire="skip"`` job may still start: RUNBROKER_LEASE).
    The backoff's jitter comes from ``random.Random(seed)``: the same seed, the same delays."""

    def __init__(
        self,
        clock: ManualClock | None = None,
        *,
        max_attempts: int = 3,
        backoff_s: float = 60.0,
        misfire_grace_s: float = 60.0,
        seed: int = 0,
    ) -> None:
        self.clock = clock or ManualClock()
        self.store = MemoryStore(clock=self.clock)
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self._planner = partial(
            plan_claim, default_max_attempts=max_attempts, misfire_grace_s=misfire_grace_s
        )
        self._rng = random.Random(seed)

    def add(
        self,
        name: str,
        task: str = "default",
        *,
        every: str | None = None,
        daily: str | None = None,
        weekly: tuple[str, str] | None = None,
        cron: str | None = None,
        at: str | None = None,
        schedule: str | None = None,
        tz: str = "UTC",
        payload: Any = None,
        max_attempts: int | None = None,
        misfire: Literal["coalesce", "skip"] = "coalesce",
    ) -> datetime | None:
        """Add a job as ``runbroker jobs add`` would, and return its first run (None: an ``at`` in
        the past).

        Exactly one schedule, such as ``weekly=("sun", "04:00")`` or ``schedule="*/5 * * * *"``
        (``--schedule``: any form). ValueError for a bad schedule."""
        given = [v for v in (every, daily, weekly, cron, at, schedule) if v is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of every, daily, weekly, cron, at, schedule")
        spec = schedule_spec(
            argparse.Namespace(
                every=every, daily=daily, weekly=weekly, cron=cron, at=at, schedule=schedule
            )
        )
        parsed = parse_schedule(spec, tz)
        first, _following = plan_first_run(parsed, self.clock())
        self.store.add(
            name,
            task,
            parsed.text,
            first,
            tz=tz,
            payload={} if payload is None else payload,
            max_attempts=max_attempts,
            misfire=misfire,
        )
        return first

    def next_run_at(self, name: str) -> datetime | None:
        """When the job runs next (a retry's time, during backoff). None: never again."""
        return self.store.job(name).next_run_at

    async def due(self) -> list[Firing]:
        """The runs that are due at the clock's time now, claimed, in the order the daemon
        would run them. A firing stays claimed (not due again) until it is recorded."""
        claimed = await self.store.claim(OWNER, ADD_LIMIT, LEASE_S, self._planner)
        return [
            Firing(c.job.name, c.job.task, c.scheduled_for, c.attempt, c.job.payload, c)
            for c in claimed
        ]

    async def advance(self, by: timedelta | float = 0.0, /, **parts: float) -> list[Firing]:
        """Move the clock (as ``ManualClock.advance``) and return what is due then."""
        self.clock.advance(by, **parts)
        return await self.due()

    async def advance_to(self, when: datetime) -> list[Firing]:
        """Set the clock to ``when`` and return what is due then."""
        self.clock.set(when)
        return await self.due()

    async def record(self, firing: Firing, result: HandlerResult) -> Outcome:
        """Record how ``firing``'s run ended (a ``run_handler`` result), as the daemon would:
        a failure is retried with backoff until the job's attempts are used up, then (or
        after a success) the job moves to its next occurrence. A run cancelled by request
        is not retried."""
        # `runbroker cancel` is recorded, not retried (as the runner's held runs decide)
        asked = RunResult(ok=result.ok, reason=result.reason, cancelled=result.cancelled)
        retryable = not asked.cancelled_by_request
        now = self.clock()
        finish = plan_finish(
            firing.claimed,
            ok=result.ok,
            cancelled=result.cancelled,
            error=result.reason,
            output=result.output,
            started_at=now - timedelta(milliseconds=result.duration_ms),
            finished_at=now,
            default_max_attempts=self.max_attempts,
            backoff_base_s=self.backoff_s,
            retryable=retryable,
            rng=self._rng,
        )
        outcome = await self.store.write(OWNER, WriteBatch(finishes=[finish]))
        if outcome.lost_run_ids:
            raise ValueError(f"{firing.name} attempt {firing.attempt} was already recorded")
        return Outcome(finish.status, finish.retry_in_s is not None, self.next_run_at(firing.name))

    async def succeed(self, firing: Firing, output: dict[str, Any] | None = None) -> Outcome:
        """Record a successful run of ``firing``."""
        return await self.record(firing, _made(True, "", output))

    async def fail(self, firing: Firing, reason: str = "failed") -> Outcome:
        """Record a failed run of ``firing`` (``reason`` is its error)."""
        return await self.record(firing, _made(False, reason, None))

    async def run(
        self, firing: Firing, handler: Handler, *, timeout_s: float | None = None
    ) -> Outcome:
        """Run ``firing`` with ``handler`` as the daemon would (``run_handler``, with the job's
        payload and its context: JOB, ATTEMPT, SCHEDULED_FOR) and record its result."""
        request = run_request(firing.claimed)
        result = await run_handler(
            handler,
            task=request.task,
            payload=request.payload,
            timeout_s=timeout_s,
            trigger=request.trigger,
            job=request.job,
            attempt=request.attempt,
            scheduled_for=request.scheduled_for,
        )
        return await self.record(firing, result)


def _made(ok: bool, reason: str, output: dict[str, Any] | None) -> HandlerResult:
    return HandlerResult(
        run_id="",
        ok=ok,
        reason=reason,
        output=output,
        duration_ms=1,
        timed_out=False,
        cancelled=False,
    )
