"""The held-run lifecycle: from a claim to its record.

A claimed run is held by this replica until its record is written, so that a run whose lease
is lost can be stopped at whatever stage it is in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from daemon.core.runqueue import Rejected, Run, RunQueue, RunResult
from daemon.log.logs import get_logger, log_enabled
from daemon.pg.bridge import finish_record, run_request
from daemon.pg.deps import DependencyWaiter
from daemon.pg.fence import FENCE_WHY, LEASE_LOST_WHY, LeaseFence
from daemon.pg.health import LOGGER_NAME
from daemon.pg.replica import Replica
from daemon.pg.store.base import Claimed, Release, Renewal, WriteBatch, WriteOutcome
from daemon.pg.unusable import UnusableJobs
from daemon.pg.writer import ResultWriter
from daemon.wire.reasons import REASON_FENCED, unknown_task_reason

log = get_logger(LOGGER_NAME)


@dataclass(slots=True)
class Held:
    """A run this replica has claimed and not yet recorded."""

    claimed: Claimed
    run: Run | None = None
    waiter: asyncio.Task[None] | None = None
    lost: bool = False
    settled: bool = False  # its finish or release is handed to the writer
    fenced: bool = False  # told to stop: its lease could not be renewed in time


class HeldRuns:
    """Every run this replica holds, by run id, and the writer of their records."""

    def __init__(
        self,
        replica: Replica,
        *,
        queue: RunQueue,
        known_tasks: Collection[str],
        deps: DependencyWaiter,
        unusable: UnusableJobs,
        cancel_running: Callable[[str, str], str] | None = None,
        fence_grace_s: float = 0.0,
    ) -> None:
        self.queue = queue
        self.cancel_running = cancel_running  # (run id, reason): the executor's cancel
        self.fence = LeaseFence(replica.settings.lease_s, fence_grace_s, self._fenced)
        self.settings = replica.settings
        self.known_tasks = known_tasks  # live: the shared registry
        self.deps = deps
        self.unusable = unusable
        # Bound once: a per-job log call then costs no logger set-up (configure logs first).
        self.log = log.bind()
        self.held: dict[int, Held] = {}  # by run id
        self.writer = ResultWriter(replica.store, replica.owner, replica.health, self._written)
        self.group: asyncio.TaskGroup | None = None  # the runner's, while it runs
        self.settled = asyncio.Event()  # a record was written (the drain waits on it)
        self._on_deps: set[int] = set()  # run ids whose dependency wait is under way
        self._log_claims = self._log_finishes = True  # per-run lines wanted (set per claim)
        self._last_first_start: tuple[float, datetime] | None = None  # (epoch s, occurrence)

    @property
    def schedule_lag_s(self) -> float:
        """How late the last first attempt started (computed when asked, not per run)."""
        if self._last_first_start is None:
            return 0.0
        started, scheduled_for = self._last_first_start
        return max(0.0, started - scheduled_for.timestamp())

    def check_log_levels(self) -> None:
        """Once per claim: whether the per-run lines would be written at all."""
        self._log_claims = log_enabled(logging.DEBUG)
        self._log_finishes = log_enabled(logging.INFO)

    def start(self, claimed: Claimed, sent_at: float) -> None:
        """``claimed`` came from a claim statement sent at ``sent_at`` (``fence.now()``)."""
        job = claimed.job
        held = Held(claimed)
        self.held[claimed.run_id] = held
        self.fence.renewed(claimed.run_id, held, sent_at)
        if self._log_claims:
            self.log.debug(
                "job.claimed",
                job=job.name,
                job_run_id=claimed.run_id,
                attempt=claimed.attempt,
                scheduled_for=claimed.scheduled_for,
            )
        if job.unusable is not None:
            self.unusable.found(job, job.unusable)
            error = f"job row unusable: {job.unusable}"
            self._finish(held, RunResult(ok=False, reason=error), retryable=False)
        elif job.task not in self.known_tasks:
            defined = ", ".join(sorted(self.known_tasks)) or "none"
            error = unknown_task_reason(repr(job.task), defined)
            self.unusable.found(job, error)
            self._finish(held, RunResult(ok=False, reason=error), retryable=False)
        elif job.depends_on and self.group is not None:
            held.waiter = self.group.create_task(self._after_dependencies(held))
            self._on_deps.add(claimed.run_id)
            held.waiter.add_done_callback(lambda _waiter: self._on_deps.discard(claimed.run_id))
        else:
            self._submit(held)
        if self.unusable.jobs and job.unusable is None and job.task in self.known_tasks:
            self.unusable.fixed(job.id)  # it runs again

    @property
    def waiting_on_deps(self) -> int:
        """Runs ahead of a new claim that wait for their dependencies (kept as a set, so that
        the claimer's room is not a walk over every held run per finish)."""
        return len(self._on_deps)

    async def _after_dependencies(self, held: Held) -> None:
        claimed = held.claimed
        try:
            error = await self.deps.wait(claimed.job.depends_on, claimed.scheduled_for)
        except asyncio.CancelledError:
            return  # released by the drain or the heartbeat
        held.waiter = None
        self._on_deps.discard(claimed.run_id)  # in the step that submits it, not a turn later
        if held.lost:
            self.release(held)
        elif error is not None:
            self.log.info("job.dependency_failed", job=claimed.job.name, error=error)
            self._finish(held, RunResult(ok=False, reason=error), retryable=False)
        else:
            self._submit(held)

    def _submit(self, held: Held) -> None:
        request = run_request(held.claimed)
        try:
            held.run = self.queue.submit(request, watcher=partial(self._on_run, held))
            self.fence.submitted(held.claimed.run_id, held.run.id)
        except Rejected as exc:
            self.log.info("job.released", job=held.claimed.job.name, reason=exc.reason)
            self.release(held)

    def _on_run(self, held: Held, run: Run, kind: str) -> None:
        if kind == "started":
            started = run.started_at if run.started_at is not None else time.time()
            if held.claimed.attempt == 1:  # retries start late on purpose
                self._last_first_start = (started, held.claimed.scheduled_for)
            self.writer.start(held.claimed.run_id, started)
        elif kind == "done" and run.result is not None:
            result = run.result
            if result.cancelled_by_request:
                # `runbroker cancel`, queued or running: recorded, not retried. The job goes
                # on to its next occurrence (a one-shot is finished)
                self._finish(held, result, retryable=False)
            elif result.cancelled and run.started_at is None:
                self.release(held)  # shutdown or a lost lease: another claim runs it
            elif run.started_at is None:
                # Refused by the executor (a reload removed the task or now refuses the args):
                # as an unknown task at the claim, failed with the reason and not retried.
                self.unusable.found(held.claimed.job, result.reason)
                self._finish(held, result, retryable=False)
            else:
                self._finish(held, result)

    def _finish(self, held: Held, result: RunResult, *, retryable: bool = True) -> None:
        claimed, run = held.claimed, held.run
        finish = finish_record(claimed, run, result, self.settings, retryable=retryable)
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
        self.fence.settled(claimed.run_id)
        self.writer.finish(finish)

    def release(self, held: Held) -> None:
        if not held.settled:
            held.settled = True
            self.fence.settled(held.claimed.run_id)
            self.writer.release(Release(held.claimed.job.id, held.claimed.run_id))

    def answered(self, sent: list[Held], renewal: Renewal, sent_at: float) -> None:
        """A heartbeat sent at ``sent_at`` for the runs ``sent`` was answered: the fences of
        those it renewed move on, and those it did not renew are stopped as lost.

        Only ``sent`` is judged: a run claimed while the heartbeat was on its way is not in its
        answer, yet holds the lease its claim granted. A settled run is left to its record,
        whose write is guarded by the lease and says itself whether the lease held."""
        for held in sent:
            run_id, job_id = held.claimed.run_id, held.claimed.job.id
            if held.settled or self.held.get(run_id) is not held:
                continue
            if job_id in renewal.kept:
                if not held.fenced:
                    self.fence.renewed(run_id, held, sent_at)
            elif not held.lost:
                self.lease_lost(held, removed=job_id in renewal.gone)

    def _fenced(self, held: Held) -> None:
        """The lease could not be renewed in time: stop the run before the lease ends."""
        if held.settled or held.lost:
            return
        held.fenced = True
        claimed, run = held.claimed, held.run
        self.log.warning(
            "job.fenced",
            job=claimed.job.name,
            job_run_id=claimed.run_id,
            run_id=None if run is None else run.id,
            state="waiting" if run is None else run.state,
            lease_s=self.settings.lease_s,
            reason=FENCE_WHY,
        )
        self._stop(held, REASON_FENCED, release=True)

    def _written(self, batch: WriteBatch, outcome: WriteOutcome) -> None:
        held_runs, lost = self.held, outcome.lost_run_ids
        for records in (batch.finishes, batch.releases):
            for record in records:
                held = held_runs.pop(record.run_id, None)
                if lost and held is not None and record.run_id in lost and not held.lost:
                    self.log.warning(
                        "job.lease_lost", job=held.claimed.job.name, job_run_id=record.run_id
                    )
        self.settled.set()

    def lease_lost(self, held: Held, *, removed: bool = False) -> None:
        """The heartbeat found the lease another replica's, or the job ``removed``: stop the
        run wherever it is. Logged once, here (its record then finds no lease: not again)."""
        held.lost = True
        event, reason = LEASE_LOST_WHY[removed]
        self.log.warning(event, job=held.claimed.job.name, job_run_id=held.claimed.run_id)
        self._stop(held, reason, release=False)

    def _stop(self, held: Held, reason: str, *, release: bool) -> None:
        """Stop ``held``'s dependency wait (``release`` it, or drop it), queued run or process."""
        self.fence.forget(held.claimed.run_id)
        run = held.run
        if run is None:
            if held.waiter is not None:
                held.waiter.cancel()
            if release:
                self.release(held)
            else:
                self.held.pop(held.claimed.run_id, None)
        elif run.state == "queued":
            self.queue.cancel_waiting(run.id, reason)
        elif run.state == "running" and self.cancel_running is not None:
            self.cancel_running(run.id, reason)
