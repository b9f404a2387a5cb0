"""The executor of virtual runs: one run at a time, each as long as the test says, a timeout
and a cancel ending it as the daemon's executor would."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from daemon.core.runqueue import RunQueue, RunRequest
from daemon.testing import ManualClock, RunStart, VirtualTime
from daemon.testing.virtual_runs import VirtualExecutor

START = datetime(2026, 6, 1, tzinfo=UTC)


async def test_runs_take_turns_each_as_long_as_told() -> None:
    clock = ManualClock(START)
    time_ = VirtualTime(clock)
    queue = RunQueue(4)
    starts: list[RunStart] = []

    def run_s(start: RunStart) -> timedelta:
        starts.append(start)
        return timedelta(minutes=10 * start.index)

    executor = VirtualExecutor(queue, time_, run_s, {"slow": 900.0})
    executing = asyncio.create_task(executor.run_forever())
    first, second = queue.submit(RunRequest("fast")), queue.submit(RunRequest("fast"))
    slow = queue.submit(RunRequest("slow"))  # its 10 minutes are within its 15
    await time_.advance_to(START + timedelta(hours=1))
    queue.close()
    await executing
    assert [(s.task, s.index, s.started_at) for s in starts] == [
        ("fast", 1, START),
        ("fast", 2, START + timedelta(minutes=10)),
        ("slow", 1, START + timedelta(minutes=30)),
    ]
    assert [run.result.outcome if run.result else "" for run in (first, second, slow)] == [
        "succeeded"
    ] * 3


async def test_a_cancel_ends_only_the_running_run_at_once() -> None:
    clock = ManualClock(START)
    time_ = VirtualTime(clock)
    queue = RunQueue(4)
    executor = VirtualExecutor(queue, time_, 3600.0, {})
    executing = asyncio.create_task(executor.run_forever())
    running = queue.submit(RunRequest("job"))
    waiting = queue.submit(RunRequest("job"))
    await time_.quiet()
    assert executor.cancel_running(waiting.id, "why") == ""  # not running
    assert executor.cancel_running(running.id, "replaced") == "requested"
    await time_.quiet()
    assert running.result is not None
    assert (running.result.outcome, running.result.reason) == ("cancelled", "replaced")
    assert executor.started_at == {running.id: START, waiting.id: START}
    queue.close()
    await time_.advance_to(START + timedelta(hours=2))
    await executing


def test_a_negative_length_is_refused() -> None:
    queue = RunQueue(1)
    executor = VirtualExecutor(queue, VirtualTime(ManualClock(START)), -1.0, {})
    run = queue.submit(RunRequest("job"))
    with pytest.raises(ValueError, match="less than nothing"):
        executor._duration_s(run)
