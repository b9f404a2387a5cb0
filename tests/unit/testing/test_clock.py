"""``ManualClock`` (daemon/testing/clock.py): time moves only when told, never back, and is
never naive."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from daemon.testing import (
    ManualClock,
)


def test_the_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(datetime(2026, 3, 29, 2, 0, tzinfo=ZoneInfo("Europe/Berlin")))
    assert clock() == clock.now() == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert clock.now().tzinfo is UTC
    assert clock.advance(90) == datetime(2026, 3, 29, 1, 1, 30, tzinfo=UTC)
    assert clock.advance(timedelta(minutes=1), seconds=30) == datetime(
        2026, 3, 29, 1, 3, tzinfo=UTC
    )
    assert clock.set(datetime(2026, 4, 1, tzinfo=UTC)) == datetime(2026, 4, 1, tzinfo=UTC)
    assert clock() == datetime(2026, 4, 1, tzinfo=UTC)


def test_the_manual_clock_refuses_naive_times_and_going_back() -> None:
    with pytest.raises(ValueError, match="naive"):
        ManualClock(datetime(2026, 1, 1))
    clock = ManualClock()
    with pytest.raises(ValueError, match="naive"):
        clock.set(datetime(2027, 1, 1))
    with pytest.raises(ValueError, match="back"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="back"):
        clock.set(clock() - timedelta(seconds=1))
