"""The ticker's clocks: one object, so a test replaces them together and every part of the
ticker (its loops, its slots' deadlines) reads the same time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

Sleep = Callable[[float], Awaitable[None]]
WallClock = Callable[[], datetime]
Monotonic = Callable[[], float]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class TickClock:
    """``sleep`` waits, ``now`` is the wall clock (aware, UTC), ``monotonic`` plans intervals."""

    sleep: Sleep = asyncio.sleep
    now: WallClock = utc_now
    monotonic: Monotonic = time.monotonic

    def wall_s(self) -> float:
        """The wall clock as Unix seconds."""
        return self.now().timestamp()
