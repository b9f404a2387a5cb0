"""The command runner (output streaming, process groups, termination) and the PID-1 reaper."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import os
import select
import signal
import socket
import time
import unittest.mock
from collections.abc import Callable
from pathlib import Path

import pytest
import uvloop
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.process import (
    ChildSupervisor,
    CommandOutcome,
    OutputSink,
    SpawnError,
    describe_returncode,
)
from daemon.core.process import child as child_module
from daemon.core.process.child import (
    _F_SETPIPE_SZ as F_SETPIPE_SZ,
)
from daemon.core.process.child import (
    PIPE_BYTES,
    READ_CHUNK_BYTES,
    READS_A_TURN,
    Child,
    Poller,
)
from daemon.core.process.lines import LINE_LIMIT_BYTES, LineSplitter
from daemon.core.process.reaper import UNCLAIMED_ZOMBIE_S, zombie_children
from daemon.core.runqueue.flow import OutputFlow
from tests.unit.conftest import JOB_ENV, wait_readable

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


def _grace(seconds: float = 5.0) -> float:
    return seconds


async def _run(argv: list[str], lines: Lines | None = None) -> CommandOutcome:
    sink_lines: Lines = [] if lines is None else lines
    supervisor = ChildSupervisor()
    async with asyncio.timeout(20):
        return await supervisor.run_command(
            argv,
            JOB_ENV,
            each_line(lambda stream, line: sink_lines.append((stream, line))),
            grace_s=_grace,
        )


def _release(fifo: Path) -> None:
    """Unblock a job waiting in ``read x < fifo`` (the open pairs with the job's own)."""
    with open(fifo, "w") as writer:
        writer.write("go\n")


def test_describe_returncode() -> None:
    assert describe_returncode(0) == CommandOutcome(0)
    assert describe_returncode(3) == CommandOutcome(3)
    assert describe_returncode(-signal.SIGTERM) == CommandOutcome(143, "SIGTERM")
    assert describe_returncode(-signal.SIGKILL) == CommandOutcome(137, "SIGKILL")


async def test_stdout_and_stderr_are_both_streamed_in_order() -> None:
    lines: Lines = []
    outcome = await _run(
        ["sh", "-c", "echo one; echo two >&2; printf 'crlf\\r\\n'; printf 'no newline'; exit 4"],
        lines,
    )
    assert outcome == CommandOutcome(4)
    assert [line for stream, line in lines if stream == "stdout"] == ["one", "crlf", "no newline"]
    assert [line for stream, line in lines if stream == "stderr"] == ["two"]


async def test_long_lines_arrive_in_pieces_without_loss() -> None:
    # 100 000 bytes ends with its newline just past the limit; 200 001 spans several pieces.
    script = (
        "head -c 100000 /dev/zero | tr '\\0' a; echo;"
        "head -c 200001 /dev/zero | tr '\\0' b; echo;"
        "echo tail"
    )
    lines: Lines = []
    assert await _run(["sh", "-c", script], lines) == CommandOutcome(0)
    pieces = [line for _stream, line in lines]
    assert pieces[-1] == "tail"
    assert all(pieces), f"an empty piece was emitted: {[len(p) for p in pieces]}"
    body = pieces[:-1]
    assert len(body) >= 3, "the long lines were not split"
    assert "".join(body) == "a" * 100_000 + "b" * 200_001
    # No piece mixes the two lines: a piece never straddles a newline.
    assert all(set(piece) in ({"a"}, {"b"}) for piece in body)


async def test_multibyte_characters_survive_the_cut_at_the_limit() -> None:
    # Three lines of 3-byte characters behind 0, 1 and 2 ASCII bytes: whatever the offsets of
    # the cuts, at least one of them falls inside a character.
    texts = [prefix + "\u20ac" * 70_000 for prefix in ("", "a", "ab")]
    code = "import sys\nfor p in ('', 'a', 'ab'): sys.stdout.write(p + '\\u20ac' * 70000 + '\\n')"
    lines: Lines = []
    assert await _run(["python3", "-c", code], lines) == CommandOutcome(0)
    pieces = [line for _stream, line in lines]
    assert "\ufffd" not in "".join(pieces)
    assert len(pieces) > 3, "no line was cut"
    assert "".join(pieces) == "".join(texts)


def _split(*chunks: bytes) -> list[str]:
    """The lines (and pieces) a stream of ``chunks`` gives, ended by EOF."""
    pieces: list[str] = []
    splitter = LineSplitter("stdout", lambda _stream, lines: pieces.extend(lines))
    for chunk in chunks:
        splitter.feed(chunk)
    splitter.close()
    return pieces


def test_a_cut_just_before_the_newline_gives_no_empty_piece() -> None:
    line = b"a" * (2 * LINE_LIMIT_BYTES)
    pieces = _split(line + b"\n" + b"\n", b"tail\n")
    # Two full pieces, no empty third one; the empty line is the job's own.
    assert pieces == ["a" * LINE_LIMIT_BYTES, "a" * LINE_LIMIT_BYTES, "", "tail"]
    assert _split(line[:1000], line[1000:], b"\n\ntail\n") == pieces


def test_a_cut_inside_a_character_does_not_break_it() -> None:
    encoded = ("ab" + "\u20ac" * 30_000).encode()
    first, rest = encoded[: LINE_LIMIT_BYTES + 2], encoded[LINE_LIMIT_BYTES + 2 :]
    assert (LINE_LIMIT_BYTES - 2) % 3, "the cut must fall inside a character"
    pieces = _split(first, rest + b"\nnext\n")
    assert len(pieces) == 3
    assert "\ufffd" not in "".join(pieces)
    assert "".join(pieces[:-1]) == "ab" + "\u20ac" * 30_000
    assert pieces[-1] == "next"


def test_the_lines_of_one_read_reach_the_sink_together() -> None:
    calls: list[list[str]] = []
    splitter = LineSplitter("stdout", lambda _stream, lines: calls.append(lines))
    splitter.feed(b"one\ntwo\r\nthr")
    splitter.feed(b"ee\nfour\n")
    splitter.feed(b"five")
    splitter.close()
    assert calls == [["one", "two"], ["three", "four"], ["five"]]


@given(
    st.lists(
        st.text(
            st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=40
        ),
        max_size=20,
    ),
    st.lists(st.integers(min_value=0, max_value=400), max_size=10),
)
def test_long_lines_in_pieces_reassemble_in_order_whatever_the_chunks(
    texts: list[str], cuts: list[int]
) -> None:
    # A small limit: many lines are cut, often inside a character, in any read.
    data = b"".join(text.encode() + b"\n" for text in texts)
    edges = [0, *sorted(cut for cut in cuts if cut < len(data)), len(data)]
    chunks = [data[a:b] for a, b in itertools.pairwise(edges)]
    with unittest.mock.patch("daemon.core.process.lines.LINE_LIMIT_BYTES", 16):
        pieces = _split(*chunks)
    assert "".join(pieces) == "".join(texts)  # nothing lost, nothing replaced, in order
    assert len(pieces) >= len(texts)
    assert all(len(piece.encode()) <= 16 + 3 for piece in pieces)  # a carried character
    assert sum(1 for piece in pieces if not piece) == sum(1 for text in texts if not text)


@given(st.lists(st.binary(max_size=300), max_size=30))
def test_lines_are_the_bytes_split_at_newlines_whatever_the_chunks(chunks: list[bytes]) -> None:
    # No line here reaches the limit: each line is one piece, however the bytes were chunked.
    *lines, last = b"".join(chunks).split(b"\n")
    expected = [line.decode("utf-8", "replace").removesuffix("\r") for line in lines]
    if last:
        expected.append(last.decode("utf-8", "replace"))  # what the stream ended with
    assert _split(*chunks) == expected


async def test_group_leftovers_are_terminated_when_the_leader_exits(short_dir: Path) -> None:
    fifo = short_dir / "go"
    os.mkfifo(fifo)
    pidfds: list[int] = []

    def sink(_stream: str, line: str) -> None:
        pidfds.append(os.pidfd_open(int(line)))  # the background sleep, before the leader exits
        _release(fifo)

    supervisor = ChildSupervisor()
    try:
        async with asyncio.timeout(20):
            outcome = await supervisor.run_command(
                ["sh", "-c", 'sleep 60 & echo $!; read x < "$1"', "job", str(fifo)],
                JOB_ENV,
                each_line(sink),
                grace_s=_grace,
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
        supervisor.run_command(["sh", "-c", script], JOB_ENV, each_line(sink), grace_s=_grace)
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
        await _run(argv)
    assert str(excinfo.value) == reason


async def test_a_script_with_a_missing_interpreter_is_a_spawn_error(short_dir: Path) -> None:
    script = short_dir / "job.sh"
    script.write_text("#!/nonexistent/interpreter\necho hi\n")
    script.chmod(0o755)
    with pytest.raises(SpawnError) as excinfo:
        await _run([str(script)])
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
        outcome = await _run(["sh", "-c", "ls /proc/self/fd"], lines)
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
    outcome = await _run(["sh", "-c", "readlink /proc/self/fd/0; read -r x; echo read=$?"], lines)
    assert outcome == CommandOutcome(0)
    assert [line for _stream, line in lines] == ["/dev/null", "read=1"]


async def test_the_job_starts_with_default_signal_dispositions() -> None:
    """Python ignores SIGPIPE (``yes | head`` would never end), the daemon may ignore more and
    block some: a job inherits none of it."""
    previous = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        lines: Lines = []
        outcome = await _run(["sh", "-c", "grep -E '^Sig(Ign|Blk)' /proc/self/status"], lines)
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
                grace_s=_grace,
            )

    assert await run() == CommandOutcome(0)
    (first / "job").unlink()
    assert await run() == CommandOutcome(0)
    assert [line for _stream, line in lines] == ["first", "second"]


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
            grace_s=_grace,
        )
    )
    async with asyncio.timeout(20):
        await ready.wait()
        supervisor.kill_all()
        assert await task == CommandOutcome(137, "SIGKILL")


async def _exited(pid: int) -> None:
    pidfd = os.pidfd_open(pid)
    try:
        await wait_readable(pidfd)
    finally:
        os.close(pidfd)


async def test_reaper_reaps_a_zombie_that_is_not_its_own() -> None:
    pid = os.fork()
    if pid == 0:
        os.setsid()  # like an orphan of a job: a session other than the daemon's
        os._exit(5)
    await _exited(pid)
    assert pid in zombie_children(os.getpid())
    assert pid in ChildSupervisor().reap_orphans()
    assert pid not in zombie_children(os.getpid())
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # noqa: ASYNC222 (WNOHANG does not block)


async def test_reaper_leaves_a_fresh_zombie_of_the_daemons_own_session() -> None:
    """A Python handler's own subprocesses share the daemon's session; the event loop waits
    for them, so the reaper must not take an exit status that is about to be collected."""
    pid = os.fork()
    if pid == 0:
        os._exit(6)
    await _exited(pid)
    assert pid in zombie_children(os.getpid())
    assert pid not in zombie_children(os.getpid(), exclude_session=os.getsid(0))
    now = [100.0]
    supervisor = ChildSupervisor(clock=lambda: now[0])
    assert supervisor.reap_orphans() == []
    now[0] += UNCLAIMED_ZOMBIE_S / 2
    assert supervisor.reap_orphans() == []
    assert os.waitpid(pid, os.WNOHANG) == (pid, 6 << 8)  # noqa: ASYNC222 (does not block)


async def test_reaper_takes_a_zombie_of_its_own_session_that_nobody_claims() -> None:
    """Orphans of a handler's grandchildren, or of a docker exec session, are in the daemon's
    own session too: one that stays unclaimed is reaped, not left for good."""
    pid = os.fork()
    if pid == 0:
        os._exit(6)
    await _exited(pid)
    now = [100.0]
    supervisor = ChildSupervisor(clock=lambda: now[0])
    assert supervisor.reap_orphans() == []  # first seen
    now[0] += UNCLAIMED_ZOMBIE_S
    assert supervisor.reap_orphans() == [pid]
    assert pid not in zombie_children(os.getpid())


def test_reaper_never_takes_a_zombie_the_supervisor_owns(short_dir: Path) -> None:
    """uvloop (what the daemon runs) collects its children only on the loop's thread, so while
    this sink blocks the loop the job's leader is an owned zombie: the reaper must leave it,
    or ``proc.wait()`` would never return and the exit status would be lost."""
    fifo = short_dir / "go"
    os.mkfifo(fifo)
    seen: dict[str, list[int]] = {}
    supervisor = ChildSupervisor()

    def sink(_stream: str, line: str) -> None:
        leader = int(line)
        pidfd = os.pidfd_open(leader)
        try:
            _release(fifo)
            readable, _, _ = select.select([pidfd], [], [], 10)
            assert readable, "the job did not exit"
        finally:
            os.close(pidfd)
        seen["leader"] = [leader]
        seen["zombies"] = zombie_children(os.getpid())
        seen["reaped"] = supervisor.reap_orphans()

    async def scenario() -> CommandOutcome:
        async with asyncio.timeout(20):
            return await supervisor.run_command(
                ["sh", "-c", 'echo $$; read x < "$1"; exit 7', "job", str(fifo)],
                JOB_ENV,
                each_line(sink),
                grace_s=_grace,
            )

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        outcome = runner.run(scenario())
    assert seen["leader"][0] in seen["zombies"], "the scenario did not produce an owned zombie"
    assert seen["reaped"] == []
    assert outcome == CommandOutcome(7)


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
            ["sh", "-c", script], JOB_ENV, slow_sink, grace_s=_grace
        )
    assert outcome == CommandOutcome(0)
    assert [line for _stream, line in lines] == [
        f"line {i:07d} padded to about seventy bytes of text" for i in range(count)
    ]
