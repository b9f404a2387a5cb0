"""The Prometheus figures, read from a Metrics of a real run queue (no HTTP)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import get_args

from prometheus_client.parser import text_string_to_metric_families

from daemon.core.runqueue import RunQueue, RunRequest, Trigger
from daemon.core.ticker.ticker import TickPlan
from daemon.observe.metrics import TRIGGERS, Metrics
from daemon.schedules import parse_schedule


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


def test_cadence_is_the_interval_or_the_schedules_next_gap() -> None:
    # 2027-03-27 02:30 UTC is Saturday; Europe/Berlin leaves winter time on Sunday 28 at
    # 02:00, so the day from the next 09:00 to the one after is 23 hours, not 24.
    saturday_0900_berlin = datetime(2027, 3, 27, 8, 0, tzinfo=UTC).timestamp()
    plans = [
        TickPlan(task="hourly", interval_s=3600.0),
        TickPlan(
            task="daily",
            schedule=parse_schedule("daily 09:00", "Europe/Berlin"),
            next_fire_at=saturday_0900_berlin,
        ),
        TickPlan(task="unplanned", schedule=parse_schedule("daily 09:00")),  # no next fire yet
        TickPlan(task="default", once=True),
    ]
    samples = _samples(Metrics(RunQueue(4), plans=lambda: plans))
    cadence = {
        labels[0][1]: value
        for (name, labels), value in samples.items()
        if name == "runbroker_task_cadence_seconds"
    }
    assert cadence == {"hourly": 3600.0, "daily": 23 * 3600.0}


def test_a_one_shot_schedule_has_no_cadence() -> None:
    fire = datetime(2030, 1, 1, tzinfo=UTC)
    plans = [TickPlan(task="once", schedule=parse_schedule(f"at {fire.isoformat()}"))]
    plans[0].next_fire_at = fire.timestamp()
    samples = _samples(Metrics(RunQueue(4), plans=lambda: plans))
    assert not [key for key in samples if key[0] == "runbroker_task_cadence_seconds"]


class _Runner:
    def metrics_snapshot(self) -> dict[str, float]:
        return {"db_up": 1.0}


def test_db_configured_tells_an_absent_database_from_a_down_one() -> None:
    alone = _samples(Metrics(RunQueue(4)))
    assert alone[("runbroker_db_configured", ())] == 0
    assert alone[("runbroker_db_up", ())] == 0
    with_db = _samples(Metrics(RunQueue(4), lambda: _Runner()))
    assert with_db[("runbroker_db_configured", ())] == 1
    assert with_db[("runbroker_db_up", ())] == 1


def test_process_start_time_is_exported_for_since_start_alerts() -> None:
    samples = _samples(Metrics(RunQueue(4)))
    start = samples[("process_start_time_seconds", ())]
    assert start <= time.time()
    assert start > time.time() - 24 * 3600  # this test process, not the epoch


def test_the_trigger_labels_are_the_run_queues_triggers_but_once() -> None:
    """``TRIGGERS`` restates ``runqueue.Trigger`` (the source), in the order the series are made;
    ``once`` runs in its own process (``runbroker once``), never through the daemon's queue."""
    assert set(TRIGGERS) == set(get_args(Trigger)) - {"once"}
