"""The claimer: claims due jobs in batches, as the run queue has room and as many as this
replica can start soon (``horizon``).

What it cannot start soon is left to the other replicas. While a backlog keeps claims full, a
second claimer joins in.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from functools import partial

from daemon.core.runqueue import Run, RunQueue
from daemon.log.logs import get_logger
from daemon.pg.health import LOGGER_NAME, Backoff
from daemon.pg.held import HeldRuns
from daemon.pg.horizon import RunHorizon
from daemon.pg.plan import plan_claim
from daemon.pg.replica import Replica
from daemon.pg.store.base import (
    ClaimIncomplete,
    ClaimPlan,
    DueJob,
    SchedulerFlags,
    StoreSchemaMissing,
    StoreUnavailable,
)
from daemon.pg.unusable import UnusableJobs
from daemon.pg.waits import first_of

FULL_QUEUE_RECHECK_S = 1.0
BUSY_RECHECK_S = 0.02  # due rows exist but another replica holds them

log = get_logger(LOGGER_NAME)


class Claimer:
    def __init__(
        self,
        replica: Replica,
        *,
        queue: RunQueue,
        runs: HeldRuns,
        unusable: UnusableJobs,
        wake: asyncio.Event,
    ) -> None:
        self.store, self.settings = replica.store, replica.settings
        self.owner, self.health = replica.owner, replica.health
        self.queue = queue
        self.runs = runs
        self.unusable = unusable
        self.log = log.bind()  # bound once, as HeldRuns's
        self.wake = wake  # set: claim now (only the claim loop waits on it and clears it)
        self.flags = SchedulerFlags()
        self.claims_total = 0
        self.lease_reclaims_total = 0
        # Occurrences claims passed over, by what became of them.
        self.passed_over_total = {"missed": 0, "coalesced": 0}
        self.claim_failing: tuple[float, str] | None = None  # since (monotonic), why
        self._reserved = 0  # queue room promised to claims in flight
        self._busy = False  # the last claim took a full batch: more is likely due now
        self._backlog = asyncio.Event()  # set with _busy: the helper claimer joins in
        self._want_room = False  # the last claim was cut short by the queue's room
        self.horizon = RunHorizon()
        queue.on_finish(self._room_freed)

    @property
    def _misfire_grace_s(self) -> float:
        """How late a misfire = skip occurrence may still start: one lease."""
        return self.settings.lease_s

    def _poll_s(self) -> float:
        return self.flags.interval_s or self.settings.poll_interval_s

    def _plan(
        self, decided: list[tuple[DueJob, ClaimPlan]], job: DueJob, now: datetime
    ) -> ClaimPlan:
        plan = plan_claim(
            job,
            now,
            default_max_attempts=self.settings.retry_attempts,
            misfire_grace_s=self._misfire_grace_s,
        )
        if plan.abandon_error is not None or plan.passed_over is not None:
            decided.append((job, plan))  # said once the claim has committed
        if not plan.enabled:  # the planner disabled a job it cannot schedule
            self.unusable.found(job, plan.last_error or "cannot be scheduled")
        elif plan.unusable is not None:  # rescheduled rather than run as written
            self.unusable.found(job, plan.unusable)
        return plan

    def _say(self, job: DueJob, plan: ClaimPlan) -> None:
        """Log and count what a committed claim did beyond a plain run: an expired lease taken
        over, occurrences passed over (missed by misfire = skip, or coalesced into one run)."""
        if plan.abandon_error is not None:
            self.lease_reclaims_total += 1
            self.log.warning(
                "job.abandoned",
                job=job.name,
                previous_owner=job.lease_owner,
                attempt=job.attempt,
                retried=plan.run,
            )
        passed = plan.passed_over
        if passed is None:
            return
        self.passed_over_total[passed.status] += passed.count
        fields = {"job": job.name, "occurrences": passed.count, "note": passed.note}
        if passed.status == "missed":
            self.log.warning("job.missed", **fields)
        else:
            self.log.info("job.coalesced", run_for=plan.scheduled_for, **fields)

    async def claim_loop(self, stopping: asyncio.Event) -> None:
        """Claim until ``stopping``. The only loop that waits on ``wake`` and clears it."""
        backoff = Backoff()
        while not stopping.is_set():
            self.wake.clear()
            delay_s = await self._claim_guarded(backoff)
            if delay_s > 0:
                await first_of(self.wake.wait(), stopping.wait(), timeout_s=delay_s)

    async def help_loop(self, stopping: asyncio.Event) -> None:
        """A second claimer, only while a backlog keeps claims full: its round trips then
        overlap the first one's work."""
        backoff = Backoff()
        while not stopping.is_set():
            if not self._busy:
                self._backlog.clear()
                await first_of(self._backlog.wait(), stopping.wait())
                continue
            delay_s = await self._claim_guarded(backoff)
            if delay_s > 0:
                await first_of(stopping.wait(), timeout_s=delay_s)

    async def _claim_guarded(self, backoff: Backoff) -> float:
        try:
            delay_s = await self._claim_once()
        except (StoreUnavailable, StoreSchemaMissing) as exc:
            self.health.failed("claim", exc)
            return backoff.next_s()
        except Exception as exc:
            log.exception("pgrunner.error", where="claim")
            if self.claim_failing is None:
                self.claim_failing = (time.monotonic(), f"{type(exc).__name__}: {exc}"[:200])
            return backoff.next_s()
        backoff.reset()
        self.claim_failing = None
        self.health.ok()
        return delay_s

    def _claim_threshold(self) -> int:
        """Claim in batches: wait for this much room unless the queue has run dry."""
        window = self.horizon.window(self.settings.batch_size)
        return max(1, min(self.settings.batch_size, self.queue.capacity, window) // 2)

    def _room(self) -> int:
        """How many runs a claim may take now: the queue's room, and what this replica can
        start within the horizon less the runs it has ahead of them (running, queued, waiting
        for their dependencies)."""
        queue = self.queue
        ahead = queue.waiting_count() + (queue.current is not None) + self.runs.waiting_on_deps
        window = self.horizon.window(self.settings.batch_size) - ahead
        return min(self.settings.batch_size, queue.room(), window) - self._reserved

    def _room_freed(self, run: Run) -> None:
        if run.request.job is not None and run.started_monotonic is not None:
            self.horizon.observe(run.elapsed_s())
        if self._want_room and (self._room() >= self._claim_threshold() or self._queue_dry()):
            self._want_room = False
            self.wake.set()

    def _queue_dry(self) -> bool:
        return self.queue.waiting_count() == 0

    async def _claim_once(self) -> float:
        """Claim what is due and there is room for, and return how long to wait before the next.

        It looks at the flags and the next due time only when the batch was not full, since the
        claim's SQL honours the flags itself."""
        room = self._room()
        if room < self._claim_threshold() and not (room > 0 and self._queue_dry()):
            self._want_room = True
            return min(self._poll_s(), FULL_QUEUE_RECHECK_S)
        decided: list[tuple[DueJob, ClaimPlan]] = []  # the planner's, worth a log line
        failure: BaseException | None = None
        self._reserved += room
        sent_at = self.runs.fence.now()  # the leases granted last at least LEASE from here
        try:
            claimed = await self.store.claim(
                self.owner,
                room,
                self.settings.lease_s,
                partial(self._plan, decided),
                misfire_grace_s=self._misfire_grace_s,
            )
        except ClaimIncomplete as incomplete:  # start what was claimed, then report the error
            claimed, failure = incomplete.claimed, incomplete.__cause__ or incomplete
            decided.clear()  # the planner's transaction failed: none of its decisions stand
        finally:
            self._reserved -= room
        self.claims_total += len(claimed)
        self._busy = len(claimed) == room
        if self._busy:
            self._backlog.set()
        for job, plan in decided:
            self._say(job, plan)
        self.runs.check_log_levels()
        for item in claimed:
            self.runs.start(item, sent_at)
        if failure is not None:
            raise failure
        if self._busy:
            return 0.0
        outlook = await self.store.outlook()
        self._set_flags(outlook.flags)
        if not self.flags.claiming or outlook.due_in_s is None:
            return self._poll_s()
        if outlook.due_in_s > 0:
            return min(self._poll_s(), outlook.due_in_s + 0.001)
        # Still due: more came, or the rows were locked by other replicas' claims.
        return 0.0 if claimed else BUSY_RECHECK_S

    def _set_flags(self, flags: SchedulerFlags) -> None:
        if flags.claiming != self.flags.claiming:
            event = "scheduler.resumed" if flags.claiming else "scheduler.paused"
            log.info(event, paused=flags.paused, enabled=flags.enabled)
        self.flags = flags
