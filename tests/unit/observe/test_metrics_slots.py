"""``runbroker_slots_total{task,outcome}``: every outcome from start, each settled slot once."""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client.parser import text_string_to_metric_families

from daemon.core.runqueue import RunQueue
from daemon.core.ticker.slots import MISSED, OUTCOMES, RAN, SKIPPED, SlotRecord
from daemon.observe.metrics import Metrics

PLANNED = datetime(2026, 3, 2, 9, 0, tzinfo=UTC).timestamp()


def _samples(metrics: Metrics) -> dict[tuple[str, str], float]:
    found = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            if sample.name == "runbroker_slots_total":
                found[(sample.labels["task"], sample.labels["outcome"])] = sample.value
    return found


def test_the_counter_has_every_outcome_from_start_and_counts_each_slot() -> None:
    record = SlotRecord()
    metrics = Metrics(RunQueue(1), tasks=["report"])
    record.listeners.add(metrics.slot_settled)
    assert _samples(metrics) == {("report", outcome): 0.0 for outcome in OUTCOMES}
    record.settle(record.open("report", PLANNED), MISSED, reason="late")
    record.settle(record.open("report", PLANNED + 600, count=3), SKIPPED)
    record.settle(record.open("nightly", PLANNED), RAN, run_id="r1", result="succeeded")
    samples = _samples(metrics)
    assert samples[("report", MISSED)] == 1.0
    assert samples[("report", SKIPPED)] == 3.0
    assert samples[("nightly", RAN)] == 1.0
