"""``run_handler`` (daemon/testing/handlers.py) as a user's tests would use it: the run context,
the result, a crash, a timeout, an output refused, a cancel. Nothing else of the daemon is
imported; the one real timer is the handler's own timeout, which the test sets short."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from daemon.testing import (
    HandlerResult,
    RunContext,
    run_handler,
    start_handler,
)


async def echo(ctx: RunContext) -> dict[str, Any]:
    return {
        "task": ctx.task,
        "trigger": ctx.trigger,
        "args": list(ctx.args),
        "env": dict(ctx.env),
        "payload": ctx.payload,
        "context": dict(ctx.context),
        "run_id": ctx.run_id,
    }


async def test_a_handler_gets_the_run_context_and_its_output_is_the_result() -> None:
    result = await run_handler(
        echo, task="report", args=("--full",), env={"REGION": "eu"}, payload={"n": 3}
    )
    assert result.ok, result.reason
    assert result.reason == ""
    assert result.output == {
        "task": "report",
        "trigger": "external",
        "args": ["--full"],
        "env": {"REGION": "eu"},
        "payload": {"n": 3},
        "context": {},
        "run_id": result.run_id,
    }
    assert result.duration_ms >= 1
    assert not result.timed_out
    assert not result.cancelled


async def test_a_job_run_sees_its_job_attempt_and_occurrence() -> None:
    when = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    result = await run_handler(
        echo, trigger="schedule", job="nightly", attempt=2, scheduled_for=when
    )
    assert result.output is not None
    assert result.output["trigger"] == "schedule"
    assert result.output["context"] == {
        "JOB": "nightly",
        "ATTEMPT": "2",
        "SCHEDULED_FOR": "2026-03-29T01:00:00Z",
    }


async def test_a_handler_that_returns_none_succeeds_without_output() -> None:
    async def quiet(_ctx: RunContext) -> None:
        return None

    result = await run_handler(quiet)
    assert result.ok
    assert result.output is None


async def test_a_raising_handler_fails_with_the_exception_as_reason() -> None:
    async def broken(_ctx: RunContext) -> dict[str, Any]:
        raise ValueError("no such customer")

    result = await run_handler(broken)
    assert not result.ok
    assert result.reason == "ValueError: no such customer"
    assert result.output is None
    assert not result.timed_out


async def test_a_crash_beyond_exception_fails_the_run_and_not_the_test() -> None:
    async def exits(_ctx: RunContext) -> dict[str, Any]:
        raise SystemExit(3)

    result = await run_handler(exits)
    assert not result.ok
    assert result.reason == "SystemExit: 3"


async def test_a_slow_handler_times_out() -> None:
    never = asyncio.Event()

    async def hangs(_ctx: RunContext) -> dict[str, Any]:
        await never.wait()
        return {}

    result = await run_handler(hangs, timeout_s=0.05)
    assert not result.ok
    assert result.timed_out
    assert result.reason == "timed out after 0.05s"


async def test_a_handler_within_its_timeout_is_not_timed_out() -> None:
    result = await run_handler(echo, timeout_s=30)
    assert result.ok
    assert not result.timed_out


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ([1, 2], "handler returned a non-dict value"),
        ("done", "handler returned a non-dict value"),
        ({"when": datetime(2026, 1, 1)}, "handler returned output that is not JSON"),
        ({"ratio": float("nan")}, "handler returned output that is not JSON"),
        ({"ratios": [1.0, float("inf")]}, "handler returned output that is not JSON"),
        ({"low": -float("inf")}, "handler returned output that is not JSON"),
    ],
)
async def test_an_output_that_is_not_a_json_dict_is_refused(output: Any, reason: str) -> None:
    async def odd(_ctx: RunContext) -> Any:
        return output

    result = await run_handler(odd)
    assert not result.ok
    assert result.reason == reason
    assert result.output is None


async def test_an_output_whose_text_the_database_would_replace_is_kept() -> None:
    """A NUL or a lone surrogate is JSON: the run succeeds (its record replaces them)."""

    async def texts(_ctx: RunContext) -> Any:
        return {"nul": "a\x00b", "lone": "\ud800"}

    result = await run_handler(texts)
    assert (result.ok, result.output) == (True, {"nul": "a\x00b", "lone": "\ud800"})


async def test_a_running_handler_can_be_cancelled() -> None:
    never = asyncio.Event()
    entered = asyncio.Event()
    cleaned_up = asyncio.Event()

    async def waits(_ctx: RunContext) -> dict[str, Any]:
        entered.set()
        try:
            await never.wait()
        finally:
            cleaned_up.set()
        return {}

    run = start_handler(waits)
    await entered.wait()
    assert run.cancel()
    result = await run.result()
    assert isinstance(result, HandlerResult)
    assert result.cancelled
    assert not result.ok
    assert result.reason == "cancelled by request"
    assert cleaned_up.is_set()
    assert not run.cancel()  # it has ended


async def test_a_misspelt_option_is_refused_not_ignored() -> None:
    options: dict[str, Any] = {"timeout": 1.0}  # the task file's word, not the keyword
    with pytest.raises(TypeError, match=r"unexpected keyword arguments: timeout$"):
        await run_handler(echo, **options)
