"""pytest fixtures of ``daemon.testing``: enable with ``pytest_plugins =
["daemon.testing.fixtures"]`` in a ``conftest.py`` (pytest is needed only then)."""

from __future__ import annotations

import pytest

from daemon.testing.clock import ManualClock
from daemon.testing.jobs import JobBoard


@pytest.fixture
def manual_clock() -> ManualClock:
    """A clock at 2026-01-01T00:00Z that moves only when the test moves it."""
    return ManualClock()


@pytest.fixture
def job_board(manual_clock: ManualClock) -> JobBoard:
    """An empty ``JobBoard`` on ``manual_clock``, with the daemon's default retries."""
    return JobBoard(manual_clock)
