"""What an ``Exclusive`` call decided: the ``Outcome`` it returns and a log line per decision.

Each decision's log line (``coord.<decision>``, logger ``runbroker.coord``, in the daemon's log)
has one stable shape, so that a log search can rely on it. Payloads and error messages are
never logged.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from daemon.log.logs import get_logger

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

__all__ = ["LOGGER", "DecisionLog", "ExclusiveResult", "Outcome"]

LOGGER: Final = get_logger("runbroker.coord")
"""Where ``Exclusive`` logs unless it is given a logger of its own."""


class Outcome(enum.StrEnum):
    """What one ``Exclusive.run``/``run_or_skip`` call did with its request."""

    NONE = "none"
    """No decision: an ``OSError`` (lock dir unusable) escaped the call. Appears in the log
    line ``coord.none``; never in a returned result, since the error is raised."""
    RAN = "ran"
    """The lock was free: this call ran the job once (and found no queued rerun)."""
    RAN_QUEUED = "ran-queued"
    """This call ran the job and then at least one rerun for requests queued meanwhile."""
    QUEUED = "queued"
    """A run was in flight: a rerun request was recorded; it will start after this call."""
    DISCARDED = "discarded"
    """A run was in flight and the queue was full: the queued rerun already covers this call."""
    SKIPPED = "skipped"
    """Skip mode and a run was in flight: nothing was run or recorded."""
    GATED = "gated"
    """The lock was free but the gate was closed (shutting down): nothing ran. A request this
    call had already recorded (see ``Exclusive.run``) stays queued."""


@dataclass(frozen=True, slots=True)
class ExclusiveResult:
    """The outcome of one call, how many times it ran the job, and how the last run went.

    ``last_ok`` is None when the call ran nothing. ``last_error`` is the exception the last
    run raised, if it raised (a raising job counts as failed).
    """

    outcome: Outcome
    runs: int = 0
    last_ok: bool | None = None
    last_error: Exception | None = None


class DecisionLog:
    """Writes the decision lines of one ``Exclusive`` directory, in the shape described above."""

    def __init__(self, logger: FilteringBoundLogger, directory: Path) -> None:
        self._logger = logger
        self._directory = directory

    def log(self, level: int, decision: str, **fields: object) -> None:
        """One line ``coord.<decision>`` at ``level``, its fields as fields: a log reader
        filters on them rather than parsing the message."""
        self._logger.log(
            level,
            f"coord.{decision}",
            coord_decision=str(decision),
            dir=str(self._directory),
            **fields,
        )
