"""The Postgres runner: claims due jobs, submits them to the run queue, records their results.

One ``run(stopping)`` owns every task it starts. The database going away never ends it: each
loop retries with backoff, and results wait in the writer until they can be written.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import time
from collections.abc import Callable, Collection

from daemon.core.runqueue import RunQueue
from daemon.log.logs import get_logger
from daemon.pg.claimer import Claimer
from daemon.pg.deps import DependencyWaiter
from daemon.pg.fence import Backstop
from daemon.pg.health import LOGGER_NAME, DbHealth
from daemon.pg.held import HeldRuns
from daemon.pg.loops import BackgroundLoops
from daemon.pg.replica import Replica
from daemon.pg.store.base import JobStore
from daemon.pg.unusable import UnusableJobs
from daemon.pg.waits import wait_event
from daemon.settings import Settings
from daemon.wire.control_shapes import DatabaseStatus
from daemon.wire.reasons import REASON_SHUTDOWN_CANCEL

log = get_logger(LOGGER_NAME)


def new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class PgRunner:
    def __init__(
        self,
        *,
        store: JobStore,
        queue: RunQueue,
        settings: Settings,
        known_tasks: Collection[str],
        owner: str | None = None,
        dependency_wait_s: float = 60.0,
        cancel_running: Callable[[str, str], str] | None = None,
        fence_grace_s: float = 0.0,
        backstop: Backstop | None = None,
    ) -> None:
        """``cancel_running(run_id, reason)`` stops a running run, for the lease fence.

        ``fence_grace_s`` is the longest grace such a run may take to stop. ``known_tasks`` is
        read at each claim, not copied, so a reload of the tasks is seen at once."""
        self.store = store
        self.known_tasks = known_tasks
        self.owner = owner or new_owner()
        self.health = DbHealth()
        self.unusable = UnusableJobs()
        self.unhealthy_after_s = max(5.0, 2 * settings.lease_s)
        self._wake = asyncio.Event()  # set: claim now (NOTIFY, queue room freed)
        self._closing = asyncio.Event()
        deps = DependencyWaiter(store, self.health, dependency_wait_s)
        replica = Replica(store, settings, self.owner, self.health)
        self.runs = HeldRuns(
            replica,
            queue=queue,
            known_tasks=self.known_tasks,
            deps=deps,
            unusable=self.unusable,
            cancel_running=cancel_running,
            fence_grace_s=fence_grace_s,
        )
        self.runs.fence.backstop = backstop  # the watchdog: it holds when this process stalls
        self.claimer = Claimer(
            replica, queue=queue, runs=self.runs, unusable=self.unusable, wake=self._wake
        )
        self.loops = BackgroundLoops(
            replica, runs=self.runs, deps=deps, wake=self._wake, closing=self._closing
        )

    async def run(self, stopping: asyncio.Event) -> None:
        log.info("pgrunner.started", owner=self.owner, tasks=sorted(self.known_tasks))
        try:
            async with asyncio.TaskGroup() as group:
                self.runs.group = group
                loops = [
                    group.create_task(self.runs.writer.run(self._closing)),
                    group.create_task(self.loops.listen_loop()),
                    group.create_task(self.loops.heartbeat_loop()),
                    group.create_task(self.loops.prune_loop()),
                ]
                helper = group.create_task(self.claimer.help_loop(stopping))
                await self.claimer.claim_loop(stopping)
                await helper
                await self._drain()
                for task in loops:  # whatever is still trying past the deadline is cut off
                    task.cancel()
        finally:
            self._closing.set()
            self.runs.fence.close()
            self.runs.group = None
            await self.store.close()
        log.info("pgrunner.stopped", owner=self.owner, unrecorded=len(self.runs.held))

    async def _drain(self) -> None:
        """At stop: release what has not started, wait for what runs, flush the records."""
        runs = self.runs
        for held in list(runs.held.values()):
            if held.settled:
                continue
            if held.run is None:
                if held.waiter is not None:
                    held.waiter.cancel()
                runs.release(held)
            elif held.run.state == "queued":
                runs.queue.cancel_waiting(held.run.id, REASON_SHUTDOWN_CANCEL)
        deadline = time.monotonic() + self.runs.settings.shutdown_timeout_s
        while runs.held and time.monotonic() < deadline:
            runs.settled.clear()
            await wait_event(runs.settled, min(0.5, deadline - time.monotonic()))
        self._closing.set()
        await runs.writer.wait_idle(max(0.0, deadline - time.monotonic()))

    def widen_fence(self, grace_s: float) -> None:
        """A reload defined a longer grace: stop fenced runs early enough for it too."""
        self.runs.fence.widen(grace_s)

    # -- observability ----------------------------------------------------------------------
    @property
    def listening(self) -> bool:
        """LISTEN is up: NOTIFY wakes this runner."""
        return self.loops.listening

    def status(self) -> DatabaseStatus:
        """The ``database`` part of ``status``: connection, flags, what this replica holds."""
        down_since = self.health.down_since
        flags = self.claimer.flags
        return {
            "up": self.health.up,
            "down_for_s": None if down_since is None else round(time.monotonic() - down_since, 1),
            "listening": self.listening,
            "owner": self.owner,
            "claiming": flags.claiming,
            "paused": flags.paused,
            "enabled": flags.enabled,
            "held_runs": len(self.runs.held),
            "unwritten_results": len(self.runs.writer),
            "claims_total": self.claimer.claims_total,
            "lease_reclaims_total": self.claimer.lease_reclaims_total,
            "occurrences_missed_total": self.claimer.passed_over_total["missed"],
            "occurrences_coalesced_total": self.claimer.passed_over_total["coalesced"],
            "schedule_lag_s": round(self.runs.schedule_lag_s, 3),
            "unusable_jobs": [
                {"job": name, "error": why} for name, why in self.unusable.now().values()
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
        if self.claimer.claim_failing is not None:
            since, why = self.claimer.claim_failing
            if now - since > self.unhealthy_after_s:
                return f"database jobs: every claim fails for {now - since:.0f}s: {why}"
        return None

    def health_warnings(self) -> list[str]:
        """Job rows this runner could not use (seen within the last hour, and not run fine
        since): each failed or was disabled on its own while every other job went on. Not
        a reason to restart the daemon, which could not fix a row: said, not unhealthy."""
        return [
            f"database job {name!r} cannot run: {why}" for name, why in self.unusable.now().values()
        ]

    def metrics_snapshot(self) -> dict[str, float]:
        return {
            "db_up": 1.0 if self.health.up else 0.0,
            "claims_total": float(self.claimer.claims_total),
            "lease_reclaims_total": float(self.claimer.lease_reclaims_total),
            "occurrences_missed_total": float(self.claimer.passed_over_total["missed"]),
            "occurrences_coalesced_total": float(self.claimer.passed_over_total["coalesced"]),
            "schedule_lag_seconds": self.runs.schedule_lag_s,
        }
