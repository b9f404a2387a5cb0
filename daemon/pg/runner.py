"""The Postgres runner: claims due jobs, submits them to the run queue, records their results.

One ``run(stopping)`` owns every task it starts: the claim loop, the LISTEN loop, the lease
heartbeat, the result writer, the pruner and the dependency waiters. It wakes on NOTIFY, on a
timer set to the earliest due time (on the database clock) and, as a fallback only, every
poll interval. The database going away never ends it: each loop retries with backoff, and
results wait in the writer until they can be written.

``scheduler.paused`` and ``scheduler.enabled`` = false both stop claiming (claimed runs still
finish and are recorded). ``scheduler.interval_seconds``, when set, replaces POLL_INTERVAL.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

import structlog

from daemon.core.runqueue import (
    REASON_SHUTDOWN_CANCEL,
    Rejected,
    Run,
    RunQueue,
    RunRequest,
    RunResult,
)
from daemon.observe.logs import log_enabled
from daemon.pg.deps import DependencyWaiter
from daemon.pg.plan import plan_claim, plan_finish
from daemon.pg.store.base import (
    Claimed,
    ClaimIncomplete,
    ClaimPlan,
    DueJob,
    JobStore,
    Release,
    SchedulerFlags,
    StoreSchemaMissing,
    StoreUnavailable,
    Subscription,
    WriteBatch,
    WriteOutcome,
)
from daemon.pg.writer import Backoff, DbHealth, ResultWriter, first_of, wait_event
from daemon.settings import Settings

log = structlog.get_logger("runbroker.pgrunner")

PING_S = 10.0  # the LISTEN connection (and the schema's version) is checked this often
SCHEMA_RECHECK_S = 1.0  # ... and the schema this often while it does not fit
FULL_QUEUE_RECHECK_S = 1.0
BUSY_RECHECK_S = 0.02  # due rows exist but another replica holds them
PRUNE_EVERY_S = 3600.0
REASON_LEASE_LOST = "cancelled: lease lost to another replica"
UNUSABLE_REPORT_S = 3600.0  # a job row found unusable is reported this long after last seen


@dataclass(slots=True)
class Held:
    """A run this replica has claimed and not yet recorded."""

    claimed: Claimed
    run: Run | None = None
    waiter: asyncio.Task[None] | None = None
    lost: bool = False
    settled: bool = False  # its finish or release is handed to the writer


def new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def utc_from_epoch(epoch_s: float | None) -> datetime | None:
    return None if epoch_s is None else datetime.fromtimestamp(epoch_s, UTC)


class PgRunner:
    def __init__(
        self,
        *,
        store: JobStore,
        queue: RunQueue,
        settings: Settings,
        known_tasks: Iterable[str],
        owner: str | None = None,
        dependency_wait_s: float = 60.0,
    ) -> None:
        self.store = store
        self.queue = queue
        self.settings = settings
        self.known_tasks = frozenset(known_tasks)
        self.owner = owner or new_owner()
        # Bound once: a per-job log call then costs no logger set-up (configure logs first).
        self.log = log.bind()
        self.health = DbHealth()
        self.flags = SchedulerFlags()
        self.listening = False  # LISTEN is up: NOTIFY wakes this runner
        self.held: dict[int, Held] = {}  # by run id
        self.writer = ResultWriter(store, self.owner, self.health, self._written)
        self.deps = DependencyWaiter(store, self.health, dependency_wait_s)
        self._wake = asyncio.Event()
        self._closing = asyncio.Event()
        self._reserved = 0  # queue room promised to claims in flight
        self._busy = False  # the last claim took a full batch: more is likely due now
        self._backlog = asyncio.Event()  # set with _busy: the helper claimer joins in
        self._group: asyncio.TaskGroup | None = None
        self._settled = asyncio.Event()  # a record was written (the drain waits on it)
        self._want_room = False  # the last claim was cut short by the queue's room
        self._log_claims = self._log_finishes = True  # per-run lines wanted (set per claim)
        self.claims_total = 0
        self.lease_reclaims_total = 0
        # the last first attempt's start (epoch seconds) and occurrence: schedule_lag_s
        self._last_first_start: tuple[float, datetime] | None = None
        self.unhealthy_after_s = max(5.0, 2 * settings.lease_s)
        # job id -> (name, why, when last seen): rows that could not be run as written
        self.unusable: dict[int, tuple[str, str, float]] = {}
        self._claim_failing: tuple[float, str] | None = None  # since (monotonic), why
        queue.on_finish(self._room_freed)

    # -- observability ----------------------------------------------------------------------
    @property
    def schedule_lag_s(self) -> float:
        """How late the last first attempt started (computed when asked, not per run)."""
        if self._last_first_start is None:
            return 0.0
        started, scheduled_for = self._last_first_start
        return max(0.0, started - scheduled_for.timestamp())

    def status(self) -> dict[str, object]:
        """The ``database`` part of ``status``: connection, flags, what this replica holds."""
        down_since = self.health.down_since
        return {
            "up": self.health.up,
            "down_for_s": None if down_since is None else round(time.monotonic() - down_since, 1),
            "listening": self.listening,
            "owner": self.owner,
            "claiming": self.flags.claiming,
            "paused": self.flags.paused,
            "enabled": self.flags.enabled,
            "held_runs": len(self.held),
            "unwritten_results": len(self.writer),
            "claims_total": self.claims_total,
            "lease_reclaims_total": self.lease_reclaims_total,
            "schedule_lag_s": round(self.schedule_lag_s, 3),
            "unusable_jobs": [
                {"job": name, "error": why} for name, why in self._unusable_now().values()
            ],
        }

    def health_problem(self) -> str | None:
        """Unhealthy once the database has been unreachable longer than the threshold
        (twice the lease, at least 5 s): by then other replicas have taken our leases."""
        down_since = self.health.down_since
        now = time.monotonic()
        if self.health.schema_problem is not None:
            return f"database {self.health.schema_problem}"
        if down_since is not None:
            down_s = now - down_since
            if down_s > self.unhealthy_after_s:
                return f"database unreachable for {down_s:.0f}s"
        if self._claim_failing is not None:
            since, why = self._claim_failing
            if now - since > self.unhealthy_after_s:
                return f"database jobs: every claim fails for {now - since:.0f}s: {why}"
        return None

    def _unusable_now(self) -> dict[int, tuple[str, str]]:
        cutoff = time.monotonic() - UNUSABLE_REPORT_S
        for job_id in [j for j, (_n, _w, seen) in self.unusable.items() if seen < cutoff]:
            del self.unusable[job_id]
        return {job_id: (name, why) for job_id, (name, why, _seen) in self.unusable.items()}

    def health_warnings(self) -> list[str]:
        """Job rows this runner could not use (seen within the last hour, and not run fine
        since): each failed or was disabled on its own while every other job went on. Not
        a reason to restart the daemon, which could not fix a row: said, not unhealthy."""
        return [
            f"database job {name!r} cannot run: {why}"
            for name, why in self._unusable_now().values()
        ]

    def _found_unusable(self, job: DueJob, why: str) -> None:
        if job.id not in self.unusable:
            self.log.warning("job.unusable", job=job.name, error=why)
        self.unusable[job.id] = (job.name, why, time.monotonic())

    def metrics_snapshot(self) -> dict[str, float]:
        return {
            "db_up": 1.0 if self.health.up else 0.0,
            "claims_total": float(self.claims_total),
            "lease_reclaims_total": float(self.lease_reclaims_total),
            "schedule_lag_seconds": self.schedule_lag_s,
        }

    # -- lifecycle --------------------------------------------------------------------------
    async def run(self, stopping: asyncio.Event) -> None:
        log.info("pgrunner.started", owner=self.owner, tasks=sorted(self.known_tasks))
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                loops = [
                    group.create_task(self.writer.run(self._closing)),
                    group.create_task(self._listen_loop()),
                    group.create_task(self._heartbeat_loop()),
                    group.create_task(self._prune_loop()),
                ]
                helper = group.create_task(self._help_loop(stopping))
                await self._claim_loop(stopping)
                await helper
                await self._drain()
                for task in loops:  # whatever is still trying past the deadline is cut off
                    task.cancel()
        finally:
            self._closing.set()
            self._group = None
            await self.store.close()
        log.info("pgrunner.stopped", owner=self.owner, unrecorded=len(self.held))

    async def _drain(self) -> None:
        """At stop: release what has not started, wait for what runs, flush the records."""
        for held in list(self.held.values()):
            if held.settled:
                continue
            if held.run is None:
                if held.waiter is not None:
                    held.waiter.cancel()
                self._release(held)
            elif held.run.state == "queued":
                self.queue.cancel_waiting(held.run.id, REASON_SHUTDOWN_CANCEL)
        deadline = time.monotonic() + self.settings.shutdown_timeout_s
        while self.held and time.monotonic() < deadline:
            self._settled.clear()
            await wait_event(self._settled, min(0.5, deadline - time.monotonic()))
        self._closing.set()
        await self.writer.wait_idle(max(0.0, deadline - time.monotonic()))

    # -- claiming ---------------------------------------------------------------------------
    @property
    def _misfire_grace_s(self) -> float:
        """How late a misfire = skip occurrence may still start: one lease."""
        return self.settings.lease_s

    def _poll_s(self) -> float:
        return self.flags.interval_s or self.settings.poll_interval_s

    def _plan(
        self, abandoned: list[tuple[DueJob, ClaimPlan]], job: DueJob, now: datetime
    ) -> ClaimPlan:
        plan = plan_claim(
            job,
            now,
            default_max_attempts=self.settings.retry_attempts,
            misfire_grace_s=self._misfire_grace_s,
        )
        if plan.abandon_error is not None:
            abandoned.append((job, plan))
        if not plan.enabled:  # the planner disabled a job it cannot schedule
            self._found_unusable(job, plan.last_error or "cannot be scheduled")
        return plan

    async def _claim_loop(self, stopping: asyncio.Event) -> None:
        """Claim until ``stopping``; the only loop that waits on (and clears) ``_wake``."""
        backoff = Backoff()
        while not stopping.is_set():
            self._wake.clear()
            delay_s = await self._claim_guarded(backoff)
            if delay_s > 0:
                await first_of(self._wake.wait(), stopping.wait(), timeout_s=delay_s)

    async def _help_loop(self, stopping: asyncio.Event) -> None:
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
            if self._claim_failing is None:
                self._claim_failing = (time.monotonic(), f"{type(exc).__name__}: {exc}"[:200])
            return backoff.next_s()
        backoff.reset()
        self._claim_failing = None
        self.health.ok()
        return delay_s

    def _claim_threshold(self) -> int:
        """Claim in batches: wait for this much room unless the queue has run dry."""
        return max(1, min(self.settings.batch_size, self.queue.capacity) // 2)

    def _room_freed(self, _run: Run) -> None:
        if self._want_room and (self.queue.room() >= self._claim_threshold() or self._queue_dry()):
            self._want_room = False
            self._wake.set()

    def _queue_dry(self) -> bool:
        return self.queue.waiting_count() == 0

    async def _claim_once(self) -> float:
        """Claim what is due and there is room for; returns how long to wait before the next.

        It claims first (the claim's SQL honours scheduler.paused and scheduler.enabled) and
        looks at the flags and the next due time only when the batch was not full.
        """
        room = min(self.settings.batch_size, self.queue.room() - self._reserved)
        if room < self._claim_threshold() and not (room > 0 and self._queue_dry()):
            self._want_room = True
            return min(self._poll_s(), FULL_QUEUE_RECHECK_S)
        abandoned: list[tuple[DueJob, ClaimPlan]] = []
        failure: BaseException | None = None
        self._reserved += room
        try:
            claimed = await self.store.claim(
                self.owner,
                room,
                self.settings.lease_s,
                partial(self._plan, abandoned),
                misfire_grace_s=self._misfire_grace_s,
            )
        except ClaimIncomplete as incomplete:  # start what was claimed, then report the error
            claimed, failure = incomplete.claimed, incomplete.__cause__ or incomplete
        finally:
            self._reserved -= room
        self.claims_total += len(claimed)
        self.lease_reclaims_total += len(abandoned)
        self._busy = len(claimed) == room
        if self._busy:
            self._backlog.set()
        for job, plan in abandoned:
            self.log.warning(
                "job.abandoned",
                job=job.name,
                previous_owner=job.lease_owner,
                attempt=job.attempt,
                retried=plan.run,
            )
        self._log_claims = log_enabled(logging.DEBUG)
        self._log_finishes = log_enabled(logging.INFO)
        for item in claimed:
            self._start(item)
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

    def _start(self, claimed: Claimed) -> None:
        job = claimed.job
        held = Held(claimed)
        self.held[claimed.run_id] = held
        if self._log_claims:
            self.log.debug(
                "job.claimed",
                job=job.name,
                job_run_id=claimed.run_id,
                attempt=claimed.attempt,
                scheduled_for=claimed.scheduled_for,
            )
        if job.unusable is not None:
            self._found_unusable(job, job.unusable)
            error = f"job row unusable: {job.unusable}"
            self._finish(held, RunResult(ok=False, reason=error), retryable=False)
        elif job.task not in self.known_tasks:
            defined = ", ".join(sorted(self.known_tasks)) or "none"
            error = f"unknown task {job.task!r}: this container defines {defined}"
            self._found_unusable(job, error)
            self._finish(held, RunResult(ok=False, reason=error), retryable=False)
        elif job.depends_on and self._group is not None:
            held.waiter = self._group.create_task(self._after_dependencies(held))
        else:
            self._submit(held)
        if self.unusable and job.unusable is None and job.task in self.known_tasks:
            self.unusable.pop(job.id, None)  # fixed: it runs again

    async def _after_dependencies(self, held: Held) -> None:
        claimed = held.claimed
        try:
            error = await self.deps.wait(claimed.job.depends_on, claimed.scheduled_for)
        except asyncio.CancelledError:
            return  # released by _drain or the heartbeat
        held.waiter = None
        if held.lost:
            self._release(held)
        elif error is not None:
            self.log.info("job.dependency_failed", job=claimed.job.name, error=error)
            self._finish(held, RunResult(ok=False, reason=error), retryable=False)
        else:
            self._submit(held)

    def _submit(self, held: Held) -> None:
        claimed = held.claimed
        request = RunRequest(
            task=claimed.job.task,
            trigger="schedule",
            payload=claimed.job.payload,
            job=claimed.job.name,
            attempt=claimed.attempt,
            scheduled_for=claimed.scheduled_for,
        )
        try:
            held.run = self.queue.submit(request, watcher=partial(self._on_run, held))
        except Rejected as exc:
            self.log.info("job.released", job=claimed.job.name, reason=exc.reason)
            self._release(held)

    # -- results ------------------------------------------------------------------------------
    def _on_run(self, held: Held, run: Run, kind: str) -> None:
        if kind == "started":
            started = run.started_at if run.started_at is not None else time.time()
            if held.claimed.attempt == 1:  # retries start late on purpose
                self._last_first_start = (started, held.claimed.scheduled_for)
            self.writer.start(held.claimed.run_id, started)
        elif kind == "done" and run.result is not None:
            result = run.result
            if result.cancelled_by_request:
                # `runbroker cancel`, queued or running: recorded, not retried; the job goes
                # on to its next occurrence (a one-shot is finished)
                self._finish(held, result, retryable=False)
            elif result.cancelled and run.started_at is None:
                self._release(held)  # shutdown or a lost lease: another claim runs it
            else:
                self._finish(held, result)

    def _finish(self, held: Held, result: RunResult, *, retryable: bool = True) -> None:
        claimed, run = held.claimed, held.run
        started_at = utc_from_epoch(run.started_at if run is not None else None)
        output = result.output
        if output is not None:
            try:
                json.dumps(output)
            except (TypeError, ValueError):
                self.log.warning("job.output_dropped", job=claimed.job.name, reason="not JSON")
                output = None
        finish = plan_finish(
            claimed,
            ok=result.ok,
            cancelled=result.cancelled,
            error=result.reason,
            output=output,
            started_at=started_at,
            finished_at=datetime.now(UTC),
            default_max_attempts=self.settings.retry_attempts,
            backoff_base_s=self.settings.retry_backoff_s,
            retryable=retryable,
        )
        if self._log_finishes:
            # job_run_id: the job_runs row's id; run_id: the broker's run, as in run.* events
            # (none when the run never reached the queue: an unusable row, a dependency failed)
            broker_run = {} if run is None else {"run_id": run.id}
            self.log.info(
                "job.finished",
                job=claimed.job.name,
                job_run_id=claimed.run_id,
                **broker_run,
                status=finish.status,
                attempt=claimed.attempt,
                duration_ms=result.duration_ms,
                retry_in_s=None if finish.retry_in_s is None else round(finish.retry_in_s, 3),
            )
        held.settled = True
        self.writer.finish(finish)

    def _release(self, held: Held) -> None:
        if not held.settled:
            held.settled = True
            self.writer.release(Release(held.claimed.job.id, held.claimed.run_id))

    def _written(self, batch: WriteBatch, outcome: WriteOutcome) -> None:
        held_runs, lost = self.held, outcome.lost_run_ids
        for records in (batch.finishes, batch.releases):
            for record in records:
                held = held_runs.pop(record.run_id, None)
                if lost and held is not None and record.run_id in lost:
                    self.log.warning(
                        "job.lease_lost", job=held.claimed.job.name, job_run_id=record.run_id
                    )
        self._settled.set()

    # -- background loops -------------------------------------------------------------------
    def _notified(self, payload: str) -> None:
        self._wake.set()
        if payload != "settings":
            self.deps.changed()

    async def _listen_loop(self) -> None:
        backoff = Backoff()
        while not self._closing.is_set():
            try:
                subscription: Subscription = await self.store.listen(self._notified)
            except (StoreUnavailable, StoreSchemaMissing) as exc:
                self.health.failed("listen", exc)
                await wait_event(self._closing, backoff.next_s())
                continue
            except Exception:  # never let the daemon die of the database
                log.exception("pgrunner.error", where="listen")
                await wait_event(self._closing, backoff.next_s())
                continue
            backoff.reset()
            self.health.ok()
            self.listening = True
            self.writer.nudge()
            self._notified("listen")  # anything may have happened while we were not listening
            try:
                await self._check_schema()
                while not subscription.lost and not self._closing.is_set():
                    every_s = PING_S if self.health.schema_problem is None else SCHEMA_RECHECK_S
                    lost, closing = subscription.wait_lost(), self._closing.wait()
                    await first_of(lost, closing, timeout_s=every_s)
                    if not subscription.lost and not self._closing.is_set():
                        await subscription.ping()
                        await self._check_schema()  # sees a `runbroker migrate` meanwhile
                if subscription.lost:
                    self.health.failed("listen", StoreUnavailable("LISTEN connection lost"))
            except StoreUnavailable as exc:
                self.health.failed("listen", exc)
            except Exception:
                log.exception("pgrunner.error", where="listen")
            finally:
                self.listening = False
                await subscription.close()

    async def _check_schema(self) -> None:
        """Look at the schema's version; connection trouble is the LISTEN loop's to handle,
        anything else is logged and leaves the last verdict (never a reconnect loop)."""
        try:
            problem = await self.store.schema_problem()
        except StoreUnavailable:
            raise
        except Exception:
            log.exception("pgrunner.error", where="schema")
            return
        self.health.schema_checked(problem)

    async def _heartbeat_loop(self) -> None:
        every_s = self.settings.lease_s / 3
        while not await wait_event(self._closing, every_s if self.health.up else 1.0):
            job_ids = {h.claimed.job.id for h in self.held.values()}
            if not job_ids:
                continue
            try:
                kept = await self.store.heartbeat(
                    self.owner, sorted(job_ids), self.settings.lease_s
                )
            except (StoreUnavailable, StoreSchemaMissing) as exc:
                self.health.failed("heartbeat", exc)
                continue
            except Exception:
                log.exception("pgrunner.error", where="heartbeat")
                continue
            self.health.ok()
            for held in list(self.held.values()):
                if held.claimed.job.id not in kept and not held.lost:
                    self._lease_lost(held)

    def _lease_lost(self, held: Held) -> None:
        held.lost = True
        self.log.warning(
            "job.lease_lost", job=held.claimed.job.name, job_run_id=held.claimed.run_id
        )
        if held.waiter is not None:
            held.waiter.cancel()
            self.held.pop(held.claimed.run_id, None)
        elif held.run is not None and held.run.state == "queued":
            self.queue.cancel_waiting(held.run.id, REASON_LEASE_LOST)

    async def _prune_loop(self) -> None:
        every_s = min(PRUNE_EVERY_S, self.settings.run_retention_s / 4)
        while not await wait_event(self._closing, every_s):
            try:
                pruned = await self.store.prune(self.settings.run_retention_s)
            except (StoreUnavailable, StoreSchemaMissing) as exc:
                self.health.failed("prune", exc)
                continue
            except Exception:
                log.exception("pgrunner.error", where="prune")
                continue
            if pruned:
                log.info("runs.pruned", runs=pruned)
