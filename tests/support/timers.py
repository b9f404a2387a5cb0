"""A loop's clock and timers moved by hand: ``time`` and ``call_at``, as a part that keeps
timers calls them, recorded, with no real time passing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Timer:
    when: float
    callback: Callable[..., Any]
    args: tuple[Any, ...] = ()
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class ManualTimers:
    """The two loop calls, recorded: the time is ``now`` until the test moves it."""

    now: float = 0.0
    timers: list[Timer] = field(default_factory=list)

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any) -> Timer:
        timer = Timer(when, callback, args)
        self.timers.append(timer)
        return timer

    def pending(self) -> list[Timer]:
        return [timer for timer in self.timers if not timer.cancelled]

    def advance(self, to: float) -> None:
        """Move the clock to ``to``, firing every timer that is due on the way, in order."""
        while True:
            due = sorted((t for t in self.pending() if t.when <= to), key=lambda t: t.when)
            if not due:
                break
            timer = due[0]
            self.now = max(self.now, timer.when)
            timer.cancelled = True  # fired: it is no longer pending
            timer.callback(*timer.args)
        self.now = to
