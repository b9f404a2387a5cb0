"""A command's child and its process group (daemon/core/process/child.py): exit codes, the
group's leftovers terminated, a cancel or a kill with its grace, and last words delivered."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from daemon.core.process import ChildSupervisor, CommandOutcome, describe_returncode
from tests.unit.conftest import JOB_ENV, wait_readable
from tests.unit.core.process.running import BUSY_LOOP, Lines, each_line, grace_of, release_fifo


def test_describe_returncode() -> None:
    assert describe_returncode(0) == CommandOutcome(0)
    assert describe_returncode(3) == CommandOutcome(3)
    assert describe_returncode(-signal.SIGTERM) == CommandOutcome(143, "SIGTERM")
    assert describe_returncode(-signal.SIGKILL) == CommandOutcome(137, "SIGKILL")


async def test_group_leftovers_are_terminated_when_the_leader_exits(short_dir: Path) -> None:
    fifo = short_dir / "go"
    os.mkfifo(fifo)
    pidfds: list[int] = []

    def sink(_stream: str, line: str) -> None:
        pidfds.append(os.pidfd_open(int(line)))  # the background sleep, before the leader exits
        release_fifo(fifo)

    supervisor = ChildSupervisor()
    try:
        async with asyncio.timeout(20):
            outcome = await supervisor.run_command(
                ["sh", "-c", 'sleep 60 & echo $!; read x < "$1"', "job", str(fifo)],
                JOB_ENV,
                each_line(sink),
                grace_s=grace_of,
            )
        assert outcome == CommandOutcome(0)
        assert len(pidfds) == 1
        await wait_readable(pidfds[0], timeout_s=10)  # the 60 s sleep is gone
    finally:
        for fd in pidfds:
            os.close(fd)


async def test_cancelling_terminates_the_group_and_delivers_last_words() -> None:
    lines: Lines = []
    ready = asyncio.Event()
    pidfds: list[int] = []

    def sink(stream: str, line: str) -> None:
        lines.append((stream, line))
        if line.startswith("child "):
            pidfds.append(os.pidfd_open(int(line.split()[1])))
        if line == "ready":
            ready.set()

    script = f"sleep 60 & echo child $!; trap 'echo bye; exit 3' TERM; {BUSY_LOOP}"
    supervisor = ChildSupervisor()
    task = asyncio.create_task(
        supervisor.run_command(["sh", "-c", script], JOB_ENV, each_line(sink), grace_s=grace_of)
    )
    try:
        async with asyncio.timeout(20):
            await ready.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert ("stdout", "bye") in lines
            await wait_readable(pidfds[0])
    finally:
        for fd in pidfds:
            os.close(fd)


async def test_term_ignoring_command_is_killed_after_the_grace() -> None:
    ready = asyncio.Event()
    lines: list[str] = []

    def sink(_stream: str, line: str) -> None:
        lines.append(line)
        if line == "ready":
            ready.set()

    script = f"trap 'echo got-term' TERM; {BUSY_LOOP}"
    supervisor = ChildSupervisor()
    task = asyncio.create_task(
        supervisor.run_command(["sh", "-c", script], JOB_ENV, each_line(sink), grace_s=lambda: 0.3)
    )
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(20):
        await ready.wait()
        cancelled_at = loop.time()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert loop.time() - cancelled_at >= 0.3, "killed before its grace was over"
    assert "got-term" in lines, "SIGTERM was not sent before SIGKILL"


async def test_kill_all_kills_every_group() -> None:
    ready = asyncio.Event()
    supervisor = ChildSupervisor()

    def sink(_stream: str, line: str) -> None:
        if line == "ready":
            ready.set()

    task = asyncio.create_task(
        supervisor.run_command(
            ["sh", "-c", "trap '' TERM; echo ready; exec sleep 60"],
            JOB_ENV,
            each_line(sink),
            grace_s=grace_of,
        )
    )
    async with asyncio.timeout(20):
        await ready.wait()
        supervisor.kill_all()
        assert await task == CommandOutcome(137, "SIGKILL")


async def test_group_leftovers_that_ignore_sigterm_are_killed_after_the_grace() -> None:
    """What the leader leaves in its group is ended as the job itself would be: SIGTERM, the
    grace, SIGKILL; the run is over only once the group is gone."""
    pidfds: list[int] = []

    def sink(_stream: str, line: str) -> None:
        pidfds.append(os.pidfd_open(int(line)))  # the leftover, before the leader exits

    script = "(trap '' TERM; exec sleep 60) & echo $!"
    supervisor = ChildSupervisor()
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(20):
            began = loop.time()
            outcome = await supervisor.run_command(
                ["sh", "-c", script],
                JOB_ENV,
                each_line(sink),
                grace_s=lambda: 0.3,
            )
            took_s = loop.time() - began
        assert outcome == CommandOutcome(0)
        assert len(pidfds) == 1
        await wait_readable(pidfds[0], timeout_s=5)  # the TERM-ignoring sleep is gone
        assert took_s >= 0.3, "killed before its grace was over"
    finally:
        for fd in pidfds:
            os.close(fd)
