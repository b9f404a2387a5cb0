"""A run's output flow: readers hold it back, the child's pipes pause while any does, and a
reader that holds it too long is let go; and a job's lines in the daemon's log, in each mode."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import threading
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.journal import FollowerHold, RunLog
from daemon.core.runqueue import Run, RunRequest
from daemon.core.runqueue.flow import OutputFlow
from daemon.log.jsonlines import json_lines
from daemon.log.logs import configure_logging
from daemon.log.output_log import OutputLog, _write_all


class Pipes:
    """What the flow pauses and resumes: the child's pipes, as a record of calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def pause(self) -> None:
        self.calls.append("pause")

    def resume(self) -> None:
        self.calls.append("resume")


def _flow_of_a_child(hold_max_s: float) -> tuple[OutputFlow, Pipes]:
    """A run's output flow connected to its child's pipes, recorded."""
    flow, pipes = OutputFlow(hold_max_s=hold_max_s), Pipes()
    flow.connect(pipes.pause, pipes.resume)
    return flow, pipes


async def test_the_pipes_pause_while_any_reader_holds_and_resume_when_none_does() -> None:
    flow, pipes = _flow_of_a_child(60)

    def first() -> None: ...
    def second() -> None: ...

    assert flow.hold(first)
    assert flow.hold(second)
    assert flow.hold(first)  # again: still one hold
    assert pipes.calls == ["pause"]
    flow.release(first)
    assert pipes.calls == ["pause"]  # the second still holds
    flow.release(second)
    assert pipes.calls == ["pause", "resume"]
    flow.release(second)  # not holding: nothing
    assert pipes.calls == ["pause", "resume"]
    assert not flow.held


async def test_a_reader_that_holds_too_long_is_let_go_and_the_pipes_resume() -> None:
    flow, pipes = _flow_of_a_child(0.01)
    let_go = asyncio.Event()
    assert flow.hold(let_go.set)
    async with asyncio.timeout(10):
        await let_go.wait()
    assert pipes.calls == ["pause", "resume"]
    assert not flow.held


async def test_a_reader_that_raises_when_let_go_never_reaches_the_loop() -> None:
    flow, pipes = _flow_of_a_child(0.01)
    called = asyncio.Event()

    def broken() -> None:
        called.set()
        raise RuntimeError("reader bug")

    assert flow.hold(broken)
    async with asyncio.timeout(10):
        await called.wait()
    assert pipes.calls == ["pause", "resume"]


async def test_nothing_is_held_without_a_child_or_when_holding_is_off() -> None:
    def reader() -> None: ...

    assert not OutputFlow(hold_max_s=5).hold(reader)  # no child connected
    off, pipes = OutputFlow(hold_max_s=0), Pipes()
    off.connect(pipes.pause, pipes.resume)
    assert not off.hold(reader)
    assert pipes.calls == []


async def test_a_hold_made_before_the_child_pauses_it_at_once_and_ends_with_it() -> None:
    flow, _pipes = _flow_of_a_child(60)

    def reader() -> None: ...

    assert flow.hold(reader)
    flow.disconnect()  # the child is gone: its holds with it, its timers cancelled
    assert not flow.held
    later = Pipes()
    flow.connect(later.pause, later.resume)
    assert later.calls == []


@pytest.fixture
def log_to() -> Iterator[io.StringIO]:
    """The daemon's log set up as at start (JSON lines), to a buffer of this test's."""
    out = io.StringIO()
    configure_logging("json", "info", out)
    yield out
    structlog.reset_defaults()
    logging.getLogger().handlers.clear()


def test_json_mode_writes_one_run_output_event_a_line_in_the_logs_shape(
    log_to: io.StringIO,
) -> None:
    write = OutputLog("json").writer({"run_id": "r1", "task": "chatty"})
    assert write is not None
    write("stdout", ["one", 'two "quoted" \u20ac', ""])
    write("stderr", ["oops"])
    lines = [json.loads(line) for line in log_to.getvalue().splitlines()]
    assert [(line["stream"], line["line"]) for line in lines] == [
        ("stdout", "one"),
        ("stdout", 'two "quoted" \u20ac'),
        ("stdout", ""),
        ("stderr", "oops"),
    ]
    for line in lines:
        assert (line["event"], line["level"], line["run_id"], line["task"]) == (
            "run.output",
            "info",
            "r1",
            "chatty",
        )
        assert line["timestamp"].endswith("Z")


def test_json_mode_writes_the_bytes_beneath_a_text_stream_after_what_it_holds() -> None:
    beneath = io.BytesIO()
    out = io.TextIOWrapper(beneath)  # a text stream over bytes, as sys.stdout is
    configure_logging("json", "info", out)
    try:
        structlog.get_logger("t").info("before")  # held in the text layer, not the bytes
        write = OutputLog("json").writer({"run_id": "r1", "task": "chatty"})
        assert write is not None
        write("stdout", ["line"])
    finally:
        structlog.reset_defaults()
        logging.getLogger().handlers.clear()
    first, second = (json.loads(line) for line in beneath.getvalue().splitlines())
    assert (first["event"], second["event"], second["line"]) == ("before", "run.output", "line")


def test_json_mode_at_warning_and_off_mode_log_nothing(log_to: io.StringIO) -> None:
    assert OutputLog("off").writer({"run_id": "r1", "task": "t"}) is None
    configure_logging("json", "warning", log_to)
    assert OutputLog("json").writer({"run_id": "r1", "task": "t"}) is None


def test_raw_mode_passes_lines_through_each_to_its_stream(
    capsys: pytest.CaptureFixture[str],
) -> None:
    write = OutputLog("raw").writer({"run_id": "r1", "task": "t"})
    assert write is not None
    write("stdout", ['{"level": "info", "msg": "own json"}', "plain"])
    write("stderr", ["to stderr"])
    captured = capsys.readouterr()
    assert captured.out == '{"level": "info", "msg": "own json"}\nplain\n'
    assert captured.err == "to stderr\n"


def test_in_the_console_format_lines_go_through_structlog_for_people() -> None:
    out = io.StringIO()
    configure_logging("console", "info", out)
    try:
        write = OutputLog("json").writer({"run_id": "r1", "task": "t"})
        assert write is not None
        write("stdout", ["for people"])
    finally:
        structlog.reset_defaults()
        logging.getLogger().handlers.clear()
    assert "run.output" in out.getvalue()
    assert "for people" in out.getvalue()
    assert not out.getvalue().startswith("{")


async def test_a_trim_keeps_what_a_follower_has_not_read_while_it_holds_the_run_back() -> None:
    log = RunLog(Run(RunRequest(task="chatty")), bytes_max=640 * 1024)
    flow, pipes = _flow_of_a_child(60)
    log.flow = flow
    reader = FollowerHold()  # at line 0
    log.follow(lambda: None, reader)
    read = ["x" * 100] * 1000  # what one read of the pipe gives
    for _ in range(6):
        log.add_lines("stdout", read)
    assert log.first_seq == 0, "the follower's unread lines are kept"
    assert reader.holding is flow
    assert pipes.calls == ["pause"]
    assert log.bytes < log.bytes_max + 2 * 160_000  # past the bound by what was read
    reader.seq = log.end_seq  # it has read them all
    reader.caught_up()
    assert pipes.calls == ["pause", "resume"]
    log.add_lines("stdout", read)
    assert log.first_seq > 0  # trimmed again, down to the bound
    assert log.bytes <= log.bytes_max
    assert reader.holding is None


async def test_a_follower_let_go_or_unable_to_hold_loses_lines_and_the_bound_holds() -> None:
    log = RunLog(Run(RunRequest(task="chatty")), bytes_max=640 * 1024)
    flow, pipes = _flow_of_a_child(60)
    log.flow = flow
    reader = FollowerHold()
    log.follow(lambda: None, reader)
    read = ["x" * 100] * 1000
    for _ in range(6):
        log.add_lines("stdout", read)
    assert reader.holding is flow
    flow.disconnect()  # as the flow does when it lets a reader go for holding too long
    reader._let_go()
    log.add_lines("stdout", read)
    assert log.first_seq > 0  # it lost lines: counted by its reader, as before
    assert log.bytes <= log.bytes_max
    assert not reader.take(flow)  # let go: no hold until it has caught up
    off = RunLog(Run(RunRequest(task="chatty")), bytes_max=640 * 1024)
    off.flow = OutputFlow(hold_max_s=0)  # RUNBROKER_OUTPUT_HOLD=0: nothing is ever held
    off.flow.connect(pipes.pause, pipes.resume)
    off.follow(lambda: None, FollowerHold())
    for _ in range(7):
        off.add_lines("stdout", read)
    assert off.first_seq > 0
    assert off.bytes <= off.bytes_max


class Broken(io.StringIO):
    """The daemon's stdout once its reader has gone."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        raise BrokenPipeError(32, "Broken pipe")


def test_a_failing_output_is_said_once_and_the_run_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken = Broken()
    monkeypatch.setattr("sys.stdout", broken)
    write = OutputLog("raw").writer({"run_id": "r1", "task": "t"})
    assert write is not None
    with structlog.testing.capture_logs() as logged:
        write("stdout", ["one"])  # raises nothing into the job's reading
        write("stdout", ["two"])
    assert broken.writes == 1  # given up after the first failure
    assert [(e["event"], e["run_id"], e["error"]) for e in logged] == [
        ("output.log_failed", "r1", "BrokenPipeError")
    ]


def test_every_byte_reaches_a_descriptor_that_takes_writes_in_parts() -> None:
    """A pipe that takes only part of a write (non-blocking here; a signal or the raw stdout
    of PYTHONUNBUFFERED does the same to a blocking one): every byte is written on, in order."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    data = bytes(range(256)) * 8192  # 2 MiB: many times what the pipe holds
    got = bytearray()

    def drain() -> None:
        while chunk := os.read(read_end, 65536):
            got.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    with os.fdopen(write_end, "w") as out:
        _write_all(out, data)
    reader.join(10)
    os.close(read_end)
    assert bytes(got) == data


@given(st.lists(st.text(), max_size=40))
def test_json_lines_are_each_line_as_a_json_string_between_head_and_tail(lines: list[str]) -> None:
    """Whatever the lines hold (quotes, backslashes, controls, any character, lone surrogates),
    each comes out as its own JSON line: the list's JSON cut apart, or the slow path."""
    out = json_lines(b'{"k":1,"x":', lines, b"}\n")
    parsed = [json.loads(line) for line in out.split(b"\n")[:-1]]
    assert [obj["x"] for obj in parsed] == lines
    assert all(obj["k"] == 1 for obj in parsed)
