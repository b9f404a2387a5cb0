"""The executor: one run at a time in arrival order, and exactly one true result for each."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from daemon.core import executor as executor_module
from daemon.core.runqueue import Event, Run, RunRequest
from daemon.core.tasks import RunContext, Task
from daemon.wire.codec import encode_event
from tests.unit.core.executing import Recorder, executing, handler_task, result_of, sh_task


class _OddBaseException(BaseException):
    """A handler's own BaseException subclass, neither an Exception nor a system one."""


async def test_handler_output_dict_and_its_context() -> None:
    seen: list[RunContext] = []

    async def handler(run: RunContext) -> dict[str, Any] | None:
        seen.append(run)
        return {"rows": 3, "task": run.task}

    task = handler_task("report", handler, allow_args=True, allow_env=frozenset({"LEVEL"}))
    async with executing(task) as (queue, _executor):
        recorder = Recorder()
        request = RunRequest(
            task="report",
            trigger="schedule",
            args=("-v",),
            env={"LEVEL": "2"},
            payload={"day": "mon"},
            job="nightly",
        )
        run = queue.submit(request, recorder)
        result = await result_of(run)
    assert result.ok
    assert result.output == {"rows": 3, "task": "report"}
    assert result.duration_ms >= 1
    assert recorder.kinds() == ["queued", "started", "done"]
    assert recorder.events[-1][1]["output"] == {"rows": 3, "task": "report"}
    context = seen[0]
    assert (context.run_id, context.task, context.trigger) == (run.id, "report", "schedule")
    assert context.args == ("-v",)
    assert dict(context.env) == {"LEVEL": "2"}
    assert context.payload == {"day": "mon"}
    assert dict(context.context) == {"JOB": "nightly"}


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ValueError("no such customer"), "ValueError: no such customer"),
        (SystemExit(3), "SystemExit: 3"),  # not even sys.exit() in a handler ends the daemon
        (KeyboardInterrupt(), "KeyboardInterrupt: "),
        (GeneratorExit("x"), "GeneratorExit: x"),  # a BaseException, not an Exception
        (_OddBaseException("odd"), "_OddBaseException: odd"),
        # Nobody cancelled the run: a CancelledError of the handler's own is a failure.
        (asyncio.CancelledError("mine"), "CancelledError: mine"),
    ],
)
async def test_a_raising_handler_fails_its_run_and_the_executor_goes_on(
    error: BaseException, reason: str
) -> None:
    async def boom(_run: RunContext) -> dict[str, Any] | None:
        raise error

    async def fine(_run: RunContext) -> dict[str, Any] | None:
        return None

    async with executing(handler_task("boom", boom), handler_task("fine", fine)) as (queue, _):
        failed = queue.submit(RunRequest(task="boom"))
        after = queue.submit(RunRequest(task="fine"))
        failing = await result_of(failed)
        assert not failing.ok
        assert failing.reason == reason
        assert not failing.cancelled
        following = await result_of(after)
    assert following.ok
    assert following.output is None


async def test_a_handler_returning_a_non_dict_fails() -> None:
    async def bad(_run: RunContext) -> Any:
        return [1, 2]

    async with executing(handler_task("bad", bad)) as (queue, _):
        result = await result_of(queue.submit(RunRequest(task="bad")))
    assert not result.ok
    assert result.reason == "handler returned a non-dict value"


async def test_unknown_task_gets_a_failed_result_without_starting() -> None:
    async with executing(sh_task("known", "true")) as (queue, _):
        recorder = Recorder()
        result = await result_of(queue.submit(RunRequest(task="ghost"), recorder))
        assert not result.ok
        assert result.reason == "unknown task 'ghost': this container defines known"
        assert recorder.kinds() == ["queued", "done"]
        # A request its task does not allow is refused the same way, even if it got queued.
        refused = await result_of(queue.submit(RunRequest(task="known", args=("x",))))
        assert refused.reason == "task 'known' does not accept args"
        assert (await result_of(queue.submit(RunRequest(task="known")))).ok


async def test_runs_execute_one_at_a_time_in_arrival_order() -> None:
    order: list[str] = []
    active = 0
    overlap = False

    def make(name: str) -> Task:
        async def handler(_run: RunContext) -> dict[str, Any] | None:
            nonlocal active, overlap
            active += 1
            overlap = overlap or active > 1
            await asyncio.sleep(0)  # give a second consumer a chance to interleave
            order.append(name)
            active -= 1
            return None

        return handler_task(name, handler)

    names = ["c", "a", "d", "b", "a"]
    async with executing(*(make(name) for name in "abcd")) as (queue, _):
        runs = [queue.submit(RunRequest(task=name)) for name in names]
        for run in runs:
            assert (await result_of(run)).ok
    assert order == names
    assert not overlap


async def test_command_exit_codes_and_reasons() -> None:
    tasks = (
        sh_task("zero", "exit 0"),
        sh_task("three", "exit 3"),
        sh_task("term", "kill -TERM $$"),
        sh_task("kill", "kill -KILL $$"),
    )
    async with executing(*tasks) as (queue, _):
        results = {
            name: await result_of(queue.submit(RunRequest(task=name)))
            for name in ("zero", "three", "term", "kill")
        }
    assert (results["zero"].ok, results["zero"].exit_code, results["zero"].reason) == (True, 0, "")
    assert (results["three"].ok, results["three"].exit_code) == (False, 3)
    assert results["three"].reason == "exit status 3"
    assert (results["term"].exit_code, results["term"].reason) == (143, "killed by SIGTERM")
    assert (results["kill"].exit_code, results["kill"].reason) == (137, "killed by SIGKILL")


async def test_command_output_is_streamed_as_events() -> None:
    async with executing(sh_task("talk", "echo out; echo err >&2")) as (queue, _):
        recorder = Recorder()
        assert (await result_of(queue.submit(RunRequest(task="talk"), recorder))).ok
    outputs = [
        (f["stream"], line)
        for kind, f in recorder.events
        if kind == "output"
        for line in f["lines"]
    ]
    assert sorted(outputs) == [("stderr", "err"), ("stdout", "out")]
    assert recorder.kinds()[-1] == "done"


async def test_output_that_is_not_json_fails_the_run_not_the_daemon() -> None:
    async def tuple_keys(_run: RunContext) -> dict[str, Any] | None:
        return {(1, 2): "x"}  # type: ignore[dict-item]

    async def surrogate(_run: RunContext) -> dict[str, Any] | None:
        raise ValueError("bad byte \udc80")

    async def fine(_run: RunContext) -> dict[str, Any] | None:
        return None

    tasks = (handler_task("keys", tuple_keys), handler_task("sur", surrogate))
    async with executing(*tasks, handler_task("fine", fine)) as (queue, _):
        wire: list[bytes] = []

        def to_wire(_run: Run, event: Event) -> None:
            fields = dict(event.fields)
            wire.append(encode_event(event.kind, bool(fields.pop("ok", True)), **fields))

        keys = queue.submit(RunRequest(task="keys"), to_wire)
        sur = queue.submit(RunRequest(task="sur"), to_wire)
        after = queue.submit(RunRequest(task="fine"))
        assert (await result_of(keys)).reason == "handler returned output that is not JSON"
        assert (await result_of(sur)).reason == "ValueError: bad byte \udc80"
        assert (await result_of(after)).ok
    assert json.loads(wire[-1])["reason"] == "ValueError: bad byte \udc80"


async def test_runs_that_never_wait_still_let_the_loop_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Handlers that return at once run back to back in one step of the executor, but for
    no longer than TURN_S: then the loop turns (here, with TURN_S 0, after every run)."""
    monkeypatch.setattr(executor_module, "TURN_S", 0.0)
    turned = asyncio.Event()
    seen: list[bool] = []

    async def instant(_run: RunContext) -> dict[str, Any] | None:
        seen.append(turned.is_set())
        return None

    async with executing(handler_task("instant", instant)) as (queue, _executor):
        assert (await result_of(queue.submit(RunRequest(task="instant")))).ok  # waiting for runs
        seen.clear()
        runs = [queue.submit(RunRequest(task="instant")) for _ in range(5)]
        asyncio.get_running_loop().call_soon(turned.set)
        for run in runs:
            assert (await result_of(run)).ok
    assert seen[0] is False
    assert seen[-1] is True


async def test_what_a_crashing_handler_bound_in_its_context_is_on_its_crash_line() -> None:
    """structlog's context variables a handler binds are on its run's ``run.crashed`` line,
    and on no line of the next run."""

    async def binds_then_fails(_run: RunContext) -> dict[str, Any] | None:
        structlog.contextvars.bind_contextvars(order_id="o-17")
        await asyncio.sleep(0)
        raise ValueError("no such order")

    tasks = (handler_task("binds", binds_then_fails), handler_task("fails", _binds_nothing))
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as lines:
        async with executing(*tasks) as (queue, _):
            assert not (await result_of(queue.submit(RunRequest(task="binds")))).ok
            assert not (await result_of(queue.submit(RunRequest(task="fails")))).ok
    crashed = [line for line in lines if line["event"] == "run.crashed"]
    assert [(line["task"], line.get("order_id")) for line in crashed] == [
        ("binds", "o-17"),
        ("fails", None),
    ]
    assert all("order_id" not in line for line in lines if line["event"] != "run.crashed")


async def _binds_nothing(_run: RunContext) -> dict[str, Any] | None:
    raise ValueError("plain failure")


async def test_a_queue_subscriber_that_raises_never_stops_the_executor() -> None:
    async def fine(_run: RunContext) -> dict[str, Any] | None:
        return None

    def broken(_run: Run) -> None:
        raise RuntimeError("a subscriber's bug")

    async with executing(handler_task("fine", fine)) as (queue, _):
        queue.on_submit(broken)
        queue.on_finish(broken)
        first = queue.submit(RunRequest(task="fine"))
        second = queue.submit(RunRequest(task="fine"))
        assert (await result_of(first)).ok
        assert (await result_of(second)).ok  # the executor took the next run
