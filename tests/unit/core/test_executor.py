"""The executor: one run at a time in arrival order, and exactly one true result for each."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from daemon.core import executor as executor_module
from daemon.core.executor import CANCEL_ALREADY_REQUESTED, CANCEL_REQUESTED, Executor
from daemon.core.jobenv import job_environment
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import (
    Event,
    Run,
    RunQueue,
    RunRequest,
    RunResult,
)
from daemon.core.tasks import Handler, RunContext, Task, TaskRegistry
from daemon.wire.codec import encode_event
from daemon.wire.reasons import REASON_SHUTDOWN_CANCEL, REASON_USER_CANCEL
from tests.unit.conftest import JOB_ENV

# Settings of the daemon that must never reach a job, next to what should.
DAEMON_ENV = {
    **JOB_ENV,
    "HOME": "/root",
    "RUNBROKER_DATABASE_URL": "postgres://app:hunter2@db/app",
    "RUNBROKER_GRACE": "5s",
    "RUNBROKER_SOCKET": "/run/runbroker/runbroker.sock",
}


@dataclass
class Recorder:
    """A run listener: every event, and asyncio events to wait on."""

    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    seen: dict[str, asyncio.Event] = field(default_factory=dict)

    def saw(self, name: str) -> asyncio.Event:
        return self.seen.setdefault(name, asyncio.Event())

    def __call__(self, _run: Run, event: Event) -> None:
        self.events.append((event.kind, dict(event.fields)))
        self.saw(event.kind).set()
        if event.kind == "output":
            for line in event.fields["lines"]:
                self.lines.append(line)
                self.saw(f"line:{line}").set()

    def kinds(self) -> list[str]:
        return [kind for kind, _fields in self.events]


def _registry(*tasks: Task) -> TaskRegistry:
    return TaskRegistry({task.name: task for task in tasks})


def _sh(name: str, script: str, **options: Any) -> Task:
    return Task(name=name, command=("sh", "-c", script, name), **options)


@asynccontextmanager
async def executing(
    *tasks: Task, base_env: Mapping[str, str] | None = None, grace_s: float = 5.0
) -> AsyncIterator[tuple[RunQueue, Executor]]:
    queue = RunQueue(capacity=16)
    executor = Executor(
        queue,
        _registry(*tasks),
        ChildSupervisor(),
        default_grace_s=grace_s,
        base_env=JOB_ENV if base_env is None else base_env,
    )
    consumer = asyncio.create_task(executor.run_forever())
    try:
        async with asyncio.timeout(20):
            yield queue, executor
    finally:
        queue.close()
        queue.cancel_all()
        executor.shutdown_running(0.0)
        async with asyncio.timeout(10):
            await consumer


async def _result(run: Run) -> RunResult:
    async with asyncio.timeout(15):
        return await run.wait()


class _OddBaseException(BaseException):
    """A handler's own BaseException subclass, neither an Exception nor a system one."""


def _handler_task(name: str, handler: Handler, **options: Any) -> Task:
    return Task(name=name, handler=handler, handler_ref=f"tests:{name}", **options)


async def test_handler_output_dict_and_its_context() -> None:
    seen: list[RunContext] = []

    async def handler(run: RunContext) -> dict[str, Any] | None:
        seen.append(run)
        return {"rows": 3, "task": run.task}

    task = _handler_task("report", handler, allow_args=True, allow_env=frozenset({"LEVEL"}))
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
        result = await _result(run)
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

    async with executing(_handler_task("boom", boom), _handler_task("fine", fine)) as (queue, _):
        failed = queue.submit(RunRequest(task="boom"))
        after = queue.submit(RunRequest(task="fine"))
        failing = await _result(failed)
        assert not failing.ok
        assert failing.reason == reason
        assert not failing.cancelled
        following = await _result(after)
    assert following.ok
    assert following.output is None


async def test_a_handler_returning_a_non_dict_fails() -> None:
    async def bad(_run: RunContext) -> Any:
        return [1, 2]

    async with executing(_handler_task("bad", bad)) as (queue, _):
        result = await _result(queue.submit(RunRequest(task="bad")))
    assert not result.ok
    assert result.reason == "handler returned a non-dict value"


async def test_unknown_task_gets_a_failed_result_without_starting() -> None:
    async with executing(_sh("known", "true")) as (queue, _):
        recorder = Recorder()
        result = await _result(queue.submit(RunRequest(task="ghost"), recorder))
        assert not result.ok
        assert result.reason == "unknown task 'ghost': this container defines known"
        assert recorder.kinds() == ["queued", "done"]
        # A request its task does not allow is refused the same way, even if it got queued.
        refused = await _result(queue.submit(RunRequest(task="known", args=("x",))))
        assert refused.reason == "task 'known' does not accept args"
        assert (await _result(queue.submit(RunRequest(task="known")))).ok


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

        return _handler_task(name, handler)

    names = ["c", "a", "d", "b", "a"]
    async with executing(*(make(name) for name in "abcd")) as (queue, _):
        runs = [queue.submit(RunRequest(task=name)) for name in names]
        for run in runs:
            assert (await _result(run)).ok
    assert order == names
    assert not overlap


async def test_timeout_of_a_handler_and_of_a_command() -> None:
    async def forever(_run: RunContext) -> dict[str, Any] | None:
        await asyncio.Event().wait()
        return None

    tasks = (
        _handler_task("stuck", forever, timeout_s=0.1),
        _sh("slow", "exec sleep 30", timeout_s=0.2),
    )
    async with executing(*tasks) as (queue, _):
        stuck = await _result(queue.submit(RunRequest(task="stuck")))
        slow = await _result(queue.submit(RunRequest(task="slow")))
    assert (stuck.ok, stuck.reason) == (False, "timed out after 0.1s")
    assert (slow.ok, slow.reason) == (False, "timed out after 0.2s")
    assert (stuck.timed_out, slow.timed_out) == (True, True)  # the metrics' timed_out
    assert slow.duration_ms < 5000  # sleep took its SIGTERM; not the 30 s


async def test_a_handlers_own_timeout_error_is_not_the_tasks_timeout() -> None:
    async def upstream(_run: RunContext) -> dict[str, Any] | None:
        raise TimeoutError("upstream did not answer")

    tasks = (_handler_task("plain", upstream), _handler_task("bounded", upstream, timeout_s=30.0))
    async with executing(*tasks) as (queue, _):
        plain = await _result(queue.submit(RunRequest(task="plain")))
        bounded = await _result(queue.submit(RunRequest(task="bounded")))
    assert plain.reason == "TimeoutError: upstream did not answer"
    assert bounded.reason == "TimeoutError: upstream did not answer"
    assert (plain.timed_out, bounded.timed_out) == (False, False)


async def test_soft_timeout_emits_overdue_and_the_run_goes_on() -> None:
    release = asyncio.Event()

    async def slow(_run: RunContext) -> dict[str, Any] | None:
        await release.wait()
        return {"finished": True}

    async with executing(_handler_task("slow", slow, soft_timeout_s=0.05)) as (queue, _):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="slow"), recorder)
        await recorder.saw("overdue").wait()
        assert not run.is_done
        release.set()
        result = await _result(run)
    assert result.ok
    assert result.output == {"finished": True}
    assert recorder.kinds() == ["queued", "started", "overdue", "done"]
    overdue = recorder.events[2][1]
    assert overdue["reason"] == "running longer than 0.05s"
    assert overdue["id"] == run.id


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

    async with executing(_handler_task("stubborn", stubborn)) as (queue, executor):
        run = queue.submit(RunRequest(task="stubborn"))
        await entered.wait()
        assert executor.cancel_current(run.id) == CANCEL_REQUESTED
        assert executor.cancel_current(run.id) == CANCEL_ALREADY_REQUESTED
        assert not run.is_done
        release.set()
        result = await _result(run)
    assert (result.ok, result.cancelled, result.output) == (True, False, {"finished": True})


async def test_cancel_current_gives_cancelled_by_request() -> None:
    entered = asyncio.Event()

    async def forever(_run: RunContext) -> dict[str, Any] | None:
        entered.set()
        await asyncio.Event().wait()
        return None

    async with executing(_handler_task("wait", forever)) as (queue, executor):
        run = queue.submit(RunRequest(task="wait"))
        await entered.wait()
        assert not executor.cancel_current("some-other-id")
        assert executor.cancel_current(run.id)
        result = await _result(run)
        assert not executor.cancel_current(run.id)  # nothing running any more
    assert (result.ok, result.cancelled, result.reason) == (False, True, REASON_USER_CANCEL)


@pytest.mark.parametrize("kind", ["handler", "command"])
async def test_cancel_right_after_started_keeps_the_executor_alive(kind: str) -> None:
    """The ``started`` listener runs before the attempt's first step: a cancel from there
    must still give ``cancelled by request`` and leave the executor serving."""

    async def forever(_run: RunContext) -> dict[str, Any] | None:
        await asyncio.Event().wait()
        return None

    target = _handler_task("wait", forever) if kind == "handler" else _sh("wait", "sleep 60")
    async with executing(target, _sh("next", "true")) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="wait"), recorder)
        following = queue.submit(RunRequest(task="next"))
        await recorder.saw("started").wait()
        assert executor.cancel_current(run.id)
        result = await _result(run)
        assert (result.cancelled, result.reason) == (True, REASON_USER_CANCEL)
        assert (await _result(following)).ok


async def test_command_exit_codes_and_reasons() -> None:
    tasks = (
        _sh("zero", "exit 0"),
        _sh("three", "exit 3"),
        _sh("term", "kill -TERM $$"),
        _sh("kill", "kill -KILL $$"),
    )
    async with executing(*tasks) as (queue, _):
        results = {
            name: await _result(queue.submit(RunRequest(task=name)))
            for name in ("zero", "three", "term", "kill")
        }
    assert (results["zero"].ok, results["zero"].exit_code, results["zero"].reason) == (True, 0, "")
    assert (results["three"].ok, results["three"].exit_code) == (False, 3)
    assert results["three"].reason == "exit status 3"
    assert (results["term"].exit_code, results["term"].reason) == (143, "killed by SIGTERM")
    assert (results["kill"].exit_code, results["kill"].reason) == (137, "killed by SIGKILL")


async def test_command_output_is_streamed_as_events() -> None:
    async with executing(_sh("talk", "echo out; echo err >&2")) as (queue, _):
        recorder = Recorder()
        assert (await _result(queue.submit(RunRequest(task="talk"), recorder))).ok
    outputs = [
        (f["stream"], line)
        for kind, f in recorder.events
        if kind == "output"
        for line in f["lines"]
    ]
    assert sorted(outputs) == [("stderr", "err"), ("stdout", "out")]
    assert recorder.kinds()[-1] == "done"


# A shell runs its TERM trap only after its foreground child ends, so "ready" comes from that
# child: once it is seen, SIGTERM to the group ends the child and the trap runs at once.
IGNORE_TERM = (
    "trap 'echo got-term' TERM; echo $$; while :; do sh -c 'echo ready; exec sleep 1'; done"
)


async def test_a_term_ignoring_command_is_killed_after_its_grace() -> None:
    async with executing(_sh("stubborn", IGNORE_TERM, grace_s=0.3)) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="stubborn"), recorder)
        await recorder.saw("line:ready").wait()
        loop = asyncio.get_running_loop()
        cancelled_at = loop.time()
        assert executor.cancel_current(run.id)
        result = await _result(run)
        waited_s = loop.time() - cancelled_at
    assert result.reason == REASON_USER_CANCEL
    assert "got-term" in recorder.lines, "no SIGTERM first"
    assert 0.3 <= waited_s < 5, "SIGKILL did not come after the task's grace"
    with pytest.raises(ProcessLookupError):
        os.kill(int(recorder.lines[0]), 0)


async def test_shutdown_running_caps_the_grace() -> None:
    task = _sh("stubborn", "trap '' TERM; echo ready; exec sleep 60", grace_s=60.0)
    async with executing(task) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="stubborn"), recorder)
        await recorder.saw("line:ready").wait()
        loop = asyncio.get_running_loop()
        stopped_at = loop.time()
        assert executor.shutdown_running(grace_cap_s=0.2)
        result = await _result(run)
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
    task = _sh("job", script, grace_s=0.3)
    async with executing(task) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="job"), recorder)
        await recorder.saw("line:ready").wait()
        assert executor.shutdown_running(grace_cap_s=5.0)
        result = await _result(run)
    assert (result.ok, result.cancelled, result.reason) == (False, True, REASON_SHUTDOWN_CANCEL)
    assert result.exit_code == exit_code
    (done,) = [fields for kind, fields in recorder.events if kind == "done"]
    assert (done["ok"], done["reason"], done["exit_code"]) == (
        False,
        REASON_SHUTDOWN_CANCEL,
        exit_code,
    )


async def test_a_cancelled_or_timed_out_command_reports_its_exit_status_too() -> None:
    cancelled = _sh("cancelled", "trap 'exit 0' TERM; echo ready; while :; do sleep 0.05; done")
    slow = _sh("slow", "exec sleep 60", timeout_s=0.2)
    async with executing(cancelled, slow) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="cancelled"), recorder)
        await recorder.saw("line:ready").wait()
        assert executor.cancel_current(run.id) == CANCEL_REQUESTED
        by_request = await _result(run)
        timed_out = await _result(queue.submit(RunRequest(task="slow")))
    assert (by_request.reason, by_request.exit_code) == (REASON_USER_CANCEL, 0)
    assert (timed_out.timed_out, timed_out.exit_code) == (True, 128 + 15)


async def test_cancelling_the_executor_still_gives_the_run_a_result() -> None:
    started = asyncio.Event()

    async def forever(_run: RunContext) -> dict[str, Any] | None:
        started.set()
        await asyncio.Event().wait()
        return None

    queue = RunQueue(capacity=1)
    executor = Executor(
        queue, _registry(_handler_task("wait", forever)), ChildSupervisor(), default_grace_s=1.0
    )
    consumer = asyncio.create_task(executor.run_forever())
    run = queue.submit(RunRequest(task="wait"))
    async with asyncio.timeout(10):
        await started.wait()
        consumer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await consumer
    assert run.result is not None
    assert run.result.reason == REASON_SHUTDOWN_CANCEL
    assert executor.idle


async def test_job_environment_has_the_run_context_and_no_daemon_secrets() -> None:
    task = _sh("env", "env", allow_env=frozenset({"GREETING"}))
    async with executing(task, base_env=DAEMON_ENV) as (queue, _):
        recorder = Recorder()
        request = RunRequest(
            task="env",
            trigger="schedule",
            env={"GREETING": "hi"},
            job="nightly",
            attempt=2,
            scheduled_for=datetime(2026, 1, 1, tzinfo=UTC),
        )
        run = queue.submit(request, recorder)
        assert (await _result(run)).ok
    env = dict(line.split("=", 1) for line in recorder.lines if "=" in line)
    assert env["RUNBROKER_RUN_ID"] == run.id
    assert env["RUNBROKER_TASK"] == "env"
    assert env["RUNBROKER_TRIGGER"] == "schedule"
    assert env["RUNBROKER_JOB"] == "nightly"
    assert env["RUNBROKER_ATTEMPT"] == "2"
    assert env["RUNBROKER_SCHEDULED_FOR"] == "2026-01-01T00:00:00Z"
    assert env["GREETING"] == "hi"
    assert env["HOME"] == "/root"
    assert "RUNBROKER_DATABASE_URL" not in env
    assert "RUNBROKER_GRACE" not in env
    # The socket path is shared so that a job can run `runbroker trigger` itself.
    assert env["RUNBROKER_SOCKET"] == "/run/runbroker/runbroker.sock"
    assert "hunter2" not in "\n".join(recorder.lines)


def test_job_environment_context_wins_over_what_a_trigger_sets() -> None:
    run = Run(
        RunRequest(task="t", trigger="tick", env={"RUNBROKER_TASK": "forged", "A": "1"}),
        run_id="r1",
    )
    env = job_environment({"RUNBROKER_DATABASE_URL": "secret", "PATH": "/bin"}, run)
    assert env == {
        "PATH": "/bin",
        "A": "1",
        "RUNBROKER_RUN_ID": "r1",
        "RUNBROKER_TASK": "t",
        "RUNBROKER_TRIGGER": "tick",
    }


# -- found in review: nothing a handler or a second cancel does may break the executor -----


async def test_output_that_is_not_json_fails_the_run_not_the_daemon() -> None:
    async def tuple_keys(_run: RunContext) -> dict[str, Any] | None:
        return {(1, 2): "x"}  # type: ignore[dict-item]

    async def surrogate(_run: RunContext) -> dict[str, Any] | None:
        raise ValueError("bad byte \udc80")

    async def fine(_run: RunContext) -> dict[str, Any] | None:
        return None

    tasks = (_handler_task("keys", tuple_keys), _handler_task("sur", surrogate))
    async with executing(*tasks, _handler_task("fine", fine)) as (queue, _):
        wire: list[bytes] = []

        def to_wire(_run: Run, event: Event) -> None:
            fields = dict(event.fields)
            wire.append(encode_event(event.kind, bool(fields.pop("ok", True)), **fields))

        keys = queue.submit(RunRequest(task="keys"), to_wire)
        sur = queue.submit(RunRequest(task="sur"), to_wire)
        after = queue.submit(RunRequest(task="fine"))
        assert (await _result(keys)).reason == "handler returned output that is not JSON"
        assert (await _result(sur)).reason == "ValueError: bad byte \udc80"
        assert (await _result(after)).ok
    assert json.loads(wire[-1])["reason"] == "ValueError: bad byte \udc80"


async def test_a_second_cancel_does_not_cut_the_grace_short() -> None:
    # The job ignores SIGTERM; its grace must run out (then SIGKILL) however often it is
    # cancelled, and the run must not end while its process group still lives.
    script = "trap '' TERM; echo $$; while :; do sleep 0.05; done"
    async with executing(_sh("stubborn", script, grace_s=0.5)) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="stubborn"), recorder)
        await recorder.saw("output").wait()
        pgid = int(recorder.lines[0])  # the job's shell leads its own process group
        assert executor.cancel_current(run.id)
        await asyncio.sleep(0)  # let the first cancel reach the job (SIGTERM, grace begins)
        assert executor.cancel_current(run.id)  # again, during the grace
        result = await _result(run)
        assert result.cancelled
        assert result.reason == "cancelled by request"
        # The job's shell (the group's leader, which ignores SIGTERM) was SIGKILLed and waited
        # for before the run ended: it no longer exists, not even as a zombie.
        assert not os.path.exists(f"/proc/{pgid}")  # noqa: ASYNC240 (a /proc lookup)


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

    async with executing(_handler_task("setter", setter)) as (queue, _executor):
        first = queue.submit(RunRequest(task="setter"))
        second = queue.submit(RunRequest(task="setter"))
        assert (await _result(first)).ok
        assert (await _result(second)).ok
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

    async with executing(_handler_task("busy", busy), _handler_task("after", after)) as (
        queue,
        _executor,
    ):
        first = queue.submit(RunRequest(task="busy"))
        second = queue.submit(RunRequest(task="after"))
        result = await _result(first)
        following = await _result(second)
    assert (result.ok, result.output) == (True, {"timed_out": True, "errors": ["child failed"]})
    assert (following.ok, following.output) == (True, {"after": True})


async def _waits_a_moment(_run: RunContext) -> dict[str, Any] | None:
    """A handler that waits on the loop once before it returns."""
    await asyncio.sleep(0.01)
    return {"waited": True}


async def test_a_cancel_the_handler_swallowed_is_not_left_for_the_next_run() -> None:
    entered = asyncio.Event()

    async def swallow(_run: RunContext) -> dict[str, Any] | None:
        entered.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        return {"swallowed": True}

    tasks = (_handler_task("swallow", swallow), _handler_task("waits", _waits_a_moment))
    async with executing(*tasks) as (queue, executor):
        run = queue.submit(RunRequest(task="swallow"))
        following = queue.submit(RunRequest(task="waits"))
        await entered.wait()
        assert executor.cancel_current(run.id) == CANCEL_REQUESTED
        assert (await _result(run)).output == {"swallowed": True}
        result = await _result(following)
    assert (result.ok, result.cancelled, result.output) == (True, False, {"waited": True})


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

    async with executing(_handler_task("instant", instant)) as (queue, _executor):
        assert (await _result(queue.submit(RunRequest(task="instant")))).ok  # waiting for runs
        seen.clear()
        runs = [queue.submit(RunRequest(task="instant")) for _ in range(5)]
        asyncio.get_running_loop().call_soon(turned.set)
        for run in runs:
            assert (await _result(run)).ok
    assert seen[0] is False
    assert seen[-1] is True


async def test_abandoning_a_handler_that_ignores_cancellation_gives_its_run_a_result() -> None:
    entered = asyncio.Event()
    release = asyncio.Event()

    async def stubborn(_run: RunContext) -> dict[str, Any] | None:
        entered.set()
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()
        return None

    async with executing(_handler_task("stubborn", stubborn)) as (queue, executor):
        run = queue.submit(RunRequest(task="stubborn"))
        await entered.wait()
        assert executor.abandon_running() is run
        assert executor.abandon_running() is None  # it has its result: once
        result = await _result(run)
        assert (result.ok, result.cancelled, result.reason) == (False, True, REASON_SHUTDOWN_CANCEL)
        release.set()  # the handler's own end changes nothing
        following = await _result(queue.submit(RunRequest(task="stubborn")))
        assert following.ok  # released: the next run returns at once
    assert run.result is result


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

    tasks = (_handler_task("cancels", cancels_itself), _handler_task("waits", _waits_a_moment))
    async with executing(*tasks) as (queue, _executor):
        runs = [queue.submit(RunRequest(task=name)) for name in ("cancels", "waits") * 2]
        results = [await _result(run) for run in runs]
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
        _handler_task("leaves", leaves_then_waits, timeout_s=timeout_s),
        _handler_task("after", after),
    )
    async with executing(*tasks) as (queue, executor):
        run = queue.submit(RunRequest(task="leaves"))
        following = queue.submit(RunRequest(task="after"))
        await entered.wait()
        if ending == "cancel":
            assert executor.cancel_current(run.id) == CANCEL_REQUESTED
        result = await _result(run)
        assert (await _result(following)).output == {"after": True}
        assert (await _result(queue.submit(RunRequest(task="after")))).ok
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

    tasks = (_handler_task("self", self_cancelling), _handler_task("after", after))
    async with executing(*tasks) as (queue, _executor):
        run = queue.submit(RunRequest(task="self"))
        following = queue.submit(RunRequest(task="after"))
        result = await _result(run)
        assert (await _result(following)).output == {"after": True}
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

    tasks = (_handler_task("timer", leaves_a_timer), _handler_task("waits", _waits_a_moment))
    async with executing(*tasks) as (queue, _executor):
        assert (await _result(queue.submit(RunRequest(task="timer")))).ok
        await done_first.wait()  # the cancel has reached the executor, waiting for a run
        result = await _result(queue.submit(RunRequest(task="waits")))
    assert (result.ok, result.output) == (True, {"waited": True})


async def test_a_cancel_after_a_commands_timeout_fired_is_already_requested() -> None:
    script = "trap 'echo term' TERM; echo up; while :; do sleep 0.05; done"
    task = _sh("slow", script, timeout_s=0.2, grace_s=0.5)
    async with executing(task) as (queue, executor):
        recorder = Recorder()
        run = queue.submit(RunRequest(task="slow"), recorder)
        await recorder.saw("line:term").wait()  # the timeout fired: SIGTERM, the grace runs
        assert executor.cancel_current(run.id) == CANCEL_ALREADY_REQUESTED
        result = await _result(run)
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

    async with executing(_handler_task("clean", cleans_up, timeout_s=0.05)) as (
        queue,
        executor,
    ):
        run = queue.submit(RunRequest(task="clean"))
        await cleaning.wait()
        assert executor.cancel_current(run.id) == CANCEL_ALREADY_REQUESTED
        release.set()
        result = await _result(run)
    assert cleaned == [True]
    assert (result.timed_out, result.reason) == (True, "timed out after 0.05s")


async def test_the_owners_cancel_ends_the_executor_though_the_handler_swallowed_it() -> None:
    entered = asyncio.Event()

    async def swallows(_run: RunContext) -> dict[str, Any] | None:
        entered.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        return {"finished": True}

    queue = RunQueue(capacity=4)
    executor = Executor(
        queue,
        _registry(_handler_task("swallows", swallows)),
        ChildSupervisor(),
        default_grace_s=1.0,
    )
    consumer = asyncio.create_task(executor.run_forever())
    run = queue.submit(RunRequest(task="swallows"))
    waiting = queue.submit(RunRequest(task="swallows"))
    async with asyncio.timeout(10):
        await entered.wait()
        consumer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await consumer
    assert run.result is not None
    assert run.result.output == {"finished": True}
    assert waiting.result is None  # not started: the caller's shutdown decides its result


async def test_what_a_crashing_handler_bound_in_its_context_is_on_its_crash_line() -> None:
    """structlog's context variables a handler binds are on its run's ``run.crashed`` line,
    and on no line of the next run."""

    async def binds_then_fails(_run: RunContext) -> dict[str, Any] | None:
        structlog.contextvars.bind_contextvars(order_id="o-17")
        await asyncio.sleep(0)
        raise ValueError("no such order")

    tasks = (_handler_task("binds", binds_then_fails), _handler_task("fails", _binds_nothing))
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as lines:
        async with executing(*tasks) as (queue, _):
            assert not (await _result(queue.submit(RunRequest(task="binds")))).ok
            assert not (await _result(queue.submit(RunRequest(task="fails")))).ok
    crashed = [line for line in lines if line["event"] == "run.crashed"]
    assert [(line["task"], line.get("order_id")) for line in crashed] == [
        ("binds", "o-17"),
        ("fails", None),
    ]
    assert all("order_id" not in line for line in lines if line["event"] != "run.crashed")


async def _binds_nothing(_run: RunContext) -> dict[str, Any] | None:
    raise ValueError("plain failure")
