"""PgRunner against the in-memory store (daemon/pg/runner.py): claim, run, record, retry,
release, missed occurrences, pauses, outages."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from datetime import timedelta
from functools import partial
from typing import Any

import pytest

from daemon.core.runqueue import Run, RunResult, job_context
from daemon.pg import horizon
from daemon.pg.store.base import (
    Claimed,
    ClaimIncomplete,
    SchedulerFlags,
    StoreUnavailable,
)
from daemon.pg.store.memory import MemoryStore
from tests.support.pgfakes import fail, running
from tests.unit.pg.conftest import now


async def test_due_job_runs_once_with_context_and_is_recorded() -> None:
    store = MemoryStore()
    due = now() - timedelta(seconds=1)
    store.add("nightly", "default", "every 1h", due, payload={"k": [1, 2]})
    async with running(store) as h:
        await store.wait_for(lambda: store.job("nightly").last_status == "succeeded")
    (run,) = store.runs_of("nightly")
    assert (run.status, run.attempt, run.scheduled_for) == ("succeeded", 1, due)
    assert run.output == {"done": True}
    assert run.started_at is not None
    job = store.job("nightly")
    assert job.next_run_at == due + timedelta(hours=1)
    assert (job.lease_owner, job.scheduled_for, job.attempt) == (None, None, 0)
    (started,) = h.executor.started
    assert started.request.trigger == "schedule"
    assert started.request.payload == {"k": [1, 2]}
    context = job_context(started.request)  # as the job sees it: RUNBROKER_JOB, ...
    assert context["JOB"] == "nightly"
    assert context["ATTEMPT"] == "1"
    assert context["SCHEDULED_FOR"].endswith("Z")


@pytest.mark.parametrize(
    ("output", "recorded"),
    [
        ({"x": [float("nan")]}, None),
        ({"x": float("inf")}, None),
        ({"x": -float("inf"), "y": 1}, None),
        ({"x": 1.5, "y": "a\x00b"}, {"x": 1.5, "y": "a\ufffdb"}),
    ],
)
async def test_a_run_output_that_is_not_json_by_the_rule_is_dropped_from_its_record(
    output: dict[str, Any], recorded: dict[str, Any] | None
) -> None:
    """The one rule of a run's output (``is_json_output``) holds for the record too: NaN and
    the infinities are not JSON, never a null in their place; a NUL is made storable."""
    store = MemoryStore()
    store.add("odd", "default", "every 1h", now())

    async def odd_output(_run: Run) -> RunResult:
        return RunResult(ok=True, output=output)

    async with running(store, handlers={"default": odd_output}):
        await store.wait_for(lambda: store.job("odd").last_status == "succeeded")
    (run,) = store.runs_of("odd")
    assert (run.status, run.output) == ("succeeded", recorded)


def succeeded(store: MemoryStore, name: str) -> bool:
    return store.job(name).last_status == "succeeded"


async def test_jobs_added_one_by_one_to_an_idle_runner_all_run_promptly() -> None:
    store = MemoryStore()
    async with running(store, poll_interval_s=3600.0):
        for i in range(40):
            name = f"one{i}"
            store.add(name, "default", "every 1h", now())
            store.notify()  # as the insert's NOTIFY would; a lost wake-up waits an hour
            await store.wait_for(partial(succeeded, store, name))


async def test_failures_retry_up_to_the_budget_then_the_schedule_carries_on() -> None:
    store = MemoryStore()
    due = now() - timedelta(seconds=1)
    store.add("flaky", "bad", "every 1h", due)
    async with running(store, handlers={"bad": fail}, retry_attempts=3):
        await store.wait_for(
            lambda: len(store.runs_of("flaky")) == 3 and store.job("flaky").attempt == 0
        )
    runs = sorted(store.runs_of("flaky"), key=lambda r: r.attempt)
    assert [(r.attempt, r.status) for r in runs] == [(1, "failed"), (2, "failed"), (3, "failed")]
    assert all(r.scheduled_for == due and r.error == "exit status 3" for r in runs)
    job = store.job("flaky")
    assert job.last_status == "failed"
    assert job.next_run_at == due + timedelta(hours=1)


async def test_a_jobs_max_attempts_overrides_the_default() -> None:
    store = MemoryStore()
    store.add("once", "bad", "every 1h", now(), max_attempts=1)
    async with running(store, handlers={"bad": fail}, retry_attempts=5):
        await store.wait_for(lambda: store.job("once").last_status == "failed")
    assert len(store.runs_of("once")) == 1
    assert store.job("once").scheduled_for is None


async def test_retry_waits_for_its_backoff() -> None:
    store = MemoryStore()
    store.add("slowretry", "bad", "every 1h", now())
    async with running(store, handlers={"bad": fail}, retry_backoff_s=3600.0):
        await store.wait_for(lambda: store.job("slowretry").last_status == "failed")
        job = store.job("slowretry")
        assert job.attempt == 1
        assert job.scheduled_for is not None
        assert job.next_run_at is not None
        assert timedelta(minutes=29) < job.next_run_at - now() <= timedelta(hours=1)
    assert len(store.runs_of("slowretry")) == 1


async def test_unknown_task_fails_clearly_and_runs_nothing() -> None:
    store = MemoryStore()
    store.add("typo", "defualt", "every 1h", now())
    async with running(store) as h:
        await store.wait_for(lambda: store.job("typo").last_status == "failed")
    assert h.executor.started == []
    (run,) = store.runs_of("typo")
    assert run.error is not None
    assert "unknown task 'defualt'" in run.error
    assert "default" in run.error
    assert store.job("typo").attempt == 0  # no retries: another attempt cannot help


async def test_claims_never_exceed_the_queue_room(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(horizon, "UNMEASURED_RUN_S", 0.0)  # runs this short: a whole batch is held
    store = MemoryStore()
    for i in range(10):
        store.add(f"j{i}", "default", "every 1h", now())
    gate = asyncio.Event()
    async with running(store, gate=gate, queue_capacity=2, batch_size=20) as h:
        await store.wait_for(lambda: len(store.runs) == 3)  # one running, two waiting
        assert h.queue.room() == 0
        gate.set()
        await store.wait_for(lambda: all(j.last_status == "succeeded" for j in store.jobs.values()))
    assert len(store.runs) == 10
    assert max(store.claim_limits) <= 2  # never asked for more than the queue could take
    assert h.queue.statistics().rejected_full == 0


async def test_shutdown_releases_claimed_runs_that_did_not_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(horizon, "UNMEASURED_RUN_S", 0.0)  # all three held at once
    store = MemoryStore()
    for name in ("a", "b", "c"):
        store.add(name, "default", "every 1h", now())
    gate = asyncio.Event()
    async with running(store, gate=gate) as h:
        await store.wait_for(lambda: len(store.runs) == 3 and len(h.executor.started) == 1)
        first = h.executor.started[0].request.job
        assert first is not None
        h.stopping.set()
        await store.wait_for(lambda: len(store.runs) == 1)  # released at once, job running
        gate.set()
    assert store.job(first).last_status == "succeeded"
    for name in {"a", "b", "c"} - {first}:
        job = store.job(name)
        assert (job.lease_owner, job.attempt, job.scheduled_for) == (None, 0, None)
        assert store.runs_of(name) == []


async def test_missed_occurrences_coalesce_into_one_run(
    logs: list[MutableMapping[str, Any]],
) -> None:
    store = MemoryStore()
    start = now() - timedelta(minutes=10, seconds=30)
    store.add("catchup", "default", "every 1m", start)
    async with running(store) as h:
        await store.wait_for(lambda: store.job("catchup").last_status == "succeeded")
    status, figures = h.runner.status(), h.runner.metrics_snapshot()
    assert (status["occurrences_coalesced_total"], status["occurrences_missed_total"]) == (10, 0)
    assert figures["occurrences_coalesced_total"] == 10.0
    (said,) = [line for line in logs if line["event"] == "job.coalesced"]
    assert (said["job"], said["occurrences"], said["log_level"]) == ("catchup", 10, "info")
    assert said["run_for"] == start + timedelta(minutes=10)
    passed, run = sorted(store.runs_of("catchup"), key=lambda r: r.attempt)
    assert (run.scheduled_for, run.status) == (start + timedelta(minutes=10), "succeeded")
    assert (passed.status, passed.attempt, passed.scheduled_for) == ("coalesced", 0, start)
    assert passed.occurrences == 10
    assert (passed.error or "").startswith("10 occurrences from")
    next_run = store.job("catchup").next_run_at
    assert next_run == start + timedelta(minutes=11)
    assert next_run > now()


async def test_missed_occurrences_with_skip_do_not_run(
    logs: list[MutableMapping[str, Any]],
) -> None:
    store = MemoryStore()
    start = now() - timedelta(minutes=10, seconds=30)
    store.add("skipper", "default", "every 1m", start, misfire="skip")
    async with running(store) as h:
        await store.wait_for(lambda: (store.job("skipper").next_run_at or start) > now())
    status = h.runner.status()
    assert (status["occurrences_missed_total"], status["occurrences_coalesced_total"]) == (11, 0)
    assert h.runner.metrics_snapshot()["occurrences_missed_total"] == 11.0
    (said,) = [line for line in logs if line["event"] == "job.missed"]
    assert (said["job"], said["occurrences"], said["log_level"]) == ("skipper", 11, "warning")
    assert said["note"].startswith("11 occurrences from")
    (missed,) = store.runs_of("skipper")
    assert (missed.status, missed.attempt, missed.scheduled_for) == ("missed", 0, start)
    assert (missed.occurrences, missed.started_at) == (11, None)
    assert store.job("skipper").next_run_at == start + timedelta(minutes=11)


async def test_paused_scheduler_claims_nothing_until_resumed() -> None:
    store = MemoryStore()
    store.flags = SchedulerFlags(paused=True)
    store.add("held", "default", "every 1h", now())
    async with running(store):
        await store.wait_for(lambda: store.calls.count("outlook") >= 1)
        store.notify()
        await store.wait_for(lambda: store.calls.count("outlook") >= 2)
        assert store.runs == {}
        store.flags = SchedulerFlags(paused=False, enabled=False)
        store.notify()
        await store.wait_for(lambda: store.calls.count("outlook") >= 3)
        assert store.runs == {}
        store.flags = SchedulerFlags()
        store.notify()
        await store.wait_for(lambda: store.job("held").last_status == "succeeded")


async def test_interval_seconds_setting_replaces_the_poll_interval() -> None:
    store = MemoryStore()
    store.flags = SchedulerFlags(interval_s=0.05)
    async with running(store, poll_interval_s=3600.0):
        # Nothing is due and no NOTIFY comes: only the 50 ms fallback poll can call again.
        await store.wait_for(lambda: store.calls.count("outlook") >= 4, timeout_s=3.0)


async def test_result_finished_during_an_outage_is_written_when_the_store_returns() -> None:
    store = MemoryStore()
    store.add("outage", "default", "every 1h", now())
    written = asyncio.Event()

    async def during_outage(_run: Run) -> RunResult:
        store.outage = True
        return RunResult(ok=True, output={"n": 1})

    async with running(store, handlers={"default": during_outage}):
        await store.wait_for(lambda: store.outage and store.calls[-1] == "write")
        fails = store.calls.count("write")
        await store.wait_for(lambda: store.calls.count("write") > fails)  # it keeps trying
        store.outage = False
        await store.wait_for(lambda: store.job("outage").last_status == "succeeded")
        written.set()
    assert written.is_set()
    (run,) = store.runs_of("outage")
    assert run.output == {"n": 1}


class IncompleteOnce(MemoryStore):
    """The first claim that gets runs fails after committing them, as PostgresStore's plain
    claim does when its planner step then fails."""

    raised = False

    async def claim(self, *args: Any, **kwargs: Any) -> list[Claimed]:
        claimed = await super().claim(*args, **kwargs)
        if claimed and not self.raised:
            self.raised = True
            raise ClaimIncomplete(claimed) from StoreUnavailable("the planner's step failed")
        return claimed


async def test_runs_claimed_before_a_claim_failed_still_run_and_the_failure_is_seen(
    logs: list[MutableMapping[str, Any]],
) -> None:
    store = IncompleteOnce()
    store.add("a", "default", "every 1h", now() - timedelta(seconds=1))
    async with running(store):
        await store.wait_for(lambda: succeeded(store, "a"))
    assert store.raised
    assert [run.status for run in store.runs_of("a")] == ["succeeded"]
    (down,) = [e for e in logs if e["event"] == "db.disconnected"]
    assert (down["where"], down["error"]) == ("claim", "the planner's step failed")


async def test_a_failed_planner_step_says_none_of_its_decisions(
    logs: list[MutableMapping[str, Any]],
) -> None:
    """``ClaimIncomplete``: the planner's transaction was rolled back, so what it decided (ten
    occurrences coalesced) is neither logged nor counted; the next claim decides it again."""
    store = IncompleteOnce()
    store.add("late", "default", "every 1m", now() - timedelta(minutes=10, seconds=30))
    async with running(store) as h:
        await store.wait_for(lambda: succeeded(store, "late"))
    assert store.raised
    assert h.runner.status()["occurrences_coalesced_total"] == 0
    assert [e for e in logs if e["event"] == "job.coalesced"] == []
