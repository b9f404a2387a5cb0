"""The scheduler's settings rows: their keys, the words a flag is read by, and how Python reads
a value. The one home of these: the claim's SQL is built from the same constants
(``queries.claim``), so the database and Python read a flag alike."""

from __future__ import annotations

from typing import Any

from daemon.pg.store.base import SchedulerFlags

# The keys of runbroker_settings (migration 0001 inserts them with their defaults).
PAUSED_KEY = "scheduler.paused"
ENABLED_KEY = "scheduler.enabled"
INTERVAL_KEY = "scheduler.interval_seconds"

# A value reads as true or as false when its text, trimmed of these blanks and lowered, is one
# of these words, in Python and in the claim's SQL alike.
BLANKS = " \t\n\v\f\r"
TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off")


def flag_value(value: Any, default: bool) -> bool:
    """A settings value as a bool: JSON true or false, or the words above, else the default."""
    if isinstance(value, bool):
        return value
    text = str(value).strip(BLANKS).lower() if value is not None else ""
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    return default


def interval_value(value: Any) -> float | None:
    """``scheduler.interval_seconds`` as a positive float, or None when unset or invalid."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if seconds > 0 and seconds == seconds and seconds != float("inf") else None


def read_flags(paused: Any, enabled: Any, interval: Any) -> SchedulerFlags:
    """The flags from the three settings' values (None: the row is missing)."""
    return SchedulerFlags(
        paused=flag_value(paused, False),
        enabled=flag_value(enabled, True),
        interval_s=interval_value(interval),
    )
