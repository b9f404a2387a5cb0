"""Dependencies of Postgres jobs: a run waits, outside the executor, for other jobs' runs.

Waiting outside the executor keeps it free for runs that can go. The wait is bounded: a
dependency still unsettled at the deadline counts as failed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import datetime

from daemon.log.logs import get_logger
from daemon.pg.health import DbHealth
from daemon.pg.store.base import (
    Dependency,
    DependencyState,
    JobStore,
    StoreSchemaMissing,
    StoreUnavailable,
)
from daemon.pg.waits import wait_event
from daemon.schedules.interval import format_duration

RECHECK_S = 2.0

log = get_logger("runbroker.pgdeps")


def _error(dep: Dependency, state: DependencyState) -> str | None:
    if dep.policy == "skip":
        return None
    if not state.exists:
        return f"dependency {dep.job} does not exist"
    if state.last_status not in (None, "succeeded"):
        return f"dependency {dep.job} failed"
    return None


def verdict(deps: Sequence[Dependency], states: dict[str, DependencyState]) -> str | None:
    """The error that fails the dependant, or None to run it. Every dependency is settled."""
    return next((e for d in deps if (e := _error(d, states[d.job])) is not None), None)


class DependencyWaiter:
    def __init__(self, store: JobStore, health: DbHealth, wait_s: float) -> None:
        self._store = store
        self._health = health
        self.wait_s = wait_s
        self._changed = asyncio.Event()

    def changed(self) -> None:
        """Jobs changed (a NOTIFY): every waiter looks again."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait(self, deps: Sequence[Dependency], scheduled_for: datetime) -> str | None:
        """Wait until every dependency is settled or the deadline passes, and return the
        ``verdict``."""
        names = sorted({d.job for d in deps})
        deadline = time.monotonic() + self.wait_s
        states: dict[str, DependencyState] | None = None
        while True:
            changed = self._changed
            try:
                states = await self._store.dependency_states(names, scheduled_for)
            except (StoreUnavailable, StoreSchemaMissing) as exc:
                self._health.failed("dependencies", exc)
            except Exception:  # look again later: the wait stays bounded by its deadline
                log.exception("pgrunner.error", where="dependencies")
            else:
                if not any(s.pending for s in states.values()):
                    return verdict(deps, states)
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                return self._timed_out(deps, states)
            await wait_event(changed, min(remaining_s, RECHECK_S))

    def _timed_out(
        self, deps: Sequence[Dependency], states: dict[str, DependencyState] | None
    ) -> str | None:
        """At the deadline an unsettled dependency counts as failed."""
        for dep in deps:
            state = states.get(dep.job) if states is not None else None
            if state is None or state.pending:
                if dep.policy == "stop":
                    waited = format_duration(self.wait_s)
                    return f"dependency {dep.job} failed: not settled within {waited}"
            elif (error := _error(dep, state)) is not None:
                return error
        return None
