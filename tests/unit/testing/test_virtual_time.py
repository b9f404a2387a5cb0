"""Virtual time: sleepers wake in the order of their times, at their own times, and only when
the test moves the clock."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from daemon.testing import ManualClock, VirtualTime

START = datetime(2026, 6, 1, tzinfo=UTC)


async def test_sleepers_wake_in_order_at_their_own_times() -> None:
    clock = ManualClock(START)
    time_ = VirtualTime(clock)
    woke: list[tuple[str, datetime]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await time_.sleep(seconds)
        woke.append((name, clock()))

    tasks = [asyncio.create_task(sleeper(name, s)) for name, s in (("b", 90), ("a", 30))]
    await time_.quiet()
    assert woke == []
    await time_.advance_to(START + timedelta(minutes=10))
    await asyncio.gather(*tasks)
    assert woke == [("a", START + timedelta(seconds=30)), ("b", START + timedelta(seconds=90))]
    assert clock() == START + timedelta(minutes=10)
    assert time_.monotonic() - 600.0 == VirtualTime(ManualClock(START)).monotonic()


async def test_a_step_jumps_to_the_next_wake_up_and_past_it_when_the_host_stalls() -> None:
    clock = ManualClock(START)
    time_ = VirtualTime(clock)
    assert not await time_.step()  # nobody sleeps
    task = asyncio.create_task(time_.sleep(60))
    assert await time_.step(stall_s=5.0)
    await task
    assert clock() == START + timedelta(seconds=65)
    assert time_.next_wake() is None
