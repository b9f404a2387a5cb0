"""The journal's bounds as memory really held: dropped lines let go, non-ASCII lines counted with
the UTF-8 copy a client's encoding leaves in them; followers woken once a loop turn, one that
raises let go without the executor; handler runs not journaled."""

from __future__ import annotations

import asyncio
import sys
import tracemalloc
from typing import Any

import orjson
import pytest

from daemon.core.executor import Executor
from daemon.core.journal import Journal, RunLog, line_bytes
from daemon.core.journal.journal import KEPT_REASON_CHARS
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import Run, RunQueue, RunRequest, RunResult
from daemon.core.tasks import RunContext, Task, TaskRegistry
from tests.unit.conftest import JOB_ENV

BOUND_BYTES = 1024 * 1024


def _run(task: str = "job") -> Run:
    return Run(RunRequest(task=task))


@pytest.mark.parametrize("line_chars", [60, 8 * 1024, 64 * 1024])
def test_the_dropped_lines_are_let_go_at_each_trim(line_chars: int) -> None:
    log = RunLog(_run(), BOUND_BYTES)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for number in range(12 * BOUND_BYTES // line_chars):
            log.add("stdout", f"{number:08d}".ljust(line_chars, "x"))
            # no dropped line still referenced: the list holds the lines written but dropped
            assert len(log._lines) == number + 1 - log.first_seq
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert log.first_seq > 0
    assert log.bytes <= BOUND_BYTES
    assert held <= 1.3 * BOUND_BYTES  # what is counted is what is held (and a list's slack)


def test_a_finished_log_is_compacted() -> None:
    journal = Journal(run_bytes_max=64 * 1024)
    log = journal.begin(_run())
    for number in range(5000):
        log.add("stdout", f"line {number}")
    journal.end(log, RunResult(ok=True))
    assert len(log._lines) == 5000 - log.first_seq  # the written lines, but the dropped
    # no mark whose lines are all dropped: the second mark, if any, starts at a kept line
    assert log._seqs[0] <= log.first_seq
    assert len(log._seqs) < 2 or log._seqs[1] > log.first_seq


@pytest.mark.parametrize("line", ["😀" * 1000, "é" * 1000, "a" * 999 + "😀", "ü"])
def test_a_non_ascii_line_counts_what_it_holds_once_encoded(line: str) -> None:
    orjson.dumps({"line": line})  # as a client is sent it: orjson keeps a UTF-8 copy in the str
    assert sys.getsizeof(line) + 8 <= line_bytes(line)  # its list slot too


async def test_followers_are_woken_once_a_loop_turn_not_at_each_line() -> None:
    journal = Journal()
    log = journal.begin(_run())
    wakes = [0]

    def wake() -> None:
        wakes[0] += 1

    for _ in range(100):
        log.follow(wake)
    for turn in range(3):
        for number in range(50):
            log.add("stdout", f"{turn} {number}")
        assert wakes[0] == 100 * turn  # not yet: at the end of the turn
        await asyncio.sleep(0)
        assert wakes[0] == 100 * (turn + 1)  # each follower once for the turn's 50 lines
    journal.end(log, RunResult(ok=True))
    assert wakes[0] == 400  # and once at the end


async def test_a_follower_that_raises_is_let_go_and_the_executor_goes_on() -> None:
    journal = Journal()
    queue = RunQueue(4)
    tasks = TaskRegistry({"echo": Task(name="echo", command=("sh", "-c", "echo one; echo two"))})
    executor = Executor(
        queue, tasks, ChildSupervisor(), default_grace_s=1.0, base_env=JOB_ENV, journal=journal
    )
    heard: list[str] = []

    def broken() -> None:
        raise RuntimeError("a broken follower")

    original_begin = journal.begin

    def begin(run: Run) -> RunLog:
        log = original_begin(run)
        log.follow(broken)
        log.follow(lambda: heard.append("wake"))
        return log

    journal.begin = begin  # type: ignore[method-assign]
    consumer = asyncio.create_task(executor.run_forever())
    try:
        first = queue.submit(RunRequest(task="echo"))
        second = queue.submit(RunRequest(task="echo"))
        await asyncio.wait_for(second.wait(), 10)
    finally:
        queue.close()
        await asyncio.wait_for(consumer, 10)
    assert not consumer.exception()
    for run in (first, second):
        assert run.result is not None
        assert run.result.ok
        log = journal.find(run.id)
        assert log is not None
        assert log.result is not None
        assert [line for _s, line, _a in log.lines()] == ["one", "two"]
    assert heard  # the good follower was still woken


async def test_a_handlers_run_is_not_journaled() -> None:
    journal = Journal(history_runs_max=2)
    queue = RunQueue(8)

    async def quiet(_run: RunContext) -> dict[str, Any] | None:
        return {"big": "x" * 100_000}

    tasks = TaskRegistry(
        {
            "job": Task(name="job", command=("echo", "kept")),
            "quiet": Task(name="quiet", handler=quiet, handler_ref="tests:quiet"),
        }
    )
    executor = Executor(
        queue, tasks, ChildSupervisor(), default_grace_s=1.0, base_env=JOB_ENV, journal=journal
    )
    consumer = asyncio.create_task(executor.run_forever())
    try:
        job = queue.submit(RunRequest(task="job"))
        handler_runs = [queue.submit(RunRequest(task="quiet")) for _ in range(5)]
        await asyncio.wait_for(handler_runs[-1].wait(), 10)
    finally:
        queue.close()
        await asyncio.wait_for(consumer, 10)
    assert [log.run_id for log in journal.history()] == [job.id]  # not pushed out
    assert all(journal.find(run.id) is None for run in handler_runs)


def test_a_kept_result_holds_nothing_unbounded() -> None:
    journal = Journal()
    log = journal.begin(_run())
    reason = "r" * 100_000
    journal.end(log, RunResult(ok=False, reason=reason, exit_code=3, output={"x": "y" * 10**5}))
    assert log.result is not None
    assert log.result.output is None
    assert len(log.result.reason) < KEPT_REASON_CHARS + 50
    assert (log.result.exit_code, log.result.outcome) == (3, "failed")
    assert log.bytes == 0
