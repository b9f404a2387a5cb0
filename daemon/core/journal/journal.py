"""The output journal: the running run's lines, and the last finished runs' lines.

Bounded in bytes for the running run and for the history together, so the journal never holds
more than ``run_bytes_max + history_bytes_max`` bytes of lines.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
from collections.abc import Iterable, Iterator

from daemon.core.journal.ring import RunLog
from daemon.core.runqueue import Run, RunResult
from daemon.wire.control_shapes import JournalFigures

RUN_BYTES_MAX = 1024 * 1024
HISTORY_RUNS_MAX = 32
HISTORY_BYTES_MAX = 16 * 1024 * 1024
KEPT_REASON_CHARS = 1000  # a kept result's reason, at most (the journal's bounds count lines)


def kept_result(result: RunResult) -> RunResult:
    """What a finished log keeps of its run's result: nothing unbounded (no handler's
    ``output``, the reason clipped), so the journal's bounds hold."""
    reason = result.reason
    if len(reason) > KEPT_REASON_CHARS:
        reason = f"{reason[:KEPT_REASON_CHARS]}... ({len(reason)} characters)"
    return dataclasses.replace(result, reason=reason, output=None)


class Journal:
    def __init__(
        self,
        run_bytes_max: int = RUN_BYTES_MAX,
        history_runs_max: int = HISTORY_RUNS_MAX,
        history_bytes_max: int = HISTORY_BYTES_MAX,
    ) -> None:
        if min(run_bytes_max, history_runs_max, history_bytes_max) < 0:
            raise ValueError("the journal's bounds must be >= 0")
        self.run_bytes_max = run_bytes_max
        self.history_runs_max = history_runs_max
        self.history_bytes_max = history_bytes_max
        self.current: RunLog | None = None
        # Oldest first: at its length, appending drops the oldest (its bytes counted off first).
        self._history: collections.deque[RunLog] = collections.deque(maxlen=history_runs_max)
        self.history_bytes = 0
        self.evicted_runs = 0
        self._loop: asyncio.AbstractEventLoop | None = None  # the executor's, from begin()
        # The broker's recent results, newest first (the app's, set by it): what ``logs`` says
        # of runs it has no lines of (a handler's, one that ended before it started).
        self.recent: Iterable[Run] = ()

    def begin(self, run: Run) -> RunLog:
        """``run`` starts: its lines go to the log returned (the journal's ``current``)."""
        loop = self._loop
        if loop is None:  # looked up once: on CPython 3.11 each lookup is a getpid()
            with contextlib.suppress(RuntimeError):  # outside a loop (a test): a mark a line
                loop = self._loop = asyncio.get_running_loop()
        log = self.current = RunLog(run, self.run_bytes_max, loop)
        return log

    def end(self, log: RunLog, result: RunResult) -> None:
        """The run of ``log`` has ``result``: it joins the history, the oldest runs leave."""
        if self.current is log:
            self.current = None
        log.end(kept_result(result))
        history = self._history
        if not self.history_runs_max:
            return
        if len(history) == self.history_runs_max:  # the oldest leaves as this one comes
            self.history_bytes -= history[0].bytes
            self.evicted_runs += 1
        history.append(log)
        self.history_bytes += log.bytes
        if self.history_bytes > self.history_bytes_max:
            while history and self.history_bytes > self.history_bytes_max:
                self.history_bytes -= history.popleft().bytes
                self.evicted_runs += 1

    def history(self) -> Iterator[RunLog]:
        """The finished runs kept, newest first."""
        return reversed(list(self._history))

    def find(self, run_id: str) -> RunLog | None:
        """The running or kept finished run ``run_id``."""
        current = self.current
        if current is not None and current.run_id == run_id:
            return current
        return next((log for log in self.history() if log.run_id == run_id), None)

    def latest(self, task: str | None = None) -> RunLog | None:
        """The running run (of ``task``, when given), else the newest finished one."""
        current = self.current
        if current is not None and (task is None or current.task == task):
            return current
        return next((log for log in self.history() if task is None or log.task == task), None)

    @property
    def bytes_held(self) -> int:
        current = self.current
        return self.history_bytes + (current.bytes if current is not None else 0)

    def figures(self) -> JournalFigures:
        """What ``status`` shows of the journal."""
        return {
            "bytes": self.bytes_held,
            "runs": len(self._history) + (self.current is not None),
            "run_bytes_max": self.run_bytes_max,
            "history_runs_max": self.history_runs_max,
            "history_bytes_max": self.history_bytes_max,
        }
