"""A handler that swallows its cancellation past its grace (daemon/core/strays.py, the
executor's give-up): its run gets the result it was stopped for, the next run runs, and the
stray is owned, listed and awaited until it ends."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import MutableMapping
from typing import Any

import pytest

from daemon.core.executor import CANCEL_REQUESTED, Executor
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import RunQueue, RunRequest
from daemon.core.tasks import Handler, RunContext
from daemon.wire.reasons import REASON_USER_CANCEL
from tests.unit.core.executing import (
    Recorder,
    executing,
    handler_task,
    registry_of,
    result_of,
    sh_task,
    waits_a_moment,
)


def _deaf(entered: asyncio.Event, release: asyncio.Event, ended: list[str]) -> Handler:
    """A handler that swallows every cancellation until ``release`` is set."""

    async def deaf(_run: RunContext) -> dict[str, Any] | None:
        entered.set()
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()
        ended.append("deaf")
        return {"late": True}

    return deaf


async def test_a_handler_that_swallows_its_timeout_is_given_up_on_and_the_next_run_runs(
    logs: list[MutableMapping[str, Any]],
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    ended: list[str] = []
    deaf = handler_task("deaf", _deaf(entered, release, ended), timeout_s=0.05, grace_s=0.05)
    async with executing(deaf, handler_task("next", waits_a_moment)) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="deaf"), recorder)
        following = queue.submit(RunRequest(task="next"))
        result = await result_of(run)
        assert (result.timed_out, result.reason) == (True, "timed out after 0.05s")
        assert recorder.kinds()[-1] == "done"  # its trigger heard its end
        assert (await result_of(following)).output == {"waited": True}  # the queue moved on
        assert [stray.run_id for stray in executor.strays.listed()] == [run.id]
        assert ended == []  # the handler still runs
        release.set()
        await executor.strays.wait()
        assert ended == ["deaf"]
        assert run.result is result  # its late return changes nothing
    events = [line["event"] for line in logs]
    assert events.count("run.stray") == 1
    assert events.count("run.stray_ended") == 1
    done = [line for line in logs if line["event"] == "run.done" and line["run_id"] == run.id]
    assert len(done) == 1
    assert done[0]["stray"] is True


async def test_a_handler_that_swallows_a_cancel_by_request_is_given_up_on_after_its_grace() -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    ended: list[str] = []
    deaf = handler_task("deaf", _deaf(entered, release, ended), grace_s=0.05)
    async with executing(deaf, handler_task("next", waits_a_moment)) as (queue, executor):
        run = queue.submit(RunRequest(task="deaf"))
        following = queue.submit(RunRequest(task="next"))
        await entered.wait()
        assert executor.cancel_current(run.id) == CANCEL_REQUESTED
        result = await result_of(run)
        assert (result.cancelled, result.reason) == (True, REASON_USER_CANCEL)
        assert (await result_of(following)).ok
        assert len(executor.strays) == 1
        release.set()
        await executor.strays.wait()


async def test_a_stray_never_touches_the_attempt_that_runs_when_it_ends() -> None:
    """The stray keeps the attempt runner it ran in: its end clears nothing of the next
    attempt's, whose own timeout still ends it."""
    entered, release = asyncio.Event(), asyncio.Event()
    ended: list[str] = []
    slow_entered = asyncio.Event()

    async def slow(_run: RunContext) -> dict[str, Any] | None:
        slow_entered.set()
        await asyncio.Event().wait()
        return None

    deaf = handler_task("deaf", _deaf(entered, release, ended), timeout_s=0.05, grace_s=0.05)
    tasks = (deaf, handler_task("slow", slow, timeout_s=0.3))
    async with executing(*tasks) as (queue, executor):
        run = queue.submit(RunRequest(task="deaf"))
        following = queue.submit(RunRequest(task="slow"))
        assert (await result_of(run)).timed_out
        await slow_entered.wait()
        release.set()  # the stray ends while the next attempt runs
        await executor.strays.wait()
        result = await result_of(following)
    assert (result.timed_out, result.reason) == (True, "timed out after 0.3s")


async def test_the_executor_waits_for_its_strays_and_its_owners_cancel_reaches_them() -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    ended: list[str] = []
    deaf = handler_task("deaf", _deaf(entered, release, ended), timeout_s=0.05, grace_s=0.05)
    queue = RunQueue(capacity=4)
    executor = Executor(queue, registry_of(deaf), ChildSupervisor(), default_grace_s=1.0)
    run = queue.submit(RunRequest(task="deaf"))
    queue.close()  # this one run: the executor then waits for its stray
    consumer = asyncio.create_task(executor.run_forever())
    async with asyncio.timeout(10):
        assert (await result_of(run)).timed_out
        assert len(executor.strays) == 1
        assert not consumer.done()  # the stray is owned: the executor has not ended
        consumer.cancel()  # the shutdown's budget ran out
        release.set()  # the stray answers this cancel (or the shutdown ends the process)
        with pytest.raises(asyncio.CancelledError):
            await consumer
    assert ended == ["deaf"]
    assert len(executor.strays) == 0


async def test_a_stray_that_raises_at_its_end_is_logged_not_left_unretrieved(
    logs: list[MutableMapping[str, Any]],
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def deaf_then_raises(_run: RunContext) -> dict[str, Any] | None:
        entered.set()
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()
        raise RuntimeError("late")

    deaf = handler_task("deaf", deaf_then_raises, timeout_s=0.05, grace_s=0.05)
    async with executing(deaf) as (queue, executor):
        assert (await result_of(queue.submit(RunRequest(task="deaf")))).timed_out
        release.set()
        await executor.strays.wait()
    assert [line["event"] for line in logs].count("run.stray_ended") == 1


async def test_a_command_that_ignores_sigterm_is_killed_after_its_grace_not_given_up_on() -> None:
    script = "trap 'echo term' TERM; echo up; while :; do sleep 0.05; done"
    stubborn = sh_task("stubborn", script, timeout_s=0.2, grace_s=0.3)
    async with executing(stubborn, sh_task("next", "true")) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="stubborn"), recorder)
        following = queue.submit(RunRequest(task="next"))
        result = await result_of(run)
        assert (result.timed_out, result.exit_code) == (True, 137)  # SIGKILLed after its grace
        assert "term" in recorder.lines  # it had its SIGTERM, and ignored it
        assert (await result_of(following)).ok
        assert len(executor.strays) == 0
