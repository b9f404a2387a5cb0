"""Cancels of the executor's current run: the answer tells the truth, a handler that ignores or
swallows the cancel still gets one result, and the executor lives on to the next run."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from daemon.core.executor import CANCEL_ALREADY_REQUESTED, CANCEL_REQUESTED, Executor
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import RunQueue, RunRequest
from daemon.core.tasks import Handler, RunContext
from daemon.wire.reasons import REASON_SHUTDOWN_CANCEL, REASON_USER_CANCEL
from tests.unit.core.executing import (
    Recorder,
    executing,
    handler_task,
    registry_of,
    result_of,
    sh_task,
    waits_a_moment,
    waits_forever,
)


async def test_cancelling_a_handler_that_ignores_it_says_so_and_the_run_goes_on() -> None:
    """The answer tells the truth: the cancel was requested, the run has not ended, and a
    second request says it is already under way; the result is the handler's own."""
    entered = asyncio.Event()
    release = asyncio.Event()

    async def stubborn(_run: RunContext) -> dict[str, Any] | None:
        entered.set()
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue  # ignores it
        return {"finished": True}

    async with executing(handler_task("stubborn", stubborn)) as (queue, executor):
        run = queue.submit(RunRequest(task="stubborn"))
        await entered.wait()
        assert executor.cancel_current(run.id) == CANCEL_REQUESTED
        assert executor.cancel_current(run.id) == CANCEL_ALREADY_REQUESTED
        assert not run.is_done
        release.set()
        result = await result_of(run)
    assert (result.ok, result.cancelled, result.output) == (True, False, {"finished": True})


async def test_cancel_current_gives_cancelled_by_request() -> None:
    entered = asyncio.Event()

    forever = waits_forever(entered)

    async with executing(handler_task("wait", forever)) as (queue, executor):
        run = queue.submit(RunRequest(task="wait"))
        await entered.wait()
        assert not executor.cancel_current("some-other-id")
        assert executor.cancel_current(run.id)
        result = await result_of(run)
        assert not executor.cancel_current(run.id)  # nothing running any more
    assert (result.ok, result.cancelled, result.reason) == (False, True, REASON_USER_CANCEL)


@pytest.mark.parametrize("kind", ["handler", "command"])
async def test_cancel_right_after_started_keeps_the_executor_alive(kind: str) -> None:
    """The ``started`` listener runs before the attempt's first step: a cancel from there
    must still give ``cancelled by request`` and leave the executor serving."""

    forever = waits_forever()

    target = handler_task("wait", forever) if kind == "handler" else sh_task("wait", "sleep 60")
    async with executing(target, sh_task("next", "true")) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="wait"), recorder)
        following = queue.submit(RunRequest(task="next"))
        await recorder.saw("started").wait()
        assert executor.cancel_current(run.id)
        result = await result_of(run)
        assert (result.cancelled, result.reason) == (True, REASON_USER_CANCEL)
        assert (await result_of(following)).ok


async def _cancelled_by_its_owner(executor: Executor, once: asyncio.Event) -> None:
    """Run ``executor`` until ``once`` is set, then cancel its task as its owner does: the
    cancel reaches the owner."""
    consumer = asyncio.create_task(executor.run_forever())
    async with asyncio.timeout(10):
        await once.wait()
        consumer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await consumer


async def test_cancelling_the_executor_still_gives_the_run_a_result() -> None:
    started = asyncio.Event()

    forever = waits_forever(started)

    queue = RunQueue(capacity=1)
    executor = Executor(
        queue, registry_of(handler_task("wait", forever)), ChildSupervisor(), default_grace_s=1.0
    )
    run = queue.submit(RunRequest(task="wait"))
    await _cancelled_by_its_owner(executor, once=started)
    assert run.result is not None
    assert run.result.reason == REASON_SHUTDOWN_CANCEL
    assert executor.idle


def _swallowing(entered: asyncio.Event, output: dict[str, Any]) -> Handler:
    """A handler that sets ``entered`` as it starts to wait, swallows the cancel of its wait
    and returns ``output``."""

    async def swallow(_run: RunContext) -> dict[str, Any] | None:
        entered.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        return output

    return swallow


async def test_a_cancel_the_handler_swallowed_is_not_left_for_the_next_run() -> None:
    entered = asyncio.Event()

    swallow = _swallowing(entered, {"swallowed": True})

    tasks = (handler_task("swallow", swallow), handler_task("waits", waits_a_moment))
    async with executing(*tasks) as (queue, executor):
        run = queue.submit(RunRequest(task="swallow"))
        following = queue.submit(RunRequest(task="waits"))
        await entered.wait()
        assert executor.cancel_current(run.id) == CANCEL_REQUESTED
        assert (await result_of(run)).output == {"swallowed": True}
        result = await result_of(following)
    assert (result.ok, result.cancelled, result.output) == (True, False, {"waited": True})


async def test_abandoning_a_handler_that_ignores_cancellation_gives_its_run_a_result() -> None:
    entered = asyncio.Event()
    release = asyncio.Event()

    async def stubborn(_run: RunContext) -> dict[str, Any] | None:
        entered.set()
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()
        return None

    async with executing(handler_task("stubborn", stubborn)) as (queue, executor):
        run = queue.submit(RunRequest(task="stubborn"))
        await entered.wait()
        assert executor.abandon_running() is run
        assert executor.abandon_running() is None  # it has its result: once
        result = await result_of(run)
        assert (result.ok, result.cancelled, result.reason) == (False, True, REASON_SHUTDOWN_CANCEL)
        release.set()  # the handler's own end changes nothing
        following = await result_of(queue.submit(RunRequest(task="stubborn")))
        assert following.ok  # released: the next run returns at once
    assert run.result is result


async def test_a_cancel_after_a_commands_timeout_fired_is_already_requested() -> None:
    script = "trap 'echo term' TERM; echo up; while :; do sleep 0.05; done"
    task = sh_task("slow", script, timeout_s=0.2, grace_s=0.5)
    async with executing(task) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="slow"), recorder)
        await recorder.saw("line:term").wait()  # the timeout fired: SIGTERM, the grace runs
        assert executor.cancel_current(run.id) == CANCEL_ALREADY_REQUESTED
        result = await result_of(run)
    assert (result.timed_out, result.cancelled, result.reason) == (
        True,
        False,
        "timed out after 0.2s",
    )


async def test_a_cancel_during_a_handlers_clean_up_after_its_timeout_waits_for_it() -> None:
    cleaning, release = asyncio.Event(), asyncio.Event()
    cleaned: list[bool] = []

    async def cleans_up(_run: RunContext) -> dict[str, Any] | None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cleaning.set()
            await release.wait()  # a rollback, a flush
            cleaned.append(True)
            raise
        return None

    async with executing(handler_task("clean", cleans_up, timeout_s=0.05)) as (
        queue,
        executor,
    ):
        run = queue.submit(RunRequest(task="clean"))
        await cleaning.wait()
        assert executor.cancel_current(run.id) == CANCEL_ALREADY_REQUESTED
        release.set()
        result = await result_of(run)
    assert cleaned == [True]
    assert (result.timed_out, result.reason) == (True, "timed out after 0.05s")


async def test_the_owners_cancel_ends_the_executor_though_the_handler_swallowed_it() -> None:
    entered = asyncio.Event()

    swallows = _swallowing(entered, {"finished": True})

    queue = RunQueue(capacity=4)
    executor = Executor(
        queue,
        registry_of(handler_task("swallows", swallows)),
        ChildSupervisor(),
        default_grace_s=1.0,
    )
    run = queue.submit(RunRequest(task="swallows"))
    waiting = queue.submit(RunRequest(task="swallows"))
    await _cancelled_by_its_owner(executor, once=entered)
    assert run.result is not None
    assert run.result.output == {"finished": True}
    assert waiting.result is None  # not started: the caller's shutdown decides its result
