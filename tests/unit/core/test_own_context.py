"""A handler's steps in a context of its own (daemon/core/own_context.py): its run context frozen,
what it sets kept to its run, its own timeouts and task groups, and a cancel of its own task
ending only its own run."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from typing import Any

import pytest

from daemon.core import executor as executor_module
from daemon.core.executor import CANCEL_REQUESTED
from daemon.core.runqueue import RunRequest
from daemon.core.tasks import RunContext
from daemon.wire.reasons import REASON_USER_CANCEL
from tests.unit.core.executing import executing, handler_task, result_of, waits_a_moment


def test_handler_context_is_the_frozen_run_context() -> None:
    import dataclasses

    from daemon.core.tasks import handler_context

    values = ("r1", "noop", "schedule", ("a",), {"K": "v"}, {"p": 1}, {"JOB": "j"})
    fast = handler_context(*values)
    assert fast == RunContext(*values)
    assert [f.name for f in dataclasses.fields(RunContext)] == list(vars(fast))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.task = "other"  # type: ignore[misc]


_SEEN_IN_RUN: contextvars.ContextVar[str] = contextvars.ContextVar("seen_in_run", default="")


async def test_what_a_handler_sets_in_its_context_stays_in_its_run() -> None:
    """Handlers are awaited in the executor's task, each step in a copy of its context: a
    context variable one run sets (across its awaits) is not what the next run finds."""
    seen: list[str] = []

    async def setter(run: RunContext) -> dict[str, Any] | None:
        seen.append(_SEEN_IN_RUN.get())
        _SEEN_IN_RUN.set(run.run_id)
        await asyncio.sleep(0)
        seen.append(_SEEN_IN_RUN.get())  # its own value, after the await
        return None

    async with executing(handler_task("setter", setter)) as (queue, _executor):
        first = queue.submit(RunRequest(task="setter"))
        second = queue.submit(RunRequest(task="setter"))
        assert (await result_of(first)).ok
        assert (await result_of(second)).ok
    assert seen == ["", first.id, "", second.id]


async def test_a_handler_may_use_timeouts_and_task_groups_of_its_own() -> None:
    """What a handler does with the current task (a timeout of its own, a task group whose
    child fails) is done to its run alone: the executor goes on with the next run."""

    async def busy(_run: RunContext) -> dict[str, Any] | None:
        timed_out = False
        try:
            async with asyncio.timeout(0.01):
                await asyncio.Event().wait()
        except TimeoutError:
            timed_out = True

        async def fail() -> None:
            raise ValueError("child failed")

        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(asyncio.Event().wait())
                group.create_task(fail())
        except ExceptionGroup as errors:
            return {"timed_out": timed_out, "errors": [str(e) for e in errors.exceptions]}
        return None

    async def after(_run: RunContext) -> dict[str, Any] | None:
        await asyncio.sleep(0.01)
        return {"after": True}

    async with executing(handler_task("busy", busy), handler_task("after", after)) as (
        queue,
        _executor,
    ):
        first = queue.submit(RunRequest(task="busy"))
        second = queue.submit(RunRequest(task="after"))
        result = await result_of(first)
        following = await result_of(second)
    assert (result.ok, result.output) == (True, {"timed_out": True, "errors": ["child failed"]})
    assert (following.ok, following.output) == (True, {"after": True})


async def test_a_handler_that_cancels_its_own_task_ends_only_its_own_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A handler awaited in the executor's task that cancels that task (and returns before
    the cancel reaches it), or that leaves a cancel behind, ends its own run at most: the
    cancel never reaches the next run, and the executor goes on."""
    monkeypatch.setattr(executor_module, "TURN_S", 60.0)  # no turn of the loop but the stray's

    async def cancels_itself(_run: RunContext) -> dict[str, Any] | None:
        current = asyncio.current_task()
        assert current is not None
        current.cancel()
        return {"returned": True}

    tasks = (handler_task("cancels", cancels_itself), handler_task("waits", waits_a_moment))
    async with executing(*tasks) as (queue, _executor):
        runs = [queue.submit(RunRequest(task=name)) for name in ("cancels", "waits") * 2]
        results = [await result_of(run) for run in runs]
    assert [(r.ok, r.output) for r in results] == [
        (True, {"returned": True}),
        (True, {"waited": True}),
    ] * 2


async def _taskgroup_leaving_a_cancel() -> None:
    """What a handler may do on Python 3.11: a task group whose child fails while the group
    exits does not take back the cancel it asked of the current task."""

    async def fail() -> None:
        await asyncio.sleep(0)
        raise ValueError("child failed")

    with contextlib.suppress(ExceptionGroup):
        async with asyncio.TaskGroup() as group:
            group.create_task(fail())


@pytest.mark.parametrize("ending", ["timeout", "cancel"])
async def test_a_cancel_left_on_the_task_does_not_change_how_the_run_ends(ending: str) -> None:
    """After a handler left a cancel on the task, its run's own timeout still says "timed
    out", a cancel still says "cancelled by request", and the next run finds nothing left."""
    entered = asyncio.Event()
    next_saw: list[int] = []

    async def leaves_then_waits(_run: RunContext) -> dict[str, Any] | None:
        await _taskgroup_leaving_a_cancel()
        entered.set()
        await asyncio.Event().wait()
        return None

    async def after(_run: RunContext) -> dict[str, Any] | None:
        current = asyncio.current_task()
        assert current is not None
        next_saw.append(current.cancelling())
        await asyncio.sleep(0)
        return {"after": True}

    timeout_s = 0.1 if ending == "timeout" else None
    tasks = (
        handler_task("leaves", leaves_then_waits, timeout_s=timeout_s),
        handler_task("after", after),
    )
    async with executing(*tasks) as (queue, executor):
        run = queue.submit(RunRequest(task="leaves"))
        following = queue.submit(RunRequest(task="after"))
        await entered.wait()
        if ending == "cancel":
            assert executor.cancel_current(run.id) == CANCEL_REQUESTED
        result = await result_of(run)
        assert (await result_of(following)).output == {"after": True}
        assert (await result_of(queue.submit(RunRequest(task="after")))).ok
    expected = "timed out after 0.1s" if ending == "timeout" else REASON_USER_CANCEL
    assert result.reason == expected
    assert next_saw == [0, 0]


async def test_a_handler_that_cancels_its_own_task_and_waits_fails_only_its_own_run() -> None:
    async def self_cancelling(_run: RunContext) -> dict[str, Any] | None:
        current = asyncio.current_task()
        assert current is not None
        current.cancel()
        await asyncio.sleep(0)
        return {"unreachable": True}

    async def after(_run: RunContext) -> dict[str, Any] | None:
        await asyncio.sleep(0)
        return {"after": True}

    tasks = (handler_task("self", self_cancelling), handler_task("after", after))
    async with executing(*tasks) as (queue, _executor):
        run = queue.submit(RunRequest(task="self"))
        following = queue.submit(RunRequest(task="after"))
        result = await result_of(run)
        assert (await result_of(following)).output == {"after": True}
    assert (result.ok, result.cancelled, result.reason) == (False, False, "CancelledError: ")


async def test_a_cancel_a_handler_leaves_for_later_does_not_end_the_executor() -> None:
    """A cancel of its task a handler schedules and returns before (here: on the next loop
    turn, while the executor waits for a run) is let go by: the executor serves on."""
    done_first = asyncio.Event()

    async def leaves_a_timer(_run: RunContext) -> dict[str, Any] | None:
        current = asyncio.current_task()
        assert current is not None
        asyncio.get_running_loop().call_soon(current.cancel)
        asyncio.get_running_loop().call_soon(done_first.set)
        return {"first": True}

    tasks = (handler_task("timer", leaves_a_timer), handler_task("waits", waits_a_moment))
    async with executing(*tasks) as (queue, _executor):
        assert (await result_of(queue.submit(RunRequest(task="timer")))).ok
        await done_first.wait()  # the cancel has reached the executor, waiting for a run
        result = await result_of(queue.submit(RunRequest(task="waits")))
    assert (result.ok, result.output) == (True, {"waited": True})
