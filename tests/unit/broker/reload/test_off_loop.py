"""A reload's check off the event loop (daemon/broker/reload/off_loop.py): the loop runs while
the work does, the work's result or error comes back, and no collection runs meanwhile."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from daemon.broker.reload.off_loop import no_collections, off_the_loop


async def test_the_loop_runs_while_the_work_does() -> None:
    """The work waits for a callback of the loop: it could not end if it held the loop."""
    loop_ran = threading.Event()

    def work() -> str:
        assert loop_ran.wait(timeout=30)
        return "checked"

    loop = asyncio.get_running_loop()
    loop.call_soon(loop_ran.set)
    assert await off_the_loop(work) == "checked"


async def test_an_error_comes_back_to_the_waiter() -> None:
    def work() -> None:
        raise ValueError("a bad file")

    with pytest.raises(ValueError, match="a bad file"):
        await off_the_loop(work)


@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit, GeneratorExit])
async def test_a_base_exception_never_leaves_as_itself(raised: type[BaseException]) -> None:
    """It would end PID 1's loop: it comes back as a RuntimeError naming it."""

    def work() -> None:
        raise raised("at import")

    with pytest.raises(RuntimeError, match=f"{raised.__name__}: at import"):
        await off_the_loop(work)


async def test_a_waiter_cancelled_leaves_the_work_to_end_unheard() -> None:
    release = threading.Event()
    ended = threading.Event()

    def work() -> None:
        release.wait(timeout=30)
        ended.set()

    waiter = asyncio.create_task(off_the_loop(work))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    release.set()
    assert await asyncio.to_thread(ended.wait, 30)


def test_no_collection_within_the_block_and_the_collector_as_it_was_after() -> None:
    assert gc.isenabled()
    with no_collections():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with no_collections():
            assert not gc.isenabled()
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()
