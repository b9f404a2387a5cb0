"""A run's output flow: the readers that hold it back, each for a bounded time.

A reader that falls behind holds the job's pipes unread, so the job blocks as it would writing
to a slow reader. The hold is bounded by ``hold_max_s``, so that a reader that stopped reading
never holds the executor for long.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from daemon.log.logs import get_logger

log = get_logger("runbroker.output")

LetGo = Callable[[], None]  # a holder, called when it is let go for holding too long


class OutputFlow:
    """Who holds one run's output back. The child's pipes are paused while anyone does."""

    __slots__ = ("_holders", "_pause", "_resume", "hold_max_s")

    def __init__(self, hold_max_s: float) -> None:
        self.hold_max_s = hold_max_s
        self._holders: dict[LetGo, asyncio.TimerHandle] = {}
        self._pause: Callable[[], None] | None = None
        self._resume: Callable[[], None] | None = None

    def connect(self, pause: Callable[[], None], resume: Callable[[], None]) -> None:
        """The run's child: ``pause`` and ``resume`` its pipes' reading."""
        self._pause, self._resume = pause, resume
        if self._holders:
            pause()

    def disconnect(self) -> None:
        """The child is gone: nothing is held any more."""
        self._pause = self._resume = None
        for timer in self._holders.values():
            timer.cancel()
        self._holders.clear()

    @property
    def held(self) -> bool:
        return bool(self._holders)

    def hold(self, holder: LetGo) -> bool:
        """``holder`` holds the output back until it ``release``s it, or for ``hold_max_s``, when it
        is called and let go.

        False when nothing can be held (no child, or holding is off)."""
        if self._pause is None or self.hold_max_s <= 0:
            return False
        if holder not in self._holders:
            loop = asyncio.get_running_loop()
            self._holders[holder] = loop.call_later(self.hold_max_s, self._let_go, holder)
            if len(self._holders) == 1:
                self._pause()
        return True

    def release(self, holder: LetGo) -> None:
        timer = self._holders.pop(holder, None)
        if timer is None:
            return
        timer.cancel()
        if not self._holders and self._resume is not None:
            self._resume()

    def _let_go(self, holder: LetGo) -> None:
        self.release(holder)
        try:
            holder()
        except Exception as exc:  # a reader's failure never reaches the loop
            log.warning("output.holder_failed", error=type(exc).__name__)
