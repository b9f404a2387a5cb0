"""How the Postgres runner lives with a database that comes and goes.

``DbHealth`` is the one verdict every loop reports to, so each change is logged once.
``Backoff`` paces each loop's retries meanwhile.
"""

from __future__ import annotations

import random
import time

from daemon.log.logs import get_logger
from daemon.pg.store.base import StoreSchemaMissing, StoreUnavailable

LOGGER_NAME = "runbroker.pgrunner"  # every part of the Postgres runner logs under this name
log = get_logger(LOGGER_NAME)


class Backoff:
    """Exponential delays with jitter, from ``initial_s`` up to ``cap_s``, reset on success."""

    def __init__(self, initial_s: float = 0.1, cap_s: float = 5.0) -> None:
        self.initial_s = initial_s
        self.cap_s = cap_s
        self._next_s = initial_s

    def next_s(self) -> float:
        delay_s = self._next_s
        self._next_s = min(self.cap_s, self._next_s * 2)
        return delay_s * random.uniform(0.75, 1.0)

    def reset(self) -> None:
        self._next_s = self.initial_s


class DbHealth:
    """Logs ``db.disconnected`` once when the database goes away, ``db.reconnected`` on return."""

    def __init__(self) -> None:
        self.down_since: float | None = None
        self._schema_warned = False
        # why the schema does not fit (not migrated, or older than this runbroker), or None:
        # set by any StoreSchemaMissing, set and cleared only by ``schema_checked``
        self.schema_problem: str | None = None

    @property
    def up(self) -> bool:
        return self.down_since is None

    def schema_checked(self, problem: str | None) -> None:
        """The result of a look at the schema's version."""
        if problem is not None and problem != self.schema_problem:
            log.error("db.schema_problem", error=problem)
        elif problem is None and self.schema_problem is not None:
            log.info("db.schema_ready")
        self.schema_problem = problem

    def failed(self, where: str, exc: BaseException) -> None:
        if isinstance(exc, StoreSchemaMissing):
            self.schema_problem = str(exc)
            if not self._schema_warned:
                self._schema_warned = True
                log.error("db.schema_missing", where=where, error=str(exc))
            return
        if self.down_since is None:
            self.down_since = time.monotonic()
            log.warning("db.disconnected", where=where, error=str(exc))

    def call_failed(self, where: str, exc: Exception) -> None:
        """A store call failed: the database's trouble is the verdict's, anything else is a bug
        logged with its traceback (call it inside the ``except``) that never ends the daemon."""
        if isinstance(exc, (StoreUnavailable, StoreSchemaMissing)):
            self.failed(where, exc)
        else:
            log.exception("pgrunner.error", where=where)

    def ok(self) -> None:
        self._schema_warned = False
        if self.down_since is not None:
            down_s = time.monotonic() - self.down_since
            self.down_since = None
            log.info("db.reconnected", down_s=round(down_s, 3))
