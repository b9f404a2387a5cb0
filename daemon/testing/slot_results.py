"""What a slot simulation came to (``simulate_slots``): each settled slot, each run, each
trigger's answer, in shapes a test asserts on with ``==``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from daemon.core.ticker.slots import OUTCOMES

NextPlanned = Callable[[str, datetime], datetime | None]  # a task's planned time after one


@dataclass(frozen=True)
class SettledSlot:
    """One entry of the slot record: a planned time of ``task`` (``count`` of them from
    ``planned_at`` on, when one decision settled several) and its one outcome."""

    task: str
    planned_at: datetime  # UTC
    outcome: str  # ran, skipped, coalesced, missed, caught_up
    reason: str = ""  # why it was skipped, coalesced or missed; a failed run's reason
    count: int = 1
    note: str = ""  # what an offset change did to the time: "DST gap: ...", "DST fold: ..."
    run_id: str = ""  # ran, caught_up: its run; coalesced: the run that covered it
    result: str = ""  # ran, caught_up: succeeded, failed, timed_out or cancelled
    settled_at: datetime | None = None  # UTC


@dataclass(frozen=True)
class SimulatedRun:
    """A run the simulated daemon queued: a slot's (``tick``) or a trigger's (``external``)."""

    run_id: str
    task: str
    trigger: str
    queued_at: datetime
    started_at: datetime | None  # None: it never started (missed, replaced, shut down)
    ended_at: datetime
    result: str  # succeeded, failed, timed_out or cancelled
    reason: str = ""


@dataclass(frozen=True)
class Trigger:
    """A ``runbroker trigger`` at ``at`` (of the simulated task when ``task`` is None)."""

    at: datetime
    task: str | None = None


@dataclass(frozen=True)
class TriggerAnswer:
    """What a trigger was told: ``queued`` (a new run), ``joined`` (the task's queued run,
    ``on_busy = "coalesce"``), ``replaced`` (its new run replaced the task's runs),
    ``skipped`` (``on_busy = "skip"``), ``refused`` (the queue was full) or ``down`` (the
    daemon was down: ``trigger`` exits 69)."""

    at: datetime
    task: str
    answer: str
    run_id: str = ""
    reason: str = ""


@dataclass(frozen=True)
class SlotSimulation:
    """The settled slots (in the order they were settled), the runs and the triggers' answers
    of a simulation; only slots planned and runs queued up to its ``until``."""

    slots: list[SettledSlot]
    runs: list[SimulatedRun]
    triggers: list[TriggerAnswer]
    _next_planned: NextPlanned = field(repr=False, compare=False)

    def outcomes(self, task: str | None = None) -> list[tuple[datetime, str]]:
        """``(planned_at, outcome)`` of each entry, by planned time (of ``task`` only, if
        given)."""
        return [(slot.planned_at, slot.outcome) for slot in self._entries(task)]

    def totals(self, task: str | None = None) -> dict[str, int]:
        """How many planned times got each outcome (an entry's ``count`` included)."""
        totals = dict.fromkeys(OUTCOMES, 0)
        for slot in self._entries(task):
            totals[slot.outcome] += slot.count
        return totals

    def each_planned_time(self, task: str | None = None) -> list[tuple[datetime, SettledSlot]]:
        """Every planned time with the entry that settled it, in time order: an entry of
        ``count`` N stands for N times of its task's schedule or interval."""
        times: list[tuple[datetime, SettledSlot]] = []
        for slot in self._entries(task):
            at: datetime | None = slot.planned_at
            for _ in range(slot.count):
                if at is None:
                    break
                times.append((at, slot))
                at = self._next_planned(slot.task, at)
        return sorted(times, key=lambda pair: pair[0])

    def slot_at(self, planned_at: datetime, task: str | None = None) -> SettledSlot:
        """The entry that settled the planned time ``planned_at`` (KeyError: none did)."""
        for at, slot in self.each_planned_time(task):
            if at == planned_at:
                return slot
        raise KeyError(planned_at)

    def run(self, run_id: str) -> SimulatedRun:
        """The run ``run_id`` (KeyError: no such run)."""
        for run in self.runs:
            if run.run_id == run_id:
                return run
        raise KeyError(run_id)

    def _entries(self, task: str | None) -> list[SettledSlot]:
        mine = [slot for slot in self.slots if task is None or slot.task == task]
        return sorted(mine, key=lambda slot: slot.planned_at)
