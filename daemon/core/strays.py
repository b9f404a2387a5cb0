"""The attempts the executor stopped waiting for: a handler that did not end within its grace
once its timeout or a cancel asked it to (it swallowed the ``CancelledError``).

Its run has its result and the executor has moved on; the task it goes on in is owned here
until it ends, listed by ``status`` and ``health``, and awaited at shutdown within its budget.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from daemon.core.runqueue import Run, run_log_fields
from daemon.log.logs import get_logger

log = get_logger("runbroker.executor")


@dataclass(frozen=True, slots=True)
class Stray:
    """One attempt left running: its run, and since when (unix times)."""

    run_id: str
    task: str
    started_at: float  # the run's start
    given_up_at: float  # when the executor stopped waiting for it


class Strays:
    """The stray attempts' tasks, each held until it ends; its end is logged."""

    def __init__(self) -> None:
        self._held: dict[asyncio.Task[Any], Stray] = {}

    def adopt(self, task: asyncio.Task[Any], run: Run, grace_s: float) -> Stray:
        """``task`` goes on with ``run``'s attempt, which ran ``grace_s`` past its stop."""
        now = time.time()
        stray = Stray(run.id, run.request.task, run.started_at or now, now)
        self._held[task] = stray
        task.add_done_callback(self._ended)
        log.error(
            "run.stray",
            **run_log_fields(run),
            grace_s=grace_s,
            running_s=round(now - stray.started_at, 3),
        )
        return stray

    def _ended(self, task: asyncio.Task[Any]) -> None:
        stray = self._held.pop(task, None)
        if not task.cancelled():
            task.exception()  # retrieved: what ended it is the handler's, told by its run.crashed
        if stray is None:
            return
        now = time.time()
        log.warning(
            "run.stray_ended",
            run_id=stray.run_id,
            task=stray.task,
            running_s=round(now - stray.started_at, 3),
            stray_s=round(now - stray.given_up_at, 3),
        )

    def listed(self) -> list[Stray]:
        """The strays still running, the oldest first."""
        return sorted(self._held.values(), key=lambda stray: stray.given_up_at)

    def __len__(self) -> int:
        return len(self._held)

    def cancel(self) -> None:
        """Cancel each stray again (the executor is being stopped)."""
        for task in self._held:
            task.cancel()

    async def wait(self) -> None:
        """Until every stray has ended (the caller bounds the wait: shutdown's budget)."""
        while self._held:
            await asyncio.wait(set(self._held))
