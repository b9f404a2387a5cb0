"""The output journal of ``runbroker logs``: every run's output lines, bounded in memory."""

from daemon.core.journal.follow import FollowerHold
from daemon.core.journal.journal import (
    HISTORY_BYTES_MAX,
    HISTORY_RUNS_MAX,
    RUN_BYTES_MAX,
    Journal,
)
from daemon.core.journal.ring import LineRecord, RunLog, Wake
from daemon.core.journal.sizes import MARK_BYTES, line_bytes

__all__ = [
    "HISTORY_BYTES_MAX",
    "HISTORY_RUNS_MAX",
    "MARK_BYTES",
    "RUN_BYTES_MAX",
    "FollowerHold",
    "Journal",
    "LineRecord",
    "RunLog",
    "Wake",
    "line_bytes",
]
