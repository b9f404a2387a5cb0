"""A held run's lease, through the runner against the in-memory store: an expired one abandoned
and retried, a replica that keeps crashing, a lease that cannot be renewed fenced, a lease
another replica holds or a job removed stopping the run."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, MutableMapping, Sequence
from datetime import timedelta
from typing import Any

import pytest

from daemon.pg.store.base import Renewal
from daemon.pg.store.memory import MemoryStore
from daemon.pg.store.memory_rows import MemRun
from daemon.wire.reasons import REASON_FENCED, REASON_JOB_REMOVED, REASON_LEASE_LOST
from tests.support.pgfakes import running
from tests.unit.pg.conftest import now


async def test_expired_lease_run_is_abandoned_and_retried() -> None:
    store = MemoryStore()
    due = now() - timedelta(minutes=2)
    job = store.add("crashy", "default", "every 1h", due, scheduled_for=due, attempt=1)
    store.runs[99] = dead = MemRun(99, job.id, due, 1, "dead-replica", status="running")
    job.lease_owner, job.current_run_id = "dead-replica", 99
    job.lease_expires_at = now() - timedelta(seconds=1)
    async with running(store):
        await store.wait_for(lambda: store.job("crashy").last_status == "succeeded")
    assert dead.status == "abandoned"
    assert "dead-replica" in (dead.error or "")
    retried = next(r for r in store.runs_of("crashy") if r.id != 99)
    assert (retried.attempt, retried.status, retried.scheduled_for) == (2, "succeeded", due)


async def test_a_job_that_keeps_crashing_its_replica_ends_failed() -> None:
    store = MemoryStore()
    due = now() - timedelta(minutes=2)
    job = store.add("doomed", "default", "every 1h", due, scheduled_for=due, attempt=3)
    job.lease_owner, job.lease_expires_at = "dead", now() - timedelta(seconds=1)
    async with running(store, retry_attempts=3) as h:
        await store.wait_for(lambda: store.job("doomed").last_status == "failed")
    assert h.executor.started == []
    job = store.job("doomed")
    assert job.next_run_at == due + timedelta(hours=1)
    assert job.attempt == 0
    assert "3 of 3 attempts" in (job.last_error or "")


async def test_a_run_whose_lease_cannot_be_renewed_is_stopped_before_the_lease_ends() -> None:
    store = MemoryStore()
    store.add("nightly", "slow", "every 1h", now() - timedelta(seconds=1))
    gate = asyncio.Event()  # the run holds until cancelled
    lease_s = 1.0  # fence at 1.0 - (0.2 grace + 0.25 margin) = 0.55 s after the last renewal
    async with running(store, gate=gate, lease_s=lease_s, fence_grace_s=0.2) as h:
        await store.wait_for(lambda: bool(h.executor.started))
        store.outage = True  # no renewal reaches the database from now on
        cut_at = asyncio.get_running_loop().time()
        # the predicate is looked at on every store call: the renewals, every 0.2 s
        await store.wait_for(lambda: bool(h.executor.cancels), timeout_s=5.0)
        stopped_after_s = asyncio.get_running_loop().time() - cut_at
        ((run_id, reason),) = h.executor.cancels
        assert run_id == h.executor.started[0].id
        assert reason == REASON_FENCED
        # told to stop with its grace and the margin still left in the lease
        assert stopped_after_s <= lease_s - 0.2 - 0.25 + 0.1
        store.outage = False
        await store.wait_for(lambda: bool(store.runs_of("nightly")[0].finished_at))
    (record,) = store.runs_of("nightly")
    assert record.status == "cancelled"
    assert record.error == REASON_FENCED


def _another_replica_takes_the_lease(store: MemoryStore) -> None:
    store.job("nightly").lease_owner = "another replica"


def _the_job_is_removed(store: MemoryStore) -> None:
    del store.jobs[store.job("nightly").id]  # `runbroker jobs remove nightly`


@pytest.mark.parametrize(
    ("lose", "reason", "event"),
    [
        (_another_replica_takes_the_lease, REASON_LEASE_LOST, "job.lease_lost"),
        (_the_job_is_removed, REASON_JOB_REMOVED, "job.removed"),
    ],
)
async def test_a_running_run_its_replica_no_longer_holds_is_stopped_saying_why_once(
    logs: list[MutableMapping[str, Any]],
    lose: Callable[[MemoryStore], None],
    reason: str,
    event: str,
) -> None:
    store = MemoryStore()
    store.add("nightly", "slow", "every 1h", now() - timedelta(seconds=1))
    gate = asyncio.Event()
    async with running(store, gate=gate, lease_s=1.0) as h:
        await store.wait_for(lambda: bool(h.executor.started))
        lose(store)
        await store.wait_for(lambda: bool(h.executor.cancels))
        await store.wait_for(lambda: not h.runner.runs.held)  # its record was tried
    ((_, stopped_for),) = h.executor.cancels
    assert stopped_for == reason
    events = [e["event"] for e in logs]
    assert events.count(event) == 1  # not again at its record
    assert {"job.lease_lost", "job.removed"} & set(events) == {event}


class _SlowRenewals(MemoryStore):
    """A renewal whose answer is held back until ``answer`` is set, as a loaded machine's
    reply is late: the runner claims meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = asyncio.Event()
        self.answer = asyncio.Event()

    async def heartbeat(self, owner: str, job_ids: Sequence[int], lease_s: float) -> Renewal:
        renewal = await super().heartbeat(owner, job_ids, lease_s)
        if job_ids and not self.answer.is_set():
            self.in_flight.set()
            await self.answer.wait()
        return renewal


async def test_a_run_claimed_while_a_renewal_is_on_its_way_keeps_its_lease_and_runs_once(
    logs: list[MutableMapping[str, Any]],
) -> None:
    store = _SlowRenewals()
    store.add("first", "slow", "every 1h", now() - timedelta(seconds=1))
    first_gate = asyncio.Event()
    # lease 3 s: a renewal every 0.6 s, given up after 1.5 s, runs fenced 2.25 s after one
    async with running(store, gate=first_gate, lease_s=3.0) as h:
        await store.wait_for(lambda: bool(h.executor.started))
        await asyncio.wait_for(store.in_flight.wait(), 5.0)  # it renews "first" alone
        second_gate = h.executor.release_gate = asyncio.Event()  # what starts next waits
        first_gate.set()
        await store.wait_for(lambda: store.job("first").last_status == "succeeded")
        store.add("second", "slow", "every 1h", now() - timedelta(seconds=1))
        store.notify()
        await store.wait_for(lambda: len(h.executor.started) == 2)  # "second" runs
        renewals = store.calls.count("heartbeat")
        store.answer.set()  # the answer names "first" only: "second" was claimed after it
        await store.wait_for(lambda: store.calls.count("heartbeat") > renewals)  # looked at
        second_gate.set()
        await store.wait_for(lambda: store.job("second").last_status == "succeeded")
    assert h.executor.cancels == []
    (record,) = store.runs_of("second")
    assert (record.attempt, record.status, record.error) == (1, "succeeded", None)
    assert "job.lease_lost" not in [e["event"] for e in logs]
