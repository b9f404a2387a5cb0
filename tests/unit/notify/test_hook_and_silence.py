"""The command hook (its environment, its timeout, no child left behind), starts, and the
dead-man's switch (``max_silence``): one notice a silence, a warning while it lasts, and a
recovery at the next success."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import MutableMapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pytest

from daemon.core.runqueue import RunRequest
from daemon.notify.notifier import Notifier
from daemon.notify.silence import SilenceWatch, auto_limit_s
from daemon.schedules import parse_schedule
from tests.support.eventually import eventually_async
from tests.support.http_receiver import receiving
from tests.unit.notify.test_notifier import HANDLERS, failing, running
from tests.unit.tasks_toml import tasks_toml


async def _hook_ended(notifier: Notifier, result: Literal["sent", "failed"]) -> None:
    await eventually_async(
        lambda: notifier.record.kinds["command"][result] == 1, f"the hook {result}"
    )


async def test_the_command_hook_gets_the_notice_in_its_environment(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    dump = f"import json,os;json.dump(dict(os.environ), open({str(seen)!r}, 'x'))"
    text = failing(command={"command": ["python3", "-c", dump]})
    async with running(text) as parts:
        run = await parts.run("fails")
        await eventually_async(
            lambda: parts.notifier.record.kinds["command"]["sent"] == 1, "the hook"
        )
    env = json.loads(seen.read_text())
    assert env["RUNBROKER_NOTIFY_EVENT"] == "failure"
    assert env["RUNBROKER_TASK"] == "fails"
    assert env["RUNBROKER_RUN_ID"] == run.id
    assert env["RUNBROKER_OUTCOME"] == "failed"
    assert "it failed" in env["RUNBROKER_REASON"]
    document = json.loads(env["RUNBROKER_NOTIFICATION"])
    assert document["event"] == "failure"
    assert document["run_id"] == run.id


async def test_a_hook_past_its_timeout_is_ended_and_reaped(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    hang = f"echo $$ > {pid_file}; exec sleep 30"
    text = failing(command={"command": ["sh", "-c", hang], "timeout": "300ms"})
    async with running(text) as parts:
        await parts.run("fails")
        await eventually_async(
            lambda: parts.notifier.record.kinds["command"]["failed"] == 1, "give-up"
        )
    assert parts.notifier.record.last_failure is not None
    assert parts.notifier.record.last_failure["error"] == "no end within 0.3s (terminated)"
    _assert_reaped(int(pid_file.read_text()))


def _assert_reaped(pid: int) -> None:
    """``pid`` is gone and waited for: no zombie of it is left behind."""
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    assert not Path(f"/proc/{pid}").exists()


async def test_a_hook_that_cannot_start_is_counted_and_said() -> None:
    text = failing(command={"command": ["/nonexistent/notify-me"]})
    async with running(text) as parts:
        await parts.run("fails")
        await eventually_async(
            lambda: parts.notifier.record.kinds["command"]["failed"] == 1, "give-up"
        )
    assert parts.notifier.record.last_failure is not None
    assert parts.notifier.record.last_failure["error"].startswith("cannot start")


async def test_a_silent_task_is_told_once_warned_of_and_recovers() -> None:
    with receiving() as receiver:
        notify = {"max_silence": "300ms", "webhook": {"url": f"{receiver.url}/hook"}}
        text = tasks_toml({"quiet": {"handler": f"{HANDLERS}:works", "notify": notify}})
        async with running(text) as parts:
            got = await asyncio.to_thread(receiver.wait_for, 1)
            silence = json.loads(got[0].body)
            assert silence["event"] == "silence"
            assert silence["task"] == "quiet"
            assert silence["run_id"] is None
            assert silence["max_silence_s"] == 0.3
            assert silence["silent_for_s"] >= 0.3
            warnings = parts.notifier.health_warnings()
            assert len(warnings) == 1
            assert "task 'quiet' has not succeeded for" in warnings[0]
            status = parts.notifier.status()
            assert status is not None
            assert [item["task"] for item in status["silent"]] == ["quiet"]
            assert status["silent"][0]["last_success_at"] is None
            await parts.run("quiet")
            got = await asyncio.to_thread(receiver.wait_for, 2)
            assert json.loads(got[1].body)["event"] == "recovery"
            assert parts.notifier.health_warnings() == []
    assert len(receiver.requests) == 2  # one notice for the silence, however long it lasted


async def test_only_a_run_s_start_is_heard_not_its_lines() -> None:
    with receiving() as receiver:
        text = f"""
[tasks.chatty]
command = ["sh", "-c", "for i in 1 2 3 4 5; do echo $i; done"]
[tasks.chatty.notify.webhook]
url = "{receiver.url}/hook"
on = ["start"]
"""
        async with running(text) as parts:
            run = parts.queue.submit(RunRequest(task="chatty"))
            await run.wait()
            assert run.listeners == []  # the start listener left after the start
            got = await asyncio.to_thread(receiver.wait_for, 1)
    body: dict[str, Any] = json.loads(got[0].body)
    assert body["event"] == "start"
    assert body["outcome"] is None
    assert len(receiver.requests) == 1


def test_a_silence_is_counted_from_the_last_success_and_ends_with_the_next() -> None:
    now = [1000.0]
    watch = SilenceWatch(clock=lambda: now[0])
    watch.refresh({"a": 60.0, "b": 10.0})
    assert watch.next_due_in_s() == 10.0
    now[0] += 10
    assert [task for task, _ in watch.newly_silent()] == ["b"]
    assert watch.newly_silent() == []  # once a silence
    assert watch.next_due_in_s() == 50.0
    assert watch.succeeded("b") is True
    assert watch.succeeded("b") is False
    now[0] += 55  # a: 65 s since the start; b: 55 s since its success, a silence of its own
    assert [task for task, _ in watch.newly_silent()] == ["a", "b"]
    watch.refresh({"b": 10.0})  # a reload took a's max_silence away: its silence ends
    assert [item["task"] for item in watch.status()] == ["b"]


def test_an_auto_max_silence_is_two_of_the_longest_gaps_ahead() -> None:
    monday_noon = datetime(2026, 11, 30, 12, 0, tzinfo=UTC).timestamp()
    assert auto_limit_s(60.0, None, monday_noon) == 120.0
    assert auto_limit_s(None, parse_schedule("daily 02:00"), monday_noon) == 2 * 86400
    weekdays = parse_schedule("cron 0 9 * * 1-5")
    assert auto_limit_s(None, weekdays, monday_noon) == 2 * 3 * 86400  # Friday to Monday
    assert auto_limit_s(None, parse_schedule("at 2027-01-01T00:00:00Z"), monday_noon) is None
    assert auto_limit_s(None, None, monday_noon) is None


async def test_a_fault_in_the_sender_is_logged_and_the_sender_goes_on(
    logs: list[MutableMapping[str, Any]],
) -> None:
    text = failing(command={"command": ["true"]})
    async with running(text) as parts:
        faults = iter([RuntimeError("a bug")])

        def faulty() -> list[tuple[str, float]]:
            fault = next(faults, None)
            if fault is not None:
                raise fault
            return []

        parts.notifier.silence.newly_silent = faulty  # type: ignore[method-assign]
        await parts.run("fails")
        await _hook_ended(parts.notifier, "sent")
    assert [line["error"] for line in logs if line["event"] == "notify.sender_error"] == [
        "RuntimeError"
    ]
