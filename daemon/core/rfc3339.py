"""Times as text, the one way the daemon writes them: RFC 3339, in UTC, with a ``Z``.

A job finds its occurrence in ``RUNBROKER_SCHEDULED_FOR`` in this form. Standard library only.
"""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339_utc(t: datetime) -> str:
    """``2024-03-31T01:30:00Z``, with milliseconds only when there are some."""
    if t.tzinfo is not UTC:
        t = t.astimezone(UTC)
    # in UTC the text always ends in "+00:00" (once per claimed run: cheaper than replace)
    return t.isoformat(timespec="milliseconds" if t.microsecond else "seconds")[:-6] + "Z"


def rfc3339_utc_at(timestamp: float) -> str:
    """``rfc3339_utc`` of a Unix time: how ``status``, the log and notices write one."""
    return rfc3339_utc(datetime.fromtimestamp(timestamp, UTC))
