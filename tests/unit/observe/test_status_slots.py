"""Slots in ``status``: each task's last slots and its counts, in JSON and for people."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from daemon import settings as settings_module
from daemon.broker.app import Broker
from daemon.broker.signals import Signals
from daemon.core.tasks import Task, TaskRegistry
from daemon.core.ticker.slots import MISSED, RAN, SKIPPED, SlotRecord
from daemon.face.status_text import render_status
from daemon.observe.status import slot_summaries, status_answer
from daemon.schedules import parse_schedule

PLANNED = datetime(2026, 3, 2, 9, 0, tzinfo=UTC).timestamp()


def test_the_summaries_are_each_tasks_last_slots_and_totals() -> None:
    record = SlotRecord(kept_per_task=2)
    for minute in range(3):
        slot = record.open("report", PLANNED + 60 * minute)
        record.settle(slot, SKIPPED, reason="previous run still queued or running")
    record.settle(record.open("nightly", PLANNED, note="moved to the end of a DST gap"), MISSED)
    summaries = orjson.loads(orjson.dumps(slot_summaries(record)))
    assert [s["task"] for s in summaries] == ["nightly", "report"]
    nightly, report = summaries
    assert nightly["last"][0]["note"] == "moved to the end of a DST gap"
    assert nightly["last"][0]["planned_at"] == "2026-03-02T09:00:00.000+00:00"
    assert [entry["planned_at"][11:16] for entry in report["last"]] == ["09:01", "09:02"]
    assert report["totals"][SKIPPED] == 3
    assert report["last"][0]["run_id"] is None


@pytest.fixture
def broker(clean_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Broker:
    monkeypatch.setenv("RUNBROKER_SOCKET", str(tmp_path / "rb.sock"))
    tasks = TaskRegistry(
        {"nightly": Task("nightly", command=("true",), schedule=parse_schedule("daily 02:30"))}
    )
    return Broker(settings_module.load_settings(), tasks, Signals())


def test_status_says_what_became_of_each_slot(broker: Broker) -> None:
    slots = broker.ticker.slots
    assert broker.ticker.slots is broker.slots
    slots.settle(slots.open("nightly", PLANNED), RAN, run_id="r7", result="succeeded")
    late = slots.open("nightly", PLANNED + 86400)
    slots.settle(late, MISSED, reason="still queued 900s after its planned time")
    answer = orjson.loads(orjson.dumps(status_answer(broker)))
    assert [entry["outcome"] for entry in answer["slots"][0]["last"]] == [RAN, MISSED]
    text = render_status(answer, now=PLANNED + 2 * 86400).splitlines()
    at = text.index("slots (the last 5 of each task):")
    assert text[at + 1].split() == ["TASK", "PLANNED", "OUTCOME", "RUN", "DETAIL"]
    assert "ran" in text[at + 2]
    assert "r7" in text[at + 2]
    assert "succeeded" in text[at + 2]
    assert "MISSED" in text[at + 3]
    assert "still queued 900s" in text[at + 3]
    assert text[at + 4] == "  nightly: 1 ran, 0 skipped, 0 coalesced, 1 missed, 0 caught up"


def test_an_older_daemons_answer_has_no_slots_section() -> None:
    assert "slots" not in render_status({"queue": {}}, now=PLANNED)
