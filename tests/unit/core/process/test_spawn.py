"""Starting a job (daemon/core/process/spawn.py): a spawn error for what cannot start, only the
three standard descriptors inherited, stdin at its end, default signal dispositions, PATH
searched again."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from pathlib import Path

import pytest

from daemon.core.process import ChildSupervisor, CommandOutcome, SpawnError
from tests.unit.conftest import JOB_ENV
from tests.unit.core.process.running import Lines, each_line, grace_of, run_command


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["no-such-program-here"], "cannot start 'no-such-program-here': not found in PATH"),
        (["/nonexistent/job"], "cannot start '/nonexistent/job': No such file or directory"),
        (["/dev/null"], "cannot start '/dev/null': Permission denied"),
    ],
)
async def test_a_program_that_cannot_start_is_a_spawn_error(argv: list[str], reason: str) -> None:
    with pytest.raises(SpawnError) as excinfo:
        await run_command(argv)
    assert str(excinfo.value) == reason


async def test_a_script_with_a_missing_interpreter_is_a_spawn_error(short_dir: Path) -> None:
    script = short_dir / "job.sh"
    script.write_text("#!/nonexistent/interpreter\necho hi\n")
    script.chmod(0o755)
    with pytest.raises(SpawnError) as excinfo:
        await run_command([str(script)])
    assert "its interpreter (#! line) was not found" in str(excinfo.value)


async def test_a_job_inherits_only_stdin_stdout_and_stderr(short_dir: Path) -> None:
    """No socket, pidfd, pipe or file of the daemon leaks into a job, nor a descriptor the
    daemon inherited itself (made inheritable here, as a parent process would pass it)."""
    held = os.open(short_dir, os.O_RDONLY)
    inherited = os.open(short_dir, os.O_RDONLY)
    os.set_inheritable(inherited, True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        lines: Lines = []
        outcome = await run_command(["sh", "-c", "ls /proc/self/fd"], lines)
    finally:
        os.close(held)
        os.close(inherited)
        listener.close()
    assert outcome == CommandOutcome(0)
    # ls itself opens one descriptor to read the directory.
    fds = sorted(int(line) for _stream, line in lines)
    assert fds[:3] == [0, 1, 2]
    assert len(fds) <= 4, f"the job inherited descriptors: {fds}"


async def test_a_jobs_stdin_is_dev_null_at_its_end() -> None:
    lines: Lines = []
    outcome = await run_command(
        ["sh", "-c", "readlink /proc/self/fd/0; read -r x; echo read=$?"], lines
    )
    assert outcome == CommandOutcome(0)
    assert [line for _stream, line in lines] == ["/dev/null", "read=1"]


async def test_the_job_starts_with_default_signal_dispositions() -> None:
    """Python ignores SIGPIPE (``yes | head`` would never end), the daemon may ignore more and
    block some: a job inherits none of it."""
    previous = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        lines: Lines = []
        outcome = await run_command(
            ["sh", "-c", "grep -E '^Sig(Ign|Blk)' /proc/self/status"], lines
        )
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert outcome == CommandOutcome(0)
    masks = dict(line.split(":\t") for _stream, line in lines)
    assert int(masks["SigBlk"], 16) == 0
    # Signals 1-31; glibc's posix_spawn leaves its two internal ones (32, 33) ignored.
    assert int(masks["SigIgn"], 16) & ((1 << 31) - 1) == 0


async def test_a_program_found_in_path_is_searched_again_once_it_is_gone(short_dir: Path) -> None:
    first, second = short_dir / "a", short_dir / "b"
    for directory, word in ((first, "first"), (second, "second")):
        directory.mkdir()
        (directory / "job").write_text(f"#!/bin/sh\necho {word}\n")
        (directory / "job").chmod(0o755)
    env = {**JOB_ENV, "PATH": f"{first}:{second}:{JOB_ENV['PATH']}"}
    supervisor = ChildSupervisor()
    lines: Lines = []

    async def run() -> CommandOutcome:
        async with asyncio.timeout(20):
            return await supervisor.run_command(
                ["job"],
                env,
                each_line(lambda stream, line: lines.append((stream, line))),
                grace_s=grace_of,
            )

    assert await run() == CommandOutcome(0)
    (first / "job").unlink()
    assert await run() == CommandOutcome(0)
    assert [line for _stream, line in lines] == ["first", "second"]
