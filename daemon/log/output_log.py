"""The daemon's own record of every job's output (``RUNBROKER_OUTPUT_LOG``).

In the JSON format the lines of one read of a pipe are encoded together at C speed
(``jsonlines``), because the structlog chain costs about 30 us a line and a chatty job would
wait for it.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import select
import sys
from collections.abc import Callable, Mapping
from typing import Literal, TextIO

from daemon.log.jsonlines import json_lines
from daemon.log.logs import get_logger, json_log_stream, log_enabled

OutputLogMode = Literal["json", "raw", "off"]
OUTPUT_LOG_MODES: tuple[OutputLogMode, ...] = ("json", "raw", "off")
LOGGER_NAME = "runbroker.output"

LineWriter = Callable[[str, list[str]], None]  # (stream, the lines of one read)
_UTC = datetime.UTC


def _timestamp() -> str:
    """As the log's other lines have it (structlog's ISO stamper, UTC)."""
    return datetime.datetime.now(tz=_UTC).isoformat().replace("+00:00", "Z")


class OutputLog:
    """Makes, for each run, the writer of its lines to the daemon's log (None: not logged)."""

    def __init__(self, mode: OutputLogMode) -> None:
        self.mode = mode

    def writer(self, fields: Mapping[str, str]) -> LineWriter | None:
        """The writer of one run's lines. ``fields`` are what its log lines carry (its id...)."""
        if self.mode == "off":
            return None
        if self.mode == "raw":
            return _guarded(_write_raw, fields)
        if not log_enabled(logging.INFO, LOGGER_NAME):
            return None
        out = json_log_stream()
        if out is None:
            return _structlog_writer(fields)
        return _guarded(_json_writer(out, fields), fields)


def _guarded(write: LineWriter, fields: Mapping[str, str]) -> LineWriter:
    """``write``, until the daemon's output fails (a closed pipe, a full disk): then said once
    and no more lines of the run, which go on to its clients and the journal. (The log's
    other lines go through stdlib logging, which swallows such errors itself.)"""
    broken = False

    def guarded(stream: str, lines: list[str]) -> None:
        nonlocal broken
        if broken:
            return
        try:
            write(stream, lines)
        except (OSError, ValueError) as exc:
            broken = True
            get_logger(LOGGER_NAME).error("output.log_failed", **fields, error=type(exc).__name__)

    return guarded


def _write_raw(stream: str, lines: list[str]) -> None:
    text = "\n".join(lines) + "\n"
    _write_all(sys.stderr if stream == "stderr" else sys.stdout, text.encode("utf-8", "replace"))


def _write_all(out: TextIO, data: bytes) -> None:
    """All of ``data`` to ``out``, after what its text layer holds, written to its descriptor
    until every byte is taken: a write of a pipe may be cut short by a signal, and the raw
    stdout of PYTHONUNBUFFERED (a common container setting) would drop the rest, as would
    the text layer over it. A stream without a descriptor (a test's) takes text."""
    try:
        fd = out.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        out.write(data.decode("utf-8", "replace"))
        out.flush()
        return
    out.flush()
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:  # a descriptor made non-blocking: wait until it takes more
            select.select([], [fd], [])
            continue
        view = view[written:]


def _json_writer(out: TextIO, fields: Mapping[str, str]) -> LineWriter:
    # Every line of the run is this head, its time and stream, the line's text, and "}\n".
    known = json.dumps({"event": "run.output", "level": "info", **fields}, separators=(",", ":"))
    head = known[:-1].encode() + b',"timestamp":"'
    middle = {name: f'","stream":"{name}","line":'.encode() for name in ("stdout", "stderr")}

    def write(stream: str, lines: list[str]) -> None:
        _write_all(out, json_lines(head + _timestamp().encode() + middle[stream], lines, b"}\n"))

    return write


def _structlog_writer(fields: Mapping[str, str]) -> LineWriter:
    log = get_logger(LOGGER_NAME)

    def write(stream: str, lines: list[str]) -> None:
        for line in lines:
            log.info("run.output", **fields, stream=stream, line=line)

    return write
