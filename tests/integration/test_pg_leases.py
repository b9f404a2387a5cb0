"""Leases on a real PostgreSQL, through PgRunner with a fake executor: a renewal answered late
judges only the runs it was sent for, and a lease taken over leaves each record true."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import asyncpg

from daemon.core.runqueue import Run, RunResult
from daemon.pg.store.base import Renewal
from daemon.pg.store.postgres import PostgresStore
from daemon.wire.reasons import REASON_FENCED
from tests.integration.jobrows import add
from tests.support.eventually import eventually_async
from tests.support.pgfakes import Handler, running


class SlowRenewals(PostgresStore):
    """A renewal whose answer is held back, after its UPDATE, until ``answer`` is set: as a
    loaded machine's reply comes late while the runner goes on claiming."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self.in_flight = asyncio.Event()
        self.answer = asyncio.Event()
        self.renewals = 0

    async def heartbeat(self, owner: str, job_ids: Sequence[int], lease_s: float) -> Renewal:
        renewal = await super().heartbeat(owner, job_ids, lease_s)
        self.renewals += 1
        if job_ids and not self.answer.is_set():
            self.in_flight.set()
            await self.answer.wait()
        return renewal


class NoRenewals(PostgresStore):
    """A replica whose renewals never reach the database (they hang until given up)."""

    async def heartbeat(self, owner: str, job_ids: Sequence[int], lease_s: float) -> Renewal:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_run_claimed_while_a_renewal_is_on_its_way_runs_once_and_is_recorded_true(
    db_dsn: str, sql: asyncpg.Connection
) -> None:
    store = SlowRenewals(db_dsn)
    await add(store, "first")
    first_gate = asyncio.Event()
    # lease 3 s: a renewal every 0.6 s, given up after 1.5 s, runs fenced 2.25 s after one
    async with running(store, gate=first_gate, lease_s=3.0) as h:
        await eventually_async(lambda: bool(h.executor.started), "the first run to start")
        await asyncio.wait_for(store.in_flight.wait(), 5.0)  # it renews "first" alone
        second_gate = h.executor.release_gate = asyncio.Event()  # what starts next waits
        first_gate.set()
        await eventually_async(
            lambda: sql.fetchval("SELECT lease_owner IS NULL FROM scheduled_jobs"),
            "the first run to be recorded",
        )
        await add(store, "second")
        await eventually_async(lambda: len(h.executor.started) == 2, "the second run to start")
        renewals = store.renewals
        store.answer.set()  # its answer names "first" only: "second" was claimed after it
        await eventually_async(lambda: store.renewals > renewals, "the answer to be looked at")
        second_gate.set()
        await eventually_async(
            lambda: sql.fetchval(
                "SELECT count(*) = 2 FROM scheduled_jobs WHERE last_status = 'succeeded'"
            ),
            "both jobs to succeed",
        )
    assert h.executor.cancels == []
    runs = await sql.fetch(
        "SELECT j.name, r.attempt, r.status, r.error FROM job_runs r "
        "JOIN scheduled_jobs j ON j.id = r.job_id ORDER BY r.id"
    )
    assert [tuple(r) for r in runs] == [
        ("first", 1, "succeeded", None),
        ("second", 1, "succeeded", None),
    ]


async def test_a_lease_taken_over_while_its_run_goes_on_is_retried_once_and_recorded_true(
    db_dsn: str, sql: asyncpg.Connection
) -> None:
    first_store = NoRenewals(db_dsn)
    await add(first_store, "nightly")
    finish_first = asyncio.Event()

    async def ignores_cancel(_run: Run) -> RunResult:
        """A handler that cannot be fenced: it goes on past its lease."""
        await finish_first.wait()
        return RunResult(ok=True)

    handlers: dict[str, Handler] = {"default": ignores_cancel}
    async with running(first_store, owner="first", lease_s=3.0, handlers=handlers) as first:
        try:
            await eventually_async(lambda: bool(first.executor.started), "the first run to start")
            async with running(PostgresStore(db_dsn), owner="second", lease_s=3.0) as second:
                await eventually_async(
                    lambda: sql.fetchval("SELECT last_status = 'succeeded' FROM scheduled_jobs"),
                    "the retry to succeed on the second replica",
                    timeout_s=30.0,
                )
            assert [c[1] for c in first.executor.cancels] == [REASON_FENCED]  # told, in vain
        finally:
            finish_first.set()  # the first run ends now, long after its lease
        await eventually_async(lambda: not first.runner.runs.held, "the first record to be tried")
    assert len(second.executor.started) == 1
    runs = await sql.fetch("SELECT attempt, status, owner, error FROM job_runs ORDER BY attempt")
    assert [(r["attempt"], r["status"], r["owner"]) for r in runs] == [
        (1, "abandoned", "first"),
        (2, "succeeded", "second"),
    ]
    assert runs[0]["error"] == "abandoned: the lease of first expired (attempt 1)"
