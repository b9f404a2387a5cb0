"""A job's lines in the daemon's log (daemon/log/output_log.py), in each mode and format: one
event a line in the logs' shape, raw lines to their streams, nothing when off, and a failing
output said once."""

from __future__ import annotations

import io
import json
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

import pytest
import structlog

from daemon.log.logs import LogFormat, configure_logging
from daemon.log.output_log import OutputLog, _write_all


@contextmanager
def _logging(log_format: LogFormat, level: str, out: TextIO) -> Iterator[None]:
    """The daemon's log set up as at start, to ``out``, for the block; structlog's defaults
    and no handler after it."""
    configure_logging(log_format, level, out)
    try:
        yield
    finally:
        structlog.reset_defaults()
        logging.getLogger().handlers.clear()


@pytest.fixture
def log_to() -> Iterator[io.StringIO]:
    """The daemon's log set up as at start (JSON lines), to a buffer of this test's."""
    out = io.StringIO()
    with _logging("json", "info", out):
        yield out


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
    with _logging("json", "info", out):
        structlog.get_logger("t").info("before")  # held in the text layer, not the bytes
        write = OutputLog("json").writer({"run_id": "r1", "task": "chatty"})
        assert write is not None
        write("stdout", ["line"])
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
    with _logging("console", "info", out):
        write = OutputLog("json").writer({"run_id": "r1", "task": "t"})
        assert write is not None
        write("stdout", ["for people"])
    assert "run.output" in out.getvalue()
    assert "for people" in out.getvalue()
    assert not out.getvalue().startswith("{")


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
