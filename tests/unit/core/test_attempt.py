"""One attempt of a run (daemon/core/attempt.py): its timeouts, soft and hard, and a command's
grace before SIGKILL, at a cancel, a timeout or the daemon's shutdown; and the exit status it
reports."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from daemon.core.executor import CANCEL_REQUESTED
from daemon.core.runqueue import RunRequest
from daemon.core.tasks import RunContext
from daemon.wire.reasons import REASON_SHUTDOWN_CANCEL, REASON_USER_CANCEL
from tests.unit.core.executing import (
    Recorder,
    executing,
    handler_task,
    result_of,
    sh_task,
    waits_forever,
)


async def test_timeout_of_a_handler_and_of_a_command() -> None:
    forever = waits_forever()

    tasks = (
        handler_task("stuck", forever, timeout_s=0.1),
        sh_task("slow", "exec sleep 30", timeout_s=0.2),
    )
    async with executing(*tasks) as (queue, _):
        stuck = await result_of(queue.submit(RunRequest(task="stuck")))
        slow = await result_of(queue.submit(RunRequest(task="slow")))
    assert (stuck.ok, stuck.reason) == (False, "timed out after 0.1s")
    assert (slow.ok, slow.reason) == (False, "timed out after 0.2s")
    assert (stuck.timed_out, slow.timed_out) == (True, True)  # the metrics' timed_out
    assert slow.duration_ms < 5000  # sleep took its SIGTERM; not the 30 s


async def test_a_handlers_own_timeout_error_is_not_the_tasks_timeout() -> None:
    async def upstream(_run: RunContext) -> dict[str, Any] | None:
        raise TimeoutError("upstream did not answer")

    tasks = (handler_task("plain", upstream), handler_task("bounded", upstream, timeout_s=30.0))
    async with executing(*tasks) as (queue, _):
        plain = await result_of(queue.submit(RunRequest(task="plain")))
        bounded = await result_of(queue.submit(RunRequest(task="bounded")))
    assert plain.reason == "TimeoutError: upstream did not answer"
    assert bounded.reason == "TimeoutError: upstream did not answer"
    assert (plain.timed_out, bounded.timed_out) == (False, False)


async def test_soft_timeout_emits_overdue_and_the_run_goes_on() -> None:
    release = asyncio.Event()

    async def slow(_run: RunContext) -> dict[str, Any] | None:
        await release.wait()
        return {"finished": True}

    async with executing(handler_task("slow", slow, soft_timeout_s=0.05)) as (queue, _):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="slow"), recorder)
        await recorder.saw("overdue").wait()
        assert not run.is_done
        release.set()
        result = await result_of(run)
    assert result.ok
    assert result.output == {"finished": True}
    assert recorder.kinds() == ["queued", "started", "overdue", "done"]
    overdue = recorder.events[2][1]
    assert overdue["reason"] == "running longer than 0.05s"
    assert overdue["id"] == run.id


# A shell runs its TERM trap only after its foreground child ends, so "ready" comes from that
# child: once it is seen, SIGTERM to the group ends the child and the trap runs at once.
IGNORE_TERM = (
    "trap 'echo got-term' TERM; echo $$; while :; do sh -c 'echo ready; exec sleep 1'; done"
)


async def test_a_term_ignoring_command_is_killed_after_its_grace() -> None:
    async with executing(sh_task("stubborn", IGNORE_TERM, grace_s=0.3)) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="stubborn"), recorder)
        await recorder.saw("line:ready").wait()
        loop = asyncio.get_running_loop()
        cancelled_at = loop.time()
        assert executor.cancel_current(run.id)
        result = await result_of(run)
        waited_s = loop.time() - cancelled_at
    assert result.reason == REASON_USER_CANCEL
    assert "got-term" in recorder.lines, "no SIGTERM first"
    assert 0.3 <= waited_s < 5, "SIGKILL did not come after the task's grace"
    with pytest.raises(ProcessLookupError):
        os.kill(int(recorder.lines[0]), 0)


async def test_shutdown_running_caps_the_grace() -> None:
    task = sh_task("stubborn", "trap '' TERM; echo ready; exec sleep 60", grace_s=60.0)
    async with executing(task) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="stubborn"), recorder)
        await recorder.saw("line:ready").wait()
        loop = asyncio.get_running_loop()
        stopped_at = loop.time()
        assert executor.shutdown_running(grace_cap_s=0.2)
        result = await result_of(run)
        assert loop.time() - stopped_at < 5, "the task's 60 s grace was not capped"
    assert (result.ok, result.cancelled, result.reason) == (False, True, REASON_SHUTDOWN_CANCEL)


@pytest.mark.parametrize(
    ("script", "exit_code"),
    [
        ("trap 'exit 0' TERM; echo ready; while :; do sleep 0.05; done", 0),  # clean exit
        ("trap 'exit 3' TERM; echo ready; while :; do sleep 0.05; done", 3),
        ("echo ready; exec sleep 60", 128 + 15),  # killed by SIGTERM, the shell's way
        ("trap '' TERM; echo ready; exec sleep 60", 128 + 9),  # SIGKILLed after the grace
    ],
)
async def test_a_command_stopped_at_shutdown_reports_the_exit_status_it_really_had(
    script: str, exit_code: int
) -> None:
    task = sh_task("job", script, grace_s=0.3)
    async with executing(task) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="job"), recorder)
        await recorder.saw("line:ready").wait()
        assert executor.shutdown_running(grace_cap_s=5.0)
        result = await result_of(run)
    assert (result.ok, result.cancelled, result.reason) == (False, True, REASON_SHUTDOWN_CANCEL)
    assert result.exit_code == exit_code
    (done,) = [fields for kind, fields in recorder.events if kind == "done"]
    assert (done["ok"], done["reason"], done["exit_code"]) == (
        False,
        REASON_SHUTDOWN_CANCEL,
        exit_code,
    )


async def test_a_cancelled_or_timed_out_command_reports_its_exit_status_too() -> None:
    cancelled = sh_task("cancelled", "trap 'exit 0' TERM; echo ready; while :; do sleep 0.05; done")
    slow = sh_task("slow", "exec sleep 60", timeout_s=0.2)
    async with executing(cancelled, slow) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="cancelled"), recorder)
        await recorder.saw("line:ready").wait()
        assert executor.cancel_current(run.id) == CANCEL_REQUESTED
        by_request = await result_of(run)
        timed_out = await result_of(queue.submit(RunRequest(task="slow")))
    assert (by_request.reason, by_request.exit_code) == (REASON_USER_CANCEL, 0)
    assert (timed_out.timed_out, timed_out.exit_code) == (True, 128 + 15)


async def test_a_second_cancel_does_not_cut_the_grace_short() -> None:
    # The job ignores SIGTERM; its grace must run out (then SIGKILL) however often it is
    # cancelled, and the run must not end while its process group still lives.
    script = "trap '' TERM; echo $$; while :; do sleep 0.05; done"
    async with executing(sh_task("stubborn", script, grace_s=0.5)) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="stubborn"), recorder)
        await recorder.saw("output").wait()
        pgid = int(recorder.lines[0])  # the job's shell leads its own process group
        assert executor.cancel_current(run.id)
        await asyncio.sleep(0)  # let the first cancel reach the job (SIGTERM, grace begins)
        assert executor.cancel_current(run.id)  # again, during the grace
        result = await result_of(run)
        assert result.cancelled
        assert result.reason == "cancelled by request"
        # The job's shell (the group's leader, which ignores SIGTERM) was SIGKILLed and waited
        # for before the run ended: it no longer exists, not even as a zombie.
        assert not os.path.exists(f"/proc/{pgid}")  # noqa: ASYNC240 (a /proc lookup)
