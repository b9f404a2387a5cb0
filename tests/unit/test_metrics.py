"""The Prometheus figures, read from a Metrics of a real run queue (no HTTP)."""

from __future__ import annotations

from typing import get_args

from prometheus_client.parser import text_string_to_metric_families

from daemon.core.runqueue import RunQueue, RunRequest, Trigger
from daemon.core.ticker import TickPlan
from daemon.observe.metrics import TRIGGERS, Metrics


def _samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def test_runs_in_flight_follow_the_executor() -> None:
    queue = RunQueue(4)
    metrics = Metrics(queue, tasks=["report"])
    assert _samples(metrics)[("runbroker_runs_in_flight", ())] == 0
    queue.submit(RunRequest(task="report"))
    run = await queue.take()
    assert run is not None
    assert _samples(metrics)[("runbroker_runs_in_flight", ())] == 1
    queue.release(run)
    assert _samples(metrics)[("runbroker_runs_in_flight", ())] == 0


def test_next_fire_is_each_planned_tasks_next_time() -> None:
    plans = [
        TickPlan(task="hourly", interval_s=3600.0, next_fire_at=1_800_000_000.0),
        TickPlan(task="idle", interval_s=60.0),  # nothing planned yet: no sample
    ]
    samples = _samples(Metrics(RunQueue(4), plans=lambda: plans))
    assert samples[("runbroker_next_fire_timestamp_seconds", (("task", "hourly"),))] == 1.8e9
    assert ("runbroker_next_fire_timestamp_seconds", (("task", "idle"),)) not in samples


def test_the_trigger_labels_are_the_run_queues_triggers_but_once() -> None:
    """``TRIGGERS`` restates ``runqueue.Trigger`` (the source), in the order the series are made;
    ``once`` runs in its own process (``runbroker once``), never through the daemon's queue."""
    assert set(TRIGGERS) == set(get_args(Trigger)) - {"once"}
