"""A clock that moves only when a test says so: aware UTC datetimes, never the wall clock.

``ManualClock`` is a callable (``clock()`` is the time now), so it fits wherever the daemon
takes a clock of aware datetimes (``JobBoard``, the in-memory job store).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)


def _aware_utc(when: datetime) -> datetime:
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"a naive datetime has no place on the clock: {when!r}; give a zone")
    return when.astimezone(UTC)


class ManualClock:
    """The time of a test: starts at ``start`` (2026-01-01T00:00Z unless told), moves with
    ``advance`` and ``set`` only. It never goes back: a schedule's time is monotonic."""

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        self._now = _aware_utc(start)

    def __call__(self) -> datetime:
        return self._now

    def now(self) -> datetime:
        """The time now, an aware UTC datetime."""
        return self._now

    def advance(self, by: timedelta | float = 0.0, /, **parts: float) -> datetime:
        """Move forward by a ``timedelta``, seconds, or ``timedelta``'s keywords
        (``advance(hours=1, minutes=30)``), and return the new time."""
        step = by if isinstance(by, timedelta) else timedelta(seconds=by)
        step += timedelta(**parts)
        if step < timedelta(0):
            raise ValueError(f"the clock does not go back (advance by {step})")
        self._now += step
        return self._now

    def set(self, when: datetime) -> datetime:
        """Move to ``when`` (aware, in any zone, kept in UTC), not before the time now."""
        target = _aware_utc(when)
        if target < self._now:
            raise ValueError(f"the clock does not go back ({target} is before {self._now})")
        self._now = target
        return self._now

    def __repr__(self) -> str:
        return f"ManualClock({self._now.isoformat()})"
