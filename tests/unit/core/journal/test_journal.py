"""The output journal: a run's lines bounded in bytes (the newest kept, the dropped counted, in
order), and the history of finished runs bounded in runs and in bytes."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.core.executor import Executor
from daemon.core.journal import MARK_BYTES, Journal, RunLog, line_bytes
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import Run, RunQueue, RunRequest, RunResult, new_run_id
from daemon.core.tasks import RunContext, Task, TaskRegistry
from daemon.wire.logs_answers import looks_like_run_id
from tests.support.eventually import eventually_async
from tests.unit.conftest import JOB_ENV, REPO

OK = RunResult(ok=True, exit_code=0)
_lines = st.lists(st.text(max_size=300), max_size=300)


def _run(task: str = "job") -> Run:
    return Run(RunRequest(task=task))


def _finished(journal: Journal, task: str, *lines: str) -> RunLog:
    log = journal.begin(_run(task))
    for line in lines:
        log.add("stdout", line)
    journal.end(log, OK)
    return log


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.text(max_size=300), max_size=1500), cap=st.integers(0, 20_000))
def test_a_run_keeps_its_newest_lines_in_order_within_its_bytes(lines: list[str], cap: int) -> None:
    log = RunLog(_run(), cap)
    for number, line in enumerate(lines):
        log.add("stderr" if number % 3 == 0 else "stdout", line)
        assert log.bytes <= cap  # the bound holds after every line, not only at the end
    kept = [line for _stream, line, _at in log.lines()]
    marks = log.bytes - sum(line_bytes(line) for line in kept)
    assert marks % MARK_BYTES == 0  # what the lines do not count is their marks'
    assert 0 < marks // MARK_BYTES <= len(kept) or marks == len(kept) == 0
    assert kept == lines[len(lines) - len(kept) :]  # the newest, in order
    assert log.first_seq == len(lines) - len(kept)  # what was dropped is counted
    assert log.end_seq == len(lines)
    if log.first_seq:  # as many kept as fit under the low water: the next older would not
        assert log.bytes + line_bytes(lines[log.first_seq - 1]) + MARK_BYTES > log.low_water_bytes
    streams = [stream for stream, _line, _at in log.lines()]
    assert streams == [
        "stderr" if n % 3 == 0 else "stdout" for n in range(log.first_seq, len(lines))
    ]
    times = [at for _stream, _line, at in log.lines()]
    assert times == sorted(times)
    for seq in range(log.first_seq, log.end_seq):
        assert log.line_at(seq)[1] == lines[seq]


def test_many_lines_through_a_small_buffer_keep_the_tail() -> None:
    log = RunLog(_run(), 64 * 1024)
    for number in range(100_000):  # compacts the list many times over
        log.add("stdout", f"line {number}")
    assert log.bytes <= 64 * 1024
    assert log.line_at(log.end_seq - 1)[1] == "line 99999"
    assert log.line_count == log.end_seq - log.first_seq
    assert [line for _s, line, _a in log.lines()][:2] == [
        f"line {log.first_seq}",
        f"line {log.first_seq + 1}",
    ]


@settings(max_examples=200, deadline=None)
@given(
    runs=st.lists(_lines, max_size=40),
    runs_max=st.integers(min_value=0, max_value=8),
    history_bytes=st.integers(min_value=0, max_value=50_000),
)
def test_the_history_keeps_the_newest_runs_within_its_count_and_bytes(
    runs: list[list[str]], runs_max: int, history_bytes: int
) -> None:
    journal = Journal(
        run_bytes_max=20_000, history_runs_max=runs_max, history_bytes_max=history_bytes
    )
    logs = [_finished(journal, f"t{number}", *lines) for number, lines in enumerate(runs)]
    kept = list(journal.history())  # newest first
    assert len(kept) <= runs_max
    assert journal.history_bytes == sum(log.bytes for log in kept) <= history_bytes
    assert kept == list(reversed(logs))[: len(kept)]  # the newest runs, none skipped
    if len(kept) < min(runs_max, len(logs)):  # the next older run would not have fitted
        assert journal.history_bytes + logs[-len(kept) - 1].bytes > history_bytes
    assert journal.current is None
    assert journal.bytes_held == journal.history_bytes


def test_eviction_by_count_and_by_bytes() -> None:
    journal = Journal(run_bytes_max=10_000, history_runs_max=3, history_bytes_max=10**9)
    logs = [_finished(journal, "job", "x") for _ in range(5)]
    assert [log.run_id for log in journal.history()] == [log.run_id for log in logs[:1:-1]]
    assert journal.find(logs[0].run_id) is None
    assert journal.evicted_runs == 2
    one_run = logs[0].bytes
    journal = Journal(run_bytes_max=10_000, history_runs_max=30, history_bytes_max=2 * one_run)
    logs = [_finished(journal, "job", "x") for _ in range(5)]
    assert list(journal.history()) == [logs[4], logs[3]]


def test_selection_prefers_the_running_run_then_the_latest_finished() -> None:
    journal = Journal()
    assert journal.latest() is None
    first = _finished(journal, "a", "1")
    second = _finished(journal, "b", "2")
    assert journal.latest() is second
    assert journal.latest("a") is first
    assert journal.latest("c") is None
    running = journal.begin(_run("a"))
    assert journal.latest() is running
    assert journal.latest("a") is running
    assert journal.latest("b") is second
    assert journal.find(running.run_id) is running
    assert journal.find(first.run_id) is first
    assert journal.figures()["runs"] == 3


def test_followers_hear_each_line_and_the_end_then_are_let_go() -> None:
    journal = Journal()
    log = journal.begin(_run())
    heard: list[str] = []
    log.follow(lambda: heard.append("wake"))
    log.add("stdout", "a")
    log.add("stdout", "b")
    assert heard == ["wake", "wake"]
    journal.end(log, OK)
    assert heard == ["wake", "wake", "wake"]
    assert log.followers == []
    assert log.result == OK  # a bounded copy of it (kept_result)
    assert log.finished_at is not None


def test_run_ids_have_a_form_task_names_do_not() -> None:
    assert looks_like_run_id(new_run_id())
    for name in ("default", "report", "r-1", "nightly-2", "r12-x", ""):
        assert not looks_like_run_id(name)
    assert looks_like_run_id("rabcdef1-1")
    assert not looks_like_run_id("rabc-1")  # too few hex digits: a task name, like red-1
    page = (REPO / "docs" / "output.md").read_text()
    assert "(`r`, at least seven hex digits, `-`, a number:" in page  # says the same


async def test_the_executor_journals_every_run_it_starts() -> None:
    """A command's lines (both streams, in order) reach the journal whether or not anyone
    listens; a handler's run is not journaled (it has no lines); a run cancelled while it runs
    ends in the history with its result; a run refused before it starts is not journaled."""
    journal = Journal()
    queue = RunQueue(8)

    async def quiet(_run: RunContext) -> dict[str, Any] | None:
        return None

    tasks = TaskRegistry(
        {
            "chatty": Task(name="chatty", command=("sh", "-c", "seq 1 500; echo bad >&2; exit 4")),
            "quiet": Task(name="quiet", handler=quiet, handler_ref="tests:quiet"),
            "forever": Task(name="forever", command=("sleep", "60")),
        }
    )
    executor = Executor(
        queue, tasks, ChildSupervisor(), default_grace_s=1.0, base_env=JOB_ENV, journal=journal
    )
    consumer = asyncio.create_task(executor.run_forever())
    try:
        chatty = queue.submit(RunRequest(task="chatty"))
        quiet_run = queue.submit(RunRequest(task="quiet"))
        stuck = queue.submit(RunRequest(task="forever"))
        await chatty.wait()
        await quiet_run.wait()
        await eventually_async(lambda: executor.cancel_current(stuck.id), "the stuck run to run")
        await stuck.wait()
        tasks.tasks.pop("chatty")
        refused = queue.submit(RunRequest(task="chatty"))  # refused at start: tasks changed
        await refused.wait()
    finally:
        queue.close()
        executor.shutdown_running(0.0)
        await asyncio.wait_for(consumer, 10)
    stuck_log, chatty_log = list(journal.history())
    assert [line for _s, line, _a in chatty_log.lines()] == [*map(str, range(1, 501)), "bad"]
    assert chatty_log.line_at(500)[0] == "stderr"
    assert chatty_log.result is not None
    assert chatty_log.result.exit_code == 4
    assert quiet_run.result is not None
    assert quiet_run.result.ok
    assert journal.find(quiet_run.id) is None
    assert stuck_log.result is not None
    assert stuck_log.result.cancelled
    assert journal.find(refused.id) is None
    assert journal.current is None


async def test_the_lines_of_one_loop_turn_share_a_mark_and_its_time() -> None:
    journal = Journal()
    log = journal.begin(_run())
    log.add("stdout", "a")
    log.add("stdout", "b")  # the same read: no new mark
    log.add("stderr", "c")  # another stream: a mark
    await asyncio.sleep(0)
    log.add("stderr", "d")  # a later turn of the loop: a mark with its own time
    records = log.lines()
    assert [stream for stream, _line, _at in records] == ["stdout", "stdout", "stderr", "stderr"]
    assert records[0][2] == records[1][2] <= records[2][2] <= records[3][2]
    assert log.bytes == sum(line_bytes(line) for line in "abcd") + 3 * MARK_BYTES


async def test_a_chatty_run_in_the_loop_trims_in_blocks_and_keeps_its_accounts() -> None:
    """Lines of one loop turn share marks, so a trim drops whole blocks of lines at once:
    the kept lines are still the newest, their streams right, their bytes counted."""
    journal = Journal(run_bytes_max=256 * 1024)
    log = journal.begin(_run())
    written: list[tuple[str, str]] = []
    for number in range(60_000):
        stream = "stderr" if number % 5000 < 10 else "stdout"
        line = f"l{number}" if number % 7 else f"ünï {number}"  # some lines are not ASCII
        log.add(stream, line)
        written.append((stream, line))
        assert log.bytes <= 256 * 1024
        if number % 1000 == 999:
            await asyncio.sleep(0)  # a new read: a new mark
    kept = [(stream, line) for stream, line, _at in log.lines()]
    assert kept == written[log.first_seq :]
    assert log.bytes == sum(line_bytes(line) for _s, line in kept) + log.mark_count * MARK_BYTES
    assert log.bytes > log.low_water_bytes - 1000  # not trimmed far below what it may keep
