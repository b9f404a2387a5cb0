"""``Exclusive``: cross-process run coalescing, at most one run at a time, reruns not waiters.

Two files in its directory: ``cycle.lock`` (an ``OverlapGuard``, held for a whole run) and
``cycle.queued`` (the count of queued rerun requests).
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from daemon.coord.guard import HolderInfo, OverlapGuard, read_holder
from daemon.coord.outcome import LOGGER, DecisionLog, ExclusiveResult, Outcome
from daemon.coord.requests import RerunRequests

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

__all__ = ["LOCK_NAME", "QUEUE_NAME", "Exclusive"]

LOCK_NAME: Final = "cycle.lock"
"""Name of the lock file inside an ``Exclusive`` directory (pass it to ``read_holder``)."""
QUEUE_NAME: Final = "cycle.queued"
"""Name of the queued-request counter (a ``SlotFile``) inside an ``Exclusive`` directory."""


@dataclass(slots=True)
class _Tally:
    runs: int = 0
    last_ok: bool | None = None
    last_error: Exception | None = None


class Exclusive:
    """At most one job run at a time across processes, with coalesced reruns instead of waiters.

    A caller that finds a run in flight records a rerun request and returns at once, since the
    run that serves it starts after this call. A job returns True for success; its ``Exception``
    is kept in the result, never raised, and a ``BaseException`` propagates once the lock is
    released. The holder clears the requests when it acquires (the run about to start covers
    them), looks once more after releasing (so a request made in that window is served), and
    stops after ``max_reruns`` or a closed ``gate()``, leaving the demand queued for the next
    holder."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        queue_capacity: int = 1,
        gate: Callable[[], bool] | None = None,
        max_reruns: int = 8,
        logger: FilteringBoundLogger | None = None,
    ) -> None:
        if queue_capacity < 1:
            raise ValueError(f"queue_capacity must be at least 1, got {queue_capacity}")
        if max_reruns < 0:
            raise ValueError(f"max_reruns must not be negative, got {max_reruns}")
        self._directory = Path(directory)
        self._queue_capacity = queue_capacity
        self._gate = gate
        self._max_reruns = max_reruns
        self._log = DecisionLog(logger if logger is not None else LOGGER, self._directory).log
        self._requests = RerunRequests(self._directory / QUEUE_NAME)

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def lock_path(self) -> Path:
        return self._directory / LOCK_NAME

    @property
    def queue_capacity(self) -> int:
        return self._queue_capacity

    @property
    def max_reruns(self) -> int:
        return self._max_reruns

    def pending(self) -> int:
        """The number of queued rerun requests now (it may change the moment it is read)."""
        return self._requests.pending()

    def holder(self) -> HolderInfo:
        """``read_holder`` on this directory's lock file."""
        return read_holder(self.lock_path)

    def run(self, job: Callable[[], bool]) -> ExclusiveResult:
        """Queue mode: run now, or record a rerun request, or discard (see the class doc)."""
        return self._guarded(job, skip=False)

    def run_or_skip(self, job: Callable[[], bool]) -> ExclusiveResult:
        """Skip mode: run now, or return ``skipped`` without recording anything."""
        return self._guarded(job, skip=True)

    # -- internals

    def _guarded(self, job: Callable[[], bool], *, skip: bool) -> ExclusiveResult:
        try:
            return self._call(job, skip=skip)
        except OSError as exc:
            code = errno.errorcode.get(exc.errno or 0, "unknown")
            self._log(logging.ERROR, Outcome.NONE, error=type(exc).__name__, errno=code)
            raise

    def _call(self, job: Callable[[], bool], *, skip: bool) -> ExclusiveResult:
        os.makedirs(self._directory, mode=0o700, exist_ok=True)
        guard = OverlapGuard(self.lock_path)
        if guard.try_acquire():
            return self._hold(guard, job, fresh=True)
        if skip:
            self._log(logging.WARNING, Outcome.SKIPPED)
            return ExclusiveResult(Outcome.SKIPPED)
        seen = self._enqueue()
        queued = seen < self._queue_capacity
        if guard.try_acquire():
            # The holder left between our first probe and the record: serve it ourselves.
            self._log(logging.INFO, "reprobe")
            return self._hold(guard, job, fresh=False)
        outcome = Outcome.QUEUED if queued else Outcome.DISCARDED
        self._log(logging.INFO, outcome, pending=seen + 1 if queued else seen)
        return ExclusiveResult(outcome)

    def _enqueue(self) -> int:
        return self._requests.add(self._queue_capacity)

    def _gate_open(self) -> bool:
        return self._gate is None or self._gate()

    def _hold(
        self, guard: OverlapGuard, job: Callable[[], bool], *, fresh: bool
    ) -> ExclusiveResult:
        """Serve runs while holding ``guard``, always returning with the lock released.

        ``fresh``: the lock was free at the first probe, so a count found now is orphaned."""
        tally = _Tally()
        budget = self._max_reruns
        handoff = False
        while True:
            stop = True  # stop unless the queue was seen empty with budget left
            try:
                if not self._gate_open():
                    if tally.runs == 0:
                        self._log(logging.INFO, Outcome.GATED, pending=self.pending())
                        return ExclusiveResult(Outcome.GATED)
                    self._log_deferred(tally)
                    break
                if handoff:
                    if self._requests.take_one() == 0:
                        break
                    budget -= 1
                    self._log(logging.INFO, "handoff", attempt=self._max_reruns - budget)
                else:
                    orphaned = self._requests.clear()
                    if orphaned and fresh:
                        self._log(logging.INFO, "orphan-cleared", cleared=orphaned)
                self._run_once(job, tally)
                while True:
                    if budget <= 0:
                        if (left := self.pending()) > 0:
                            self._log(logging.WARNING, "retired", pending=left, runs=tally.runs)
                        break
                    if not self._gate_open():
                        self._log_deferred(tally)
                        break
                    seen = self._requests.take_one()
                    if seen == 0:
                        stop = False
                        break
                    budget -= 1
                    self._log(
                        logging.INFO, "rerun", attempt=self._max_reruns - budget, pending=seen - 1
                    )
                    self._run_once(job, tally)
            finally:
                guard.release()
            # A request recorded after our last empty check, before the release, has no holder
            # unless we (or whoever holds the lock now) serve it.
            if stop or self.pending() == 0:
                break
            guard = OverlapGuard(self.lock_path)
            if not guard.try_acquire():
                break  # another holder owns that demand now
            handoff = True
        outcome = Outcome.RAN_QUEUED if tally.runs > 1 else Outcome.RAN
        self._log(logging.INFO, outcome, runs=tally.runs, last_ok=tally.last_ok)
        return ExclusiveResult(outcome, tally.runs, tally.last_ok, tally.last_error)

    def _log_deferred(self, tally: _Tally) -> None:
        if (left := self.pending()) > 0:
            self._log(logging.INFO, "deferred", pending=left, runs=tally.runs)

    def _run_once(self, job: Callable[[], bool], tally: _Tally) -> None:
        try:
            ok, error = bool(job()), None
        except Exception as exc:
            ok, error = False, exc
            self._log(logging.WARNING, "run-failed", error=type(exc).__name__)
        tally.runs += 1
        tally.last_ok = ok
        tally.last_error = error
