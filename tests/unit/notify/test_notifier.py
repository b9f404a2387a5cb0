"""The notifications end to end in one process: the real queue, executor and child supervisor,
the real notifier, and a real HTTP receiver on 127.0.0.1. Every outcome reaches it with the
documented body; a dead, slow, failing or silent endpoint never holds a run back, retries are
as documented, and nothing grows past its bound."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from daemon.core.executor import Executor
from daemon.core.journal import Journal
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import Run, RunQueue, RunRequest
from daemon.core.tasks import TaskRegistry
from daemon.notify.delivery import Delivery
from daemon.notify.notice import SCHEMA
from daemon.notify.notifier import Notifier
from daemon.taskfile import parse_tasks_toml
from tests.support.eventually import eventually_async
from tests.support.http_receiver import Received, Receiver, closed_port_url, receiving
from tests.unit.tasks_toml import Table, tasks_toml

HANDLERS = "tests.unit.notify.handlers"


def failing(**channels: Table) -> str:
    """The tasks file of one task, ``fails``, whose handler raises, notifying ``channels``."""
    return tasks_toml({"fails": {"handler": f"{HANDLERS}:fails", "notify": channels}})


@dataclass
class Parts:
    queue: RunQueue
    notifier: Notifier

    async def run(self, task: str) -> Run:
        run = self.queue.submit(RunRequest(task=task))
        await run.wait()
        return run


@asynccontextmanager
async def running(text: str, capacity: int = 100, capacity_all: int = 1000) -> AsyncIterator[Parts]:
    """The queue, its executor and the notifier of a tasks file, running; at the end the queue
    drains and the notifier gets a second for what is left."""
    tasks = TaskRegistry(parse_tasks_toml(text))
    queue, children, journal = RunQueue(1000), ChildSupervisor(), Journal()
    executor = Executor(
        queue, tasks, children, default_grace_s=1.0, output_log_mode=None, journal=journal
    )
    notifier = Notifier(tasks, journal, children, capacity, capacity_all)
    queue.on_finish(notifier.run_finished)
    queue.on_submit(notifier.run_submitted)
    async with asyncio.TaskGroup() as group:
        runs = group.create_task(executor.run_forever())
        group.create_task(notifier.run())
        try:
            yield Parts(queue, notifier)
        finally:
            queue.close()
            await runs
            await notifier.drain(1.0)


def _tasks(url: str, webhook: str = "", ping: str = "") -> str:
    return f"""
[tasks.flaky]
command = ["sh", "-c", "echo line one; echo line two; exit $(cat $FLAKY_EXIT || echo 0)"]
allow_env = ["FLAKY_EXIT"]
[tasks.flaky.notify.webhook]
url = "{url}/hook?token=s3cr3t"
on = ["start", "success", "failure", "recovery"]
attempts = 1
{webhook}
[tasks.flaky.notify.ping]
url = "{url}/ping/abc?token=s3cr3t"
attempts = 1
{ping}
"""


async def _wait(receiver: Receiver, count: int) -> list[Any]:
    return await asyncio.to_thread(receiver.wait_for, count)


async def test_every_outcome_reaches_the_receiver_with_the_documented_body(
    tmp_path: Any,
) -> None:
    exit_file = tmp_path / "exit"
    with receiving() as receiver:
        text = _tasks(receiver.url).replace("$FLAKY_EXIT", str(exit_file))
        async with running(text) as parts:
            exit_file.write_text("3")
            failed = await parts.run("flaky")
            got = await _wait(receiver, 4)  # start: webhook + ping; failure: webhook + ping
            exit_file.write_text("0")
            recovered = await parts.run("flaky")
            got = await _wait(receiver, 8)
            succeeded = await parts.run("flaky")
            got = await _wait(receiver, 12)
    hooks = [json.loads(r.body) for r in got if r.path.startswith("/hook")]
    pings = [(r.path, r.body) for r in got if r.path.startswith("/ping")]
    assert [hook["event"] for hook in hooks] == [
        "start", "failure", "start", "recovery", "start", "success"
    ]  # fmt: skip
    failure = hooks[1]
    assert failure["schema"] == SCHEMA
    assert failure["task"] == "flaky"
    assert failure["run_id"] == failed.id
    assert failure["trigger"] == "external"
    assert failure["outcome"] == "failed"
    assert failure["exit_code"] == 3
    assert failure["code"] == "failed"
    assert "3" in failure["reason"]
    assert isinstance(failure["duration_ms"], int)
    assert failure["output_tail"] == ["line one", "line two"]
    assert failure["output_lines_before_tail"] == 0
    assert failure["started_at"].endswith("Z")
    assert failure["finished_at"].endswith("Z")
    assert failure["scheduled_for"] is None
    assert hooks[3]["run_id"] == recovered.id
    assert hooks[3]["outcome"] == "succeeded"
    assert hooks[5]["run_id"] == succeeded.id
    assert all(r.headers["content-type"] == "application/json" for r in got if "hook" in r.path)
    # pings: healthchecks.io's paths, the output tail as the body of each end
    assert [path for path, _ in pings] == [
        "/ping/abc/start?token=s3cr3t", "/ping/abc/fail?token=s3cr3t",
        "/ping/abc/start?token=s3cr3t", "/ping/abc?token=s3cr3t",
        "/ping/abc/start?token=s3cr3t", "/ping/abc?token=s3cr3t",
    ]  # fmt: skip
    assert pings[1][1].decode().startswith("line one\nline two")
    status = parts.notifier.status()
    assert status is not None
    assert status["kinds"]["webhook"] == {"sent": 6, "failed": 0}
    assert status["kinds"]["ping"] == {"sent": 6, "failed": 0}
    assert "s3cr3t" not in json.dumps(status)


async def test_a_dead_endpoint_holds_no_run_back_and_is_logged_once(
    logs: list[MutableMapping[str, Any]],
) -> None:
    text = failing(
        webhook={"url": f"{closed_port_url()}/hook?token=s3cr3t", "attempts": 2, "backoff": "10ms"}
    )
    async with running(text) as parts:
        for _ in range(5):
            run = await parts.run("fails")
            assert run.result is not None
            assert not run.result.ok
        await _settled(parts.notifier, 5)
    status = parts.notifier.status()
    assert status is not None
    assert status["kinds"]["webhook"] == {"sent": 0, "failed": 5}
    assert status["retries"] == 5  # one retry a notice: attempts = 2
    assert status["last_failure"] is not None
    assert status["last_failure"]["error"] == "ConnectError"
    failed_lines = [line for line in logs if line["event"] == "notify.failed"]
    assert len(failed_lines) == 1  # one incident, one line
    assert "s3cr3t" not in repr(logs)


async def _settled(notifier: Notifier, count: int) -> None:
    """Until ``count`` notices have an end at the webhook: sent or given up."""

    def ended() -> bool:
        figures = notifier.record.kinds["webhook"]
        return figures["sent"] + figures["failed"] >= count

    await eventually_async(ended, f"{count} webhook notices sent or given up")


async def _one_run_answered(status: int, **webhook: object) -> tuple[Notifier, list[Received]]:
    """One run of ``fails`` whose webhook is answered ``status``, until its notice has an end:
    the notifier, and the requests that reached the receiver (each is kept before it is
    answered, so none is still on its way)."""
    with receiving() as receiver:
        receiver.status = status
        async with running(failing(webhook={"url": f"{receiver.url}/hook", **webhook})) as parts:
            await parts.run("fails")
            await _settled(parts.notifier, 1)
    return parts.notifier, receiver.requests


async def test_a_500_is_tried_again_after_the_backoff_doubled_each_time() -> None:
    notifier, got = await _one_run_answered(500, attempts=3, backoff="100ms")
    assert len(got) == 3  # attempts = 3, then given up
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(got)]
    assert gaps[0] >= 0.1
    assert gaps[1] >= 0.2
    assert notifier.record.kinds["webhook"] == {"sent": 0, "failed": 1}


async def test_a_4xx_is_given_up_at_once() -> None:
    notifier, got = await _one_run_answered(404, attempts=5, backoff="10ms")
    assert len(got) == 1
    assert notifier.record.last_failure is not None
    assert notifier.record.last_failure["error"] == "HTTP 404"


async def test_an_endpoint_that_never_answers_holds_no_run_back_and_the_queue_stays_bounded(
    logs: list[MutableMapping[str, Any]],
) -> None:
    with receiving() as receiver:
        receiver.hang = True
        text = failing(webhook={"url": f"{receiver.url}/hook", "timeout": "30s", "attempts": 1})
        async with running(text, capacity=5) as parts:
            started = time.monotonic()
            runs = [parts.queue.submit(RunRequest(task="fails")) for _ in range(40)]
            await asyncio.gather(*(run.wait() for run in runs))
            elapsed_s = time.monotonic() - started
            await _wait(receiver, 1)  # the first notice hangs at the endpoint
            status = parts.notifier.status()
            assert status is not None
            # The sender takes the first notice when it next runs: before the other 39 are
            # put, or after, as the loop schedules it. Either way the outbox filled to its
            # bound, and every notice is pending, dropped or the one in flight.
            assert status["pending"] in (4, 5)
            assert status["pending"] + status["dropped"] == 40 - 1
            assert len(receiver.requests) == 1
            assert elapsed_s < 5.0  # 40 handler runs; the endpoint's 30 s timeout is not waited
            drain_started = time.monotonic()
            await parts.notifier.drain(0.2)
            assert time.monotonic() - drain_started < 0.2 + 1.5
    assert len([line for line in logs if line["event"] == "notify.dropped"]) == 1
    assert any(line["event"] == "notify.shutdown_dropped" for line in logs)


async def test_a_slow_endpoint_is_cut_at_its_timeout_each_attempt() -> None:
    with receiving() as receiver:
        receiver.delay_s = 5.0
        webhook = {
            "url": f"{receiver.url}/hook",
            "timeout": "200ms",
            "attempts": 2,
            "backoff": "10ms",
        }
        text = failing(webhook=webhook)
        async with running(text) as parts:
            started = time.monotonic()
            await parts.run("fails")
            await _settled(parts.notifier, 1)
            took_s = time.monotonic() - started
    assert len(receiver.requests) == 2
    assert parts.notifier.record.last_failure is not None
    assert parts.notifier.record.last_failure["error"] == "no answer within 0.2s"
    assert took_s < 2 * 0.2 + 0.01 + 2.0  # the bound, and slack for a loaded machine


class TwoEndpoints:
    """A fake HTTP sender: ``dead.example`` takes each notice and never answers, any other
    host is sent at once; each says what reached it by an event."""

    def __init__(self) -> None:
        self.retries = 0
        self.dead_holds = asyncio.Event()
        self.live_got = asyncio.Event()
        self.live_tasks: list[str] = []

    async def send(self, target: object, url: str, body: bytes, content_type: str) -> Delivery:
        if "dead.example" in url:
            self.dead_holds.set()
            await asyncio.Event().wait()  # never answers: only a cancel ends it
        self.live_tasks.append(json.loads(body)["task"])
        self.live_got.set()
        return Delivery(True)

    async def close(self) -> None:
        pass


async def test_a_target_that_never_answers_delays_no_other_target_s_notices() -> None:
    text = tasks_toml(
        {
            name: {"handler": f"{HANDLERS}:fails", "notify": {"webhook": {"url": url}}}
            for name, url in (("dead", "http://dead.example/h"), ("live", "http://live.example/h"))
        }
    )
    endpoints = TwoEndpoints()
    async with running(text) as parts:
        parts.notifier.http = endpoints  # type: ignore[assignment]
        for _ in range(3):
            await parts.run("dead")
        await endpoints.dead_holds.wait()  # the dead target holds its first notice for good
        await parts.run("live")
        async with asyncio.timeout(10):  # a bound for a broken build, not a wait for state
            await endpoints.live_got.wait()
        assert endpoints.live_tasks == ["live"]
        status = parts.notifier.status()
        assert status is not None
        assert status["pending"] == 2  # the dead target's next two, in its own queue
        assert status["kinds"]["webhook"] == {"sent": 1, "failed": 0}


async def test_every_target_s_queue_is_bounded_and_all_of_them_together(
    logs: list[MutableMapping[str, Any]],
) -> None:
    names = [f"dead{n}" for n in range(4)]
    text = tasks_toml(
        {
            name: {
                "handler": f"{HANDLERS}:fails",
                "notify": {"webhook": {"url": f"http://dead.example/{name}"}},
            }
            for name in names
        }
    )
    endpoints = TwoEndpoints()
    async with running(text, capacity=5, capacity_all=12) as parts:
        parts.notifier.http = endpoints  # type: ignore[assignment]
        for name in names:
            for _ in range(8):
                await parts.run(name)
        status = parts.notifier.status()
        assert status is not None
        assert parts.notifier.outbox.senders == 4  # each holds its target's first notice
        assert status["pending"] == 12  # 4 targets x 5 would be 20: all together hold 12
        assert status["dropped"] == 4 * 8 - 4 - 12
    dropped_lines = [line for line in logs if line["event"] == "notify.dropped"]
    assert 1 <= len(dropped_lines) <= 4  # once an incident, a target at most once here


async def test_a_target_on_change_hears_the_first_failure_and_the_recovery_only(
    tmp_path: Any,
) -> None:
    exit_file = tmp_path / "exit"
    text = tasks_toml(
        {
            "flaky": {
                "command": ["sh", "-c", f"exit $(cat {exit_file})"],
                "notify": {"webhook": {"url": "http://live.example/h", "on": ["change"]}},
            }
        }
    )
    endpoints = TwoEndpoints()
    heard: list[str] = []
    send = endpoints.send

    async def send_and_keep(target: object, url: str, body: bytes, content_type: str) -> Delivery:
        heard.append(json.loads(body)["event"])
        return await send(target, url, body, content_type)

    endpoints.send = send_and_keep  # type: ignore[method-assign]
    async with running(text) as parts:
        parts.notifier.http = endpoints  # type: ignore[assignment]
        for code in (1, 1, 1, 0, 0, 1, 1, 0, 0):
            exit_file.write_text(str(code))
            await parts.run("flaky")
        await _settled(parts.notifier, 4)
        assert len(parts.notifier.outbox) == 0  # every notice was put when its run ended
    assert heard == ["failure", "recovery", "failure", "recovery"]
