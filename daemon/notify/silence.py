"""The dead-man's switch inside: a task with ``max_silence`` that has not succeeded for that
long is *silent*, once per silence (until its next success).

Its silence is counted from its last success, or, before its first since the daemon started
(or since a reload gave it a ``max_silence``), from then: a restart gives every task its whole
``max_silence`` again. The clock is the wall clock (``time.time``): the times are shown.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from daemon.core.rfc3339 import rfc3339_utc_at
from daemon.schedules import Schedule
from daemon.schedules.occurrences import gaps_after
from daemon.wire.control_shapes import SilentTask

AUTO_CADENCES = 2  # max_silence = "auto": this many of the task's cadences
AUTO_FIRES = 8  # a schedule's cadence: the longest of the gaps between its next fires


def auto_limit_s(interval_s: float | None, schedule: Schedule | None, now: float) -> float | None:
    """``max_silence = "auto"``: two of the task's cadences (its interval; for a schedule the
    longest gap between its next fires, so a weekday cron's weekend is not a silence). None:
    a one-shot schedule, or no cadence at all."""
    if interval_s is not None:
        return AUTO_CADENCES * interval_s
    if schedule is None:
        return None
    gaps = gaps_after(schedule, datetime.fromtimestamp(now, UTC), AUTO_FIRES)
    return AUTO_CADENCES * max(gaps).total_seconds() if gaps else None


class SilenceWatch:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._limits_s: dict[str, float] = {}  # task -> its max_silence
        self._last_ok: dict[str, float] = {}  # task -> its last success (or the watch's start)
        self._succeeded: set[str] = set()  # tasks with a success seen, not only a start
        self.silent: dict[str, float] = {}  # task -> when its silence began

    def refresh(self, limits_s: Mapping[str, float]) -> None:
        """The tasks watched and their limits, from now on (a start, a reload)."""
        now = self._clock()
        self._limits_s = dict(limits_s)
        for task in limits_s:
            self._last_ok.setdefault(task, now)
        for task in list(self.silent):
            if task not in limits_s:
                del self.silent[task]

    def succeeded(self, task: str) -> bool:
        """``task`` succeeded now; whether that ends a silence."""
        self._last_ok[task] = self._clock()
        self._succeeded.add(task)
        return self.silent.pop(task, None) is not None

    def newly_silent(self) -> list[tuple[str, float]]:
        """The tasks whose silence begins now, each with how long it has lasted."""
        now = self._clock()
        found = []
        for task, limit_s in self._limits_s.items():
            if task in self.silent:
                continue
            quiet_s = now - self._last_ok.get(task, now)
            if quiet_s >= limit_s:
                self.silent[task] = self._last_ok[task] + limit_s
                found.append((task, quiet_s))
        return found

    def next_due_in_s(self) -> float | None:
        """How long until the next task may fall silent (None: none is watched)."""
        now = self._clock()
        waits = [
            self._last_ok.get(task, now) + limit_s - now
            for task, limit_s in self._limits_s.items()
            if task not in self.silent
        ]
        return max(0.0, min(waits)) if waits else None

    def status(self) -> list[SilentTask]:
        now = self._clock()
        return [
            {
                "task": task,
                "silent_for_s": round(now - self._last_ok[task], 3),
                "max_silence_s": self._limits_s[task],
                "last_success_at": (
                    rfc3339_utc_at(self._last_ok[task]) if task in self._succeeded else None
                ),
            }
            for task in sorted(self.silent)
        ]

    def warnings(self) -> list[str]:
        return [
            f"task {item['task']!r} has not succeeded for {item['silent_for_s']:.0f}s"
            f" (max_silence {item['max_silence_s']:g}s)"
            for item in self.status()
        ]
