"""Lease fencing: a run whose lease this replica can no longer renew is stopped before the
lease ends, so the replica that reclaims the occurrence never runs it at the same time.

A lease granted to a statement sent at ``sent`` lasts at least until ``sent + LEASE`` on this
replica's monotonic clock, so each held run is fenced at ``sent + LEASE - lead`` (``lead``: the
longest stop plus a safety margin). The watchdog process is told each run's deadline too
(``sent + LEASE - safety``), so the fence holds while the daemon itself stalls. This holds
while every grace is at most half the lease and the lease is at least 3 s, which the start-up
check enforces. A handler that ignores cancellation, or a process that left its group, cannot
be fenced, and the log says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Generic, Protocol, TypeVar

from daemon.wire.reasons import REASON_JOB_REMOVED, REASON_LEASE_LOST

Held = TypeVar("Held")

MIN_LEASE_S = 3.0
SAFETY_MIN_S = 0.25
RENEWALS_PER_LEASE = 5
# A lease the heartbeat found gone, by whether the job is gone too: the event and the reason.
LEASE_LOST_WHY = {
    False: ("job.lease_lost", REASON_LEASE_LOST),
    True: ("job.removed", REASON_JOB_REMOVED),
}
FENCE_WHY = (
    "no lease renewal reached the database in time: the run is stopped before its lease can "
    "expire and another replica take it"
)


def renew_every_s(lease_s: float) -> float:
    return lease_s / RENEWALS_PER_LEASE


def safety_s(lease_s: float) -> float:
    """Room left between the kill and the lease's end: timers firing late, a loaded host."""
    return max(SAFETY_MIN_S, lease_s / 20)


def lead_s(lease_s: float, grace_s: float) -> float:
    """How long before its lease ends a run is told to stop."""
    return grace_s + safety_s(lease_s)


def graces_s(default_grace_s: float, task_graces_s: Mapping[str, float | None]) -> dict[str, float]:
    """Every grace a database run may take to stop, named by where it is set."""
    found = {"RUNBROKER_GRACE": default_grace_s}
    found.update({f"task {name}": g for name, g in task_graces_s.items() if g is not None})
    return found


def fencing_problem(lease_s: float, graces_s: Mapping[str, float]) -> str | None:
    """Why these settings break the fencing rule (None: they keep it). ``graces_s`` names
    each grace by where it is set (``RUNBROKER_GRACE``, ``task report``)."""
    if lease_s < MIN_LEASE_S:
        return f"RUNBROKER_LEASE must be at least {MIN_LEASE_S:g}s with a database (lease fencing)"
    for where, grace_s in graces_s.items():
        if grace_s > lease_s / 2:
            return (
                f"the grace of {where} ({grace_s:g}s) must be at most half of RUNBROKER_LEASE "
                f"({lease_s:g}s): a run that cannot renew its lease is stopped, grace included, "
                "before the lease ends"
            )
    return None


class Backstop(Protocol):
    """Outside the daemon's process: the kill a stopped daemon cannot give (its watchdog)."""

    def deadline(self, key: str, at_s: float) -> None: ...

    def forget(self, key: str) -> None: ...


class LeaseFence(Generic[Held]):
    """The point where each held run must be told to stop, with one timer per such point.

    The runs of one claim, or of one renewal, share their ``sent_at`` and so their fence: one
    timer serves them all, so a drain of short runs sets and cancels few. Every renewal sent
    moves a run on. A ``backstop`` (the watchdog) is told each queued run's deadline and every
    renewal."""

    def __init__(
        self,
        lease_s: float,
        grace_s: float,
        on_fence: Callable[[Held], None],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.lease_s = lease_s
        self.lead_s = lead_s(lease_s, grace_s)
        self.on_fence = on_fence
        self._loop = loop
        self._fences: dict[int, tuple[float, Held]] = {}  # by job_runs id: (fence at, held)
        # by fence time: its timer and the runs it fences (a dict: kept in the order set)
        self._points: dict[float, tuple[asyncio.TimerHandle, dict[int, None]]] = {}
        self.backstop: Backstop | None = None
        self._keys: dict[int, str] = {}  # job_runs id -> run id, for the backstop

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def widen(self, grace_s: float) -> None:
        """Leave room for ``grace_s`` (a reload's longer grace): every fence already set moves
        earlier by what the lead grew (at once when that is past), later renewals use the new
        lead. The lead never shrinks: a run may still have the grace it started with."""
        wider_s = lead_s(self.lease_s, grace_s)
        grown_s = wider_s - self.lead_s
        if grown_s <= 0:
            return
        self.lead_s = wider_s
        fences = self._fences
        self._fences = {}
        for timer, _runs in self._points.values():
            timer.cancel()
        self._points.clear()
        for run_id, (fence_at, held) in fences.items():
            self._set(run_id, held, fence_at - grown_s)

    def now(self) -> float:
        """The clock of ``renewed``'s ``sent_at``: the loop's monotonic time."""
        return self._event_loop().time()

    def renewed(self, run_id: int, held: Held, sent_at: float) -> None:
        """The lease of ``held`` was granted or renewed by a statement sent at ``sent_at``."""
        self.forget(run_id)
        self._set(run_id, held, sent_at + self.lease_s - self.lead_s)
        key = self._keys.get(run_id)
        if key is not None and self.backstop is not None:
            self.backstop.deadline(key, sent_at + self.lease_s - safety_s(self.lease_s))

    def submitted(self, run_id: int, key: str) -> None:
        """The held run reached the queue as run ``key``: the backstop guards it from now on,
        until ``settled``, whatever stops it meanwhile."""
        entry = self._fences.get(run_id)
        if self.backstop is None or entry is None:
            return
        self._keys[run_id] = key
        sent_at = entry[0] + self.lead_s - self.lease_s
        self.backstop.deadline(key, sent_at + self.lease_s - safety_s(self.lease_s))

    def settled(self, run_id: int) -> None:
        """The run's record is handed on: nothing of it is guarded any more."""
        self.forget(run_id)
        key = self._keys.pop(run_id, None)
        if key is not None and self.backstop is not None:
            self.backstop.forget(key)

    def _set(self, run_id: int, held: Held, fence_at: float) -> None:
        """Fence ``held`` at ``fence_at``, in loop time. A time in the past fires at the next
        turn."""
        self._fences[run_id] = (fence_at, held)
        point = self._points.get(fence_at)
        if point is None:
            timer = self._event_loop().call_at(fence_at, self._fire, fence_at)
            self._points[fence_at] = (timer, {run_id: None})
        else:
            point[1][run_id] = None

    def forget(self, run_id: int) -> None:
        entry = self._fences.pop(run_id, None)
        if entry is None:
            return
        timer, runs = self._points[entry[0]]
        del runs[run_id]
        if not runs:
            timer.cancel()
            del self._points[entry[0]]

    def close(self) -> None:
        for timer, _runs in self._points.values():
            timer.cancel()
        self._points.clear()
        self._fences.clear()
        self._keys.clear()  # the backstop keeps its deadlines: a run still going is still due

    def _fire(self, fence_at: float) -> None:
        point = self._points.pop(fence_at, None)
        if point is None:
            return
        due = [self._fences.pop(run_id) for run_id in point[1]]  # before any run is stopped
        for _fence_at, held in due:
            try:  # one run's failure to stop leaves the others of its time to be stopped
                self.on_fence(held)
            except Exception as exc:
                self._event_loop().call_exception_handler(
                    {"message": "lease fence callback failed", "exception": exc}
                )
