"""Dependencies between jobs (daemon/pg/deps.py), through the runner against the in-memory
store: stop and skip policies, a wait for the other job's run, bounded."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from daemon.core.runqueue import Run, RunRequest
from daemon.pg.store.base import (
    Dependency,
)
from daemon.pg.store.memory import MemoryStore
from tests.support.pgfakes import fail, running
from tests.unit.pg.conftest import now


async def test_dependency_policies_stop_and_skip() -> None:
    store = MemoryStore()
    t = now()
    store.add("extract", "bad", "every 1h", t)
    store.add("load", "default", "every 1h", t, depends_on=(Dependency("extract"),))
    store.add("report", "default", "every 1h", t, depends_on=(Dependency("extract", "skip"),))
    async with running(store, handlers={"bad": fail}, retry_attempts=1) as h:
        await store.wait_for(
            lambda: (
                store.job("load").last_status is not None
                and store.job("report").last_status is not None
            )
        )
    assert store.job("extract").last_status == "failed"
    assert store.job("load").last_status == "failed"
    assert store.job("load").last_error == "dependency extract failed"
    assert store.job("report").last_status == "succeeded"
    ran = [r.request.job for r in h.executor.started]
    assert "load" not in ran
    assert ran.index("extract") < ran.index("report")


async def test_dependency_waits_for_the_other_job_to_run_first() -> None:
    store = MemoryStore()
    t = now()
    # "after" is claimed first (earlier due time) but must wait for "before".
    store.add(
        "after", "default", "every 1h", t - timedelta(seconds=1), depends_on=(Dependency("before"),)
    )
    store.add("before", "default", "every 1h", t)
    async with running(store) as h:
        await store.wait_for(lambda: store.job("after").last_status == "succeeded")
    ran = [r.request.job for r in h.executor.started]
    assert ran == ["before", "after"]


async def test_dependency_wait_is_bounded() -> None:
    store = MemoryStore()
    t = now()
    stuck = store.add("stuck", "default", "every 1h", t)
    stuck.lease_owner, stuck.lease_expires_at = "elsewhere", t + timedelta(hours=1)
    store.add("waiter", "default", "every 1h", t, depends_on=(Dependency("stuck"),))
    async with running(store, dependency_wait_s=0.2) as h:
        await store.wait_for(lambda: store.job("waiter").last_status == "failed")
    assert store.job("waiter").last_error == "dependency stuck failed: not settled within 200ms"
    assert h.executor.started == []


async def test_a_run_leaves_the_dependency_count_as_it_is_submitted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The claimer counts the runs waiting on their dependencies as runs ahead of a claim: one
    whose wait is over is counted once, as a queued run, from the step that submits it."""
    store = MemoryStore()
    t = now()
    store.add(
        "after", "default", "every 1h", t - timedelta(seconds=1), depends_on=(Dependency("before"),)
    )
    store.add("before", "default", "every 1h", t)
    gate = asyncio.Event()  # "before" runs only once the queue's submit is watched
    async with running(store, gate=gate) as h:
        counted: list[int] = []
        submit = h.queue.submit

        def watched_submit(request: RunRequest, **kwargs: Any) -> Run:
            if request.job == "after":
                counted.append(h.runner.runs.waiting_on_deps)
            return submit(request, **kwargs)

        monkeypatch.setattr(h.queue, "submit", watched_submit)
        gate.set()
        await store.wait_for(lambda: store.job("after").last_status == "succeeded")
    assert counted == [0]
