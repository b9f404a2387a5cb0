"""The slot record: one outcome per slot whoever decides, bounded however many slots come."""

from __future__ import annotations

import collections
from collections.abc import MutableMapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from daemon.core.runqueue import Run, RunRequest, RunResult
from daemon.core.ticker.slots import (
    CAUGHT_UP,
    COALESCED,
    MISSED,
    OUTCOMES,
    RAN,
    SKIPPED,
    Slot,
    SlotRecord,
)
from daemon.testing import ManualClock


def _clock_s(clock: ManualClock) -> Any:
    return lambda: clock().timestamp()


def test_the_last_slots_are_listed_by_planned_time_not_by_when_they_settled() -> None:
    record = SlotRecord()
    ran = record.open("backup", 1000.0)  # its run ends after the next two slots settled
    skipped = record.open("backup", 1060.0)
    missed = record.open("backup", 1120.0)
    record.settle(missed, MISSED, reason="start deadline passed")
    record.settle(skipped, SKIPPED, reason="busy")
    record.settle(ran, RAN, run_id="r1", result="succeeded")
    assert [slot.planned_at for slot in record.last("backup")] == [1000.0, 1060.0, 1120.0]
    assert [slot.outcome for slot in record.last("backup")] == [RAN, SKIPPED, MISSED]


def test_a_slot_is_settled_once_and_the_first_outcome_counts() -> None:
    record = SlotRecord()
    slot = record.open("backup", 1000.0)
    assert record.open_slots == 1
    assert record.settle(slot, MISSED, reason="start deadline passed")
    assert not record.settle(slot, RAN, run_id="r1", result="succeeded")
    assert (slot.outcome, slot.run_id, slot.reason) == (MISSED, "", "start deadline passed")
    assert record.open_slots == 0
    assert record.totals("backup")[MISSED] == 1
    assert record.totals("backup")[RAN] == 0
    assert record.last("backup") == [slot]


def test_a_followed_run_settles_its_slot_with_its_id_and_result() -> None:
    record = SlotRecord()
    slot = record.open("backup", 1000.0)
    started: list[bool] = []
    run = Run(
        RunRequest("backup", "tick"),
        watcher=record.follow(slot, on_start=lambda: started.append(True)),
    )
    run.mark_started()
    assert started == [True]
    assert not slot.settled
    run.finish(RunResult(ok=False, reason="exit status 3", exit_code=3))
    assert (slot.outcome, slot.run_id, slot.result, slot.reason) == (
        RAN,
        run.id,
        "failed",
        "exit status 3",
    )


def test_a_caught_up_slot_is_settled_by_its_run() -> None:
    record = SlotRecord()
    slot = record.open("report", 50.0)
    run = Run(RunRequest("report", "tick"), watcher=record.follow(slot, CAUGHT_UP))
    run.finish(RunResult(ok=True))
    assert (slot.outcome, slot.result, slot.reason) == (CAUGHT_UP, "succeeded", "")


def test_only_a_run_outcome_follows_a_run_and_only_outcomes_settle() -> None:
    record = SlotRecord()
    slot = record.open("t", 1.0)
    with pytest.raises(ValueError, match="ran or caught_up"):
        record.follow(slot, SKIPPED)
    with pytest.raises(ValueError, match="not a slot outcome"):
        record.settle(slot, "lost")
    with pytest.raises(ValueError, match="at least one"):
        record.open("t", 2.0, count=0)
    assert not slot.settled


def test_each_settled_slot_is_one_log_event_a_missed_one_a_warning() -> None:
    record = SlotRecord()
    with capture_logs() as events:
        record.settle(record.open("t", 0.0), MISSED, reason="start deadline passed")
        record.settle(record.open("t", 60.0, note="moved to the end of a DST gap"), SKIPPED)
        record.settle(record.open("t", 120.0, count=3), COALESCED, run_id="r9")
    assert [(e["event"], e["log_level"]) for e in events] == [
        ("slot.missed", "warning"),
        ("slot.skipped", "info"),
        ("slot.coalesced", "info"),
    ]
    assert events[0]["planned_at"] == "1970-01-01T00:00:00Z"
    assert events[1]["note"] == "moved to the end of a DST gap"
    assert (events[2]["run_id"], events[2]["count"]) == ("r9", 3)


def test_a_listener_hears_every_settled_slot_and_one_that_raises_never_reaches_the_ticker(
    logs: list[MutableMapping[str, Any]],
) -> None:
    record = SlotRecord()
    heard: list[Slot] = []

    def broken(_slot: Slot) -> None:
        raise RuntimeError("a metrics bug")

    record.listeners.add(broken)
    record.listeners.add(heard.append)
    first, second = record.open("t", 1.0), record.open("t", 2.0)
    assert record.settle(first, SKIPPED)
    assert record.settle(second, SKIPPED)
    assert heard == [first, second]
    assert broken in record.listeners  # kept, and logged once
    assert [line["news"] for line in logs if line["event"] == "subscriber.failed"] == [
        "slot.settled"
    ]


def test_settled_at_is_the_clock_of_the_record() -> None:
    clock = ManualClock()
    record = SlotRecord(clock=_clock_s(clock))
    slot = record.open("t", 0.0)
    clock.advance(minutes=5)
    record.settle(slot, SKIPPED)
    assert slot.settled_at == clock().timestamp()


_events = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c", "d"]),  # task
        st.sampled_from(OUTCOMES),  # what decided it first
        st.integers(min_value=1, max_value=5),  # count
        st.booleans(),  # a second decision races the first
        st.floats(min_value=0, max_value=3600),  # how long after the last one it was due
    ),
    max_size=200,
)


@given(_events, st.integers(min_value=1, max_value=7), st.integers(min_value=1, max_value=3))
def test_every_slot_has_exactly_one_outcome_within_the_bounds(
    events: list[tuple[str, str, int, bool, float]], kept: int, tasks_max: int
) -> None:
    clock = ManualClock()
    record = SlotRecord(kept, tasks_max=tasks_max, clock=_clock_s(clock))
    slots: list[Slot] = []
    for task, outcome, count, race, later_s in events:
        clock.advance(later_s)
        slot = record.open(task, clock().timestamp(), count=count)
        slots.append(slot)
        assert record.settle(slot, outcome, run_id="r")
        if race:
            for other in OUTCOMES:
                assert not record.settle(slot, other)
        assert slot.outcome == outcome
    assert record.open_slots == 0
    assert all(slot.settled for slot in slots)
    assert len(record.tasks()) <= tasks_max
    for task in record.tasks():
        kept_slots = record.last(task)
        assert len(kept_slots) <= kept
        mine = [slot for slot in slots if slot.task == task]
        assert kept_slots == mine[-len(kept_slots) :]
    # The counts are those of the slots since the task was last (re)kept: a model of the bound.
    model: collections.OrderedDict[str, collections.Counter[str]] = collections.OrderedDict()
    for slot in slots:
        if slot.task not in model and len(model) >= tasks_max:
            model.popitem(last=False)
        model.setdefault(slot.task, collections.Counter())[slot.outcome] += slot.count
        model.move_to_end(slot.task)
    assert record.tasks() == sorted(model)
    for task, counts in model.items():
        assert record.totals(task) == {outcome: counts[outcome] for outcome in OUTCOMES}
