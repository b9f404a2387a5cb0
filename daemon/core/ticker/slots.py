"""The slot record: every scheduled slot of every ticking task gets exactly one outcome.

API: ``open(task, planned_at, note, count) -> Slot``, ``settle(slot, outcome, ...)``, ``follow``.

In full: ``SlotRecord(kept_per_task=20)``; ``record.open(task, planned_at, note="", count=1)
-> Slot``; ``record.settle(slot, outcome, run_id="", result="", reason="") -> bool`` (False:
it had one); ``record.follow(slot, outcome=RAN, on_start=None) -> Watcher`` (the watcher of
the slot's run, which settles it with the run's id and result); ``record.last(task)``,
``record.tasks()``, ``record.totals(task)``, ``record.open_slots``, ``record.listeners``.

A slot is opened when a schedule says its task is due (``planned_at``, Unix seconds) and
settled once: ``ran`` (its run's id and result, settled when the run ends), ``skipped`` (the
task was busy), ``coalesced`` (covered by another slot's run; ``count`` slots at once when a
late tick covers many), ``missed`` (its start deadline passed, or the daemon was down beyond
its window) or ``caught_up`` (run after a restart). The first ``settle`` counts and the later
ones are refused, so two parts racing to decide (a deadline and a run's end) cannot give a
slot two outcomes. ``note`` says what a schedule did to the slot's time (a DST gap or fold).

Bounded like the output journal: the last ``kept_per_task`` settled slots of at most
``tasks_max`` tasks, and a count per outcome; an open slot is held only by who opened it.
Nothing here touches a triggered run: only a tick's run carries a watcher (``follow``).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass

from daemon.core.rfc3339 import rfc3339_utc_at
from daemon.core.runqueue import Run, Watcher
from daemon.core.subscribers import Subscribers
from daemon.log.logs import get_logger

log = get_logger("runbroker.slots")

RAN = "ran"
SKIPPED = "skipped"
COALESCED = "coalesced"
MISSED = "missed"
CAUGHT_UP = "caught_up"
OUTCOMES = (RAN, SKIPPED, COALESCED, MISSED, CAUGHT_UP)
RUN_OUTCOMES = frozenset({RAN, CAUGHT_UP})  # settled from a run's result (``follow``)

KEPT_PER_TASK = 20  # what ``status`` shows of each task
TASKS_MAX = 512  # the tasks whose slots are kept: past it, the longest quiet one is forgotten


@dataclass(slots=True)
class Slot:
    """One planned time of one task and, once settled, what became of it."""

    task: str
    planned_at: float  # Unix seconds
    note: str = ""  # what the schedule did to this time: a DST gap or fold, said for people
    outcome: str = ""  # one of OUTCOMES; empty while open
    run_id: str = ""  # ran, caught_up: its run; coalesced: the run that covered it
    result: str = ""  # ran, caught_up: the run's outcome (succeeded, failed, ...)
    reason: str = ""  # why it was skipped, coalesced or missed; a failed run's reason
    count: int = 1  # how many slots this entry stands for (a late tick covers several)
    settled_at: float = 0.0  # Unix seconds

    @property
    def settled(self) -> bool:
        return bool(self.outcome)


class SlotRecord:
    """The settled slots of each task, the newest last, and their counts by outcome."""

    def __init__(
        self,
        kept_per_task: int = KEPT_PER_TASK,
        *,
        tasks_max: int = TASKS_MAX,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if kept_per_task < 1 or tasks_max < 1:
            raise ValueError("a slot record keeps at least one slot of one task")
        self.kept_per_task = kept_per_task
        self.tasks_max = tasks_max
        self._clock = clock
        self._kept: collections.OrderedDict[str, collections.deque[Slot]] = (
            collections.OrderedDict()
        )
        self._totals: dict[str, dict[str, int]] = {}
        self.open_slots = 0  # opened and not yet settled
        # Told each settled slot; must not block (one that raises never reaches the ticker).
        self.listeners: Subscribers[Slot] = Subscribers("slot.settled")

    def open(self, task: str, planned_at: float, note: str = "", count: int = 1) -> Slot:
        """A slot of ``task`` planned at ``planned_at`` (with ``count``: that many slots from
        it on, settled together), to be settled once."""
        if count < 1:
            raise ValueError("a slot entry stands for at least one slot")
        self.open_slots += count
        return Slot(task, planned_at, note, count=count)

    def settle(
        self,
        slot: Slot,
        outcome: str,
        *,
        run_id: str = "",
        result: str = "",
        reason: str = "",
    ) -> bool:
        """Record ``slot``'s one outcome; False (and nothing changes) when it had one."""
        if slot.outcome:
            return False
        if outcome not in OUTCOMES:
            raise ValueError(f"not a slot outcome: {outcome!r}")
        slot.outcome, slot.run_id, slot.result, slot.reason = outcome, run_id, result, reason
        slot.settled_at = self._clock()
        self.open_slots -= slot.count
        self._keep(slot)
        _log_settled(slot)
        self.listeners.tell(slot)
        return True

    def follow(
        self, slot: Slot, outcome: str = RAN, on_start: Callable[[], None] | None = None
    ) -> Watcher:
        """The watcher of ``slot``'s run: it settles ``slot`` as ``outcome`` (``ran`` or
        ``caught_up``) with the run's result when the run ends; ``on_start`` is called when
        the run starts (a start deadline's timer is stopped there)."""
        if outcome not in RUN_OUTCOMES:
            raise ValueError(f"a run settles a slot as ran or caught_up, not {outcome!r}")

        def watch(run: Run, kind: str) -> None:
            if kind == "started":
                if on_start is not None:
                    on_start()
                return
            result = run.result
            if result is None:  # a watcher hears "done" after the result: never here
                return
            reason = "" if result.ok else result.reason
            self.settle(slot, outcome, run_id=run.id, result=result.outcome, reason=reason)

        return watch

    def _keep(self, slot: Slot) -> None:
        kept = self._kept.get(slot.task)
        if kept is None:
            if len(self._kept) >= self.tasks_max:
                forgotten, _ = self._kept.popitem(last=False)
                self._totals.pop(forgotten, None)
            kept = self._kept[slot.task] = collections.deque(maxlen=self.kept_per_task)
            self._totals[slot.task] = dict.fromkeys(OUTCOMES, 0)
        else:
            self._kept.move_to_end(slot.task)
        kept.append(slot)
        self._totals[slot.task][slot.outcome] += slot.count

    def last(self, task: str) -> list[Slot]:
        """The last settled slots of ``task`` (at most ``kept_per_task``), by planned time:
        a slot's run ends after later slots were skipped or missed, and is read in its place."""
        return sorted(self._kept.get(task, ()), key=_planned_at)

    def tasks(self) -> list[str]:
        """The tasks with settled slots, sorted."""
        return sorted(self._kept)

    def totals(self, task: str) -> dict[str, int]:
        """How many slots of ``task`` were settled as each outcome (zeros for an unknown one)."""
        return dict(self._totals.get(task) or dict.fromkeys(OUTCOMES, 0))


def _planned_at(slot: Slot) -> float:
    return slot.planned_at


def _log_settled(slot: Slot) -> None:
    """One log event per settled slot, ``slot.<outcome>``: a missed slot is a warning."""
    planned = rfc3339_utc_at(slot.planned_at)
    fields: dict[str, object] = {"task": slot.task, "planned_at": planned}
    if slot.run_id:
        fields["run_id"] = slot.run_id
    if slot.result:
        fields["result"] = slot.result
    if slot.reason:
        fields["reason"] = slot.reason
    if slot.count != 1:
        fields["count"] = slot.count
    if slot.note:
        fields["note"] = slot.note
    if slot.outcome == MISSED:
        log.warning(f"slot.{slot.outcome}", **fields)
    else:
        log.info(f"slot.{slot.outcome}", **fields)
