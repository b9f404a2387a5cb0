"""A command run under a supervisor for one test, and the sinks and jobs the children's tests
share."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from daemon.core.process import ChildSupervisor, CommandOutcome, OutputSink
from tests.unit.conftest import JOB_ENV

Lines = list[tuple[str, str]]


def each_line(sink: Callable[[str, str], None]) -> OutputSink:
    """An output sink that takes a read's lines, from one that takes a line at a time."""

    def each(stream: str, lines: list[str]) -> None:
        for line in lines:
            sink(stream, line)

    return each


# A shell runs a TERM trap only once its foreground child has ended, so "ready" is printed by
# that child itself: when it is seen, the signal to the group ends the child and the trap runs.
BUSY_LOOP = "while :; do sh -c 'echo ready; exec sleep 1'; done"


def grace_of(seconds: float = 5.0) -> float:
    return seconds


async def run_command(argv: list[str], lines: Lines | None = None) -> CommandOutcome:
    sink_lines: Lines = [] if lines is None else lines
    supervisor = ChildSupervisor()
    async with asyncio.timeout(20):
        return await supervisor.run_command(
            argv,
            JOB_ENV,
            each_line(lambda stream, line: sink_lines.append((stream, line))),
            grace_s=grace_of,
        )


def release_fifo(fifo: Path) -> None:
    """Unblock a job waiting in ``read x < fifo`` (the open pairs with the job's own)."""
    with open(fifo, "w") as writer:
        writer.write("go\n")
