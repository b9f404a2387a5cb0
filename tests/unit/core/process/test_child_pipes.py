"""A child's pipes read (daemon/core/process/child.py): a few reads a turn, never past a pause, a
run not held open past its end by a reader, and what a job left read to the end."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import select
import signal
import time
from pathlib import Path

import pytest

from daemon.core.process import ChildSupervisor, CommandOutcome
from daemon.core.process import child as child_module
from daemon.core.process.child import _F_SETPIPE_SZ as F_SETPIPE_SZ
from daemon.core.process.child import PIPE_BYTES, READ_CHUNK_BYTES, READS_A_TURN, Child, Poller
from daemon.core.process.flow import OutputFlow
from daemon.core.process.lines import LineSplitter
from tests.unit.conftest import JOB_ENV
from tests.unit.core.process.running import Lines, grace_of


async def test_a_reader_holding_again_and_again_cannot_keep_a_run_open_past_its_end(
    short_dir: Path,
) -> None:
    """A process left writing to the job's pipes from another session, and a reader that holds
    the output back at every read and lets go a moment later: the run ends all the same once
    more than the pipes can hold has come after its leader's exit."""
    flow = OutputFlow(hold_max_s=60)
    loop = asyncio.get_running_loop()

    def slow_reader(_stream: str, _lines: list[str]) -> None:
        def holder() -> None: ...

        if flow.hold(holder):
            loop.call_later(0.01, flow.release, holder)

    pidfile = short_dir / "writer"
    script = f"setsid sh -c 'echo $$ > {pidfile}; while :; do echo spam; done' & sleep 0.2"
    supervisor = ChildSupervisor()
    try:
        async with asyncio.timeout(30):
            outcome = await supervisor.run_command(
                ["sh", "-c", script], JOB_ENV, slow_reader, grace_s=lambda: 1.0, valve=flow
            )
    finally:
        writer = int(pidfile.read_text())
        with contextlib.suppress(ProcessLookupError):
            os.kill(writer, signal.SIGKILL)
    assert outcome == CommandOutcome(0)


def _full_pipe() -> tuple[int, int]:
    """A pipe of ``PIPE_BYTES`` that holds as many 80-byte lines as fit: its two ends."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, F_SETPIPE_SZ, PIPE_BYTES)
    os.set_blocking(write_end, False)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(write_end, b"x" * 79 + b"\n")
    return read_end, write_end


async def test_a_full_pipe_is_read_a_few_reads_a_turn_and_not_past_a_pause() -> None:
    """A chatty job's pipe gives ``READS_A_TURN`` full reads at one readiness (bigger batches
    for everything downstream), and no read more once a reader holds the output back."""
    batches: list[int] = []
    pause_at = [1]  # the batch a reader falls behind at, once

    def sink(_stream: str, lines: list[str]) -> None:
        batches.append(len(lines))
        if len(batches) in pause_at:
            pause_at.clear()
            child.pause_output()  # a reader behind: this read's lines are the last

    read_end, write_end = _full_pipe()
    sleeper = await asyncio.create_subprocess_exec("sleep", "30")
    child = Child(sleeper.pid, {read_end: LineSplitter("stdout", sink)}, Poller())
    try:
        child._on_output(read_end)
        assert len(batches) == 1, "read on past a pause"
        assert child.read_bytes == READ_CHUNK_BYTES
        child.resume_output()
        batches.clear()
        child._on_output(read_end)
        assert len(batches) == READS_A_TURN > 1  # more than a read at one readiness
        assert child.read_bytes == (1 + READS_A_TURN) * READ_CHUNK_BYTES
        assert select.select([read_end], [], [], 0)[0], "the pipe was read empty in one turn"
    finally:
        child.close()
        os.close(write_end)
        sleeper.kill()
        await sleeper.wait()


async def test_what_a_job_left_in_its_pipes_is_read_to_the_end_however_slowly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A job that exits with its pipe full, read by a daemon slowed down (a busy machine, a
    slow log): every line still arrives, though reading it takes far longer than the idle
    bound; only a pipe that stops giving bytes is given up."""
    monkeypatch.setattr(child_module, "DRAIN_AFTER_EXIT_S", 0.01)
    count = 12_000
    lines: Lines = []

    def slow_sink(stream: str, batch: list[str]) -> None:
        time.sleep(0.02)  # the work of a slow log, done in the loop as the daemon's is
        lines.extend((stream, line) for line in batch)

    text = "line %07d padded to about seventy bytes of text"
    script = f"awk 'BEGIN {{ for (i = 0; i < {count}; i++) printf \"{text}\\n\", i }}'"
    supervisor = ChildSupervisor()
    async with asyncio.timeout(30):
        outcome = await supervisor.run_command(
            ["sh", "-c", script], JOB_ENV, slow_sink, grace_s=grace_of
        )
    assert outcome == CommandOutcome(0)
    assert [line for _stream, line in lines] == [
        f"line {i:07d} padded to about seventy bytes of text" for i in range(count)
    ]
