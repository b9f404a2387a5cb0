"""The daemon's loop runs on past a SystemExit or KeyboardInterrupt that a handler's leftover
callback or task raises: logged, and every task goes on where it was."""

from __future__ import annotations

import asyncio
import sys

import pytest
import uvloop
from structlog.testing import capture_logs

from daemon.broker.looprun import run_loop


async def _main_with_leftovers(ticks: list[int]) -> str:
    """Leaves a ``sys.exit(7)`` callback and two tasks raising, then goes on ticking."""
    loop = asyncio.get_running_loop()
    loop.call_soon(sys.exit, 7)
    await asyncio.sleep(0)

    async def interrupt() -> None:
        raise KeyboardInterrupt("left behind")

    async def exits() -> None:
        await asyncio.sleep(0)
        raise SystemExit(9)

    # One leftover a step: uvloop tells only the last of those raised in one loop iteration.
    leftovers = set()
    for tick, leftover in enumerate((interrupt, exits, None, None, None)):
        if leftover is not None:
            leftovers.add(loop.create_task(leftover()))
        await asyncio.sleep(0)
        ticks.append(tick)
    await asyncio.wait(leftovers)
    for leftover_task in leftovers:  # retrieved: no "never retrieved" line when they are freed
        assert isinstance(leftover_task.exception(), SystemExit | KeyboardInterrupt)
    return "done"


@pytest.mark.parametrize("new_loop", [uvloop.new_event_loop, asyncio.new_event_loop])
def test_a_stray_exit_is_logged_and_the_loop_goes_on(new_loop: type) -> None:
    ticks: list[int] = []
    with capture_logs() as logs:
        assert run_loop(_main_with_leftovers(ticks), new_loop) == "done"
    assert ticks == [0, 1, 2, 3, 4]
    strays = [line for line in logs if line["event"] == "broker.stray_exit"]
    assert sorted((line["error_type"], line["error"]) for line in strays) == [
        ("KeyboardInterrupt", "left behind"),
        ("SystemExit", "7"),
        ("SystemExit", "9"),
    ]


def test_the_main_coroutines_own_exit_is_not_swallowed() -> None:
    async def main() -> None:
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        run_loop(main(), uvloop.new_event_loop)
