"""The runner's background loops: LISTEN (and the schema's version), lease heartbeat, pruning.

Each runs until ``closing`` and never ends on its own for the database going away: it reports
to ``DbHealth``, waits with backoff and tries again.
"""

from __future__ import annotations

import asyncio

from daemon.log.logs import get_logger
from daemon.pg.deps import DependencyWaiter
from daemon.pg.fence import renew_every_s
from daemon.pg.health import LOGGER_NAME, Backoff
from daemon.pg.held import HeldRuns
from daemon.pg.replica import Replica
from daemon.pg.store.base import StoreUnavailable, Subscription
from daemon.pg.waits import first_of, wait_event

PING_S = 10.0  # the LISTEN connection (and the schema's version) is checked this often
SCHEMA_RECHECK_S = 1.0  # ... and the schema this often while it does not fit
PRUNE_EVERY_S = 3600.0

log = get_logger(LOGGER_NAME)


class BackgroundLoops:
    def __init__(
        self,
        replica: Replica,
        *,
        runs: HeldRuns,
        deps: DependencyWaiter,
        wake: asyncio.Event,
        closing: asyncio.Event,
    ) -> None:
        self.store, self.settings = replica.store, replica.settings
        self.owner, self.health = replica.owner, replica.health
        self.runs = runs
        self.deps = deps
        self.wake = wake
        self.closing = closing
        self.listening = False  # LISTEN is up: NOTIFY wakes the claimer

    def _notified(self, payload: str) -> None:
        self.wake.set()
        if payload != "settings":
            self.deps.changed()

    async def listen_loop(self) -> None:
        backoff = Backoff()
        while not self.closing.is_set():
            try:
                subscription: Subscription = await self.store.listen(self._notified)
            except Exception as exc:  # never let the daemon die of the database
                self.health.call_failed("listen", exc)
                await wait_event(self.closing, backoff.next_s())
                continue
            backoff.reset()
            self.health.ok()
            self.listening = True
            self.runs.writer.nudge()
            self._notified("listen")  # anything may have happened while we were not listening
            try:
                await self._check_schema()
                while not subscription.lost and not self.closing.is_set():
                    every_s = PING_S if self.health.schema_problem is None else SCHEMA_RECHECK_S
                    lost, closing = subscription.wait_lost(), self.closing.wait()
                    await first_of(lost, closing, timeout_s=every_s)
                    if not subscription.lost and not self.closing.is_set():
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
        """Look at the schema's version.

        Connection trouble is the LISTEN loop's to handle. Anything else is logged and leaves the
        last verdict, so it never makes a reconnect loop."""
        try:
            problem = await self.store.schema_problem()
        except StoreUnavailable:
            raise
        except Exception:
            log.exception("pgrunner.error", where="schema")
            return
        self.health.schema_checked(problem)

    async def heartbeat_loop(self) -> None:
        """Renew every held lease: a renewal is sent each fifth of the lease (counted from the
        last one sent, so a slow answer does not stretch the cadence), and a try that has no
        answer within half the lease is given up (a partition hangs a query rather than
        failing it). Each renewal answered moves its runs' fences (daemon/pg/fence.py)."""
        lease_s = self.settings.lease_s
        every_s = renew_every_s(lease_s)
        wait_s = every_s
        while not await wait_event(self.closing, wait_s if self.health.up else min(1.0, wait_s)):
            # settled runs too: a lease is held until the run's record is written
            sent = list(self.runs.held.values())
            job_ids = {h.claimed.job.id for h in sent}
            sent_at = self.runs.fence.now()
            wait_s = every_s
            if not job_ids:
                continue
            try:
                async with asyncio.timeout(lease_s / 2):
                    renewal = await self.store.heartbeat(self.owner, sorted(job_ids), lease_s)
            except TimeoutError:
                self.health.failed("heartbeat", StoreUnavailable("lease renewal timed out"))
                continue
            except Exception as exc:
                self.health.call_failed("heartbeat", exc)
                continue
            finally:
                wait_s = max(0.0, sent_at + every_s - self.runs.fence.now())
            self.health.ok()
            self.runs.answered(sent, renewal, sent_at)

    async def prune_loop(self) -> None:
        every_s = min(PRUNE_EVERY_S, self.settings.run_retention_s / 4)
        while not await wait_event(self.closing, every_s):
            try:
                pruned = await self.store.prune(self.settings.run_retention_s)
            except Exception as exc:
                self.health.call_failed("prune", exc)
                continue
            if pruned:
                log.info("runs.pruned", runs=pruned)
