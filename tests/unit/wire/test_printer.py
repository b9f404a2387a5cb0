"""What the thin client prints (daemon/wire/printer.py): each stream's lines a read at a time, in
order, JSON lines, dropped lines in words, a batch's lines whole, and a reader gone (141)."""

from __future__ import annotations

import io
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from daemon.face import cli
from daemon.wire import client
from daemon.wire.protocol import SubmitRequest
from tests.support.fake_daemon import QUEUED, STARTED, Answer, fake_daemon, trigger
from tests.support.frames import batch_frame


def test_success_streams_output_and_exits_0(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    answers: list[Answer] = [
        QUEUED,
        STARTED,
        {"event": "output", "ok": True, "id": "r1", "stream": "stdout", "line": "hello"},
        {"event": "output", "ok": True, "id": "r1", "stream": "stderr", "line": "careful"},
        {"event": "done", "ok": True, "id": "r1", "exit_code": 0, "duration_ms": 12},
    ]
    request = SubmitRequest(task="report", args=("a1",), env={"LEVEL": "2"})
    with fake_daemon(path, *answers) as requests:
        code, out, err = trigger(path, request)
    assert code == client.EXIT_OK
    assert requests == [{"task": "report", "args": ["a1"], "env": {"LEVEL": "2"}, "batch": True}]
    assert out == "hello\n"
    assert err.splitlines() == [
        "runbroker: queued r1 (position 1)",
        "runbroker: started r1",
        "careful",
        "runbroker: done in 12 ms",
    ]


def _batch(stream: str, *lines: str) -> bytes:
    return batch_frame("r1", stream, *lines)


class Writes(io.StringIO):
    """A stream that records each write and each flush, in order, across two streams."""

    def __init__(self, name: str, record: list[str]) -> None:
        super().__init__()
        self.name_, self.record = name, record

    def write(self, text: str) -> int:
        self.record.append(f"{self.name_}:{text}")
        return super().write(text)

    def flush(self) -> None:
        self.record.append(f"{self.name_}:flush")
        super().flush()


def test_batched_output_is_written_a_read_at_a_time_in_order_across_streams(
    short_dir: Path,
) -> None:
    path = short_dir / "rb.sock"
    done = {"event": "done", "ok": True, "id": "r1", "exit_code": 0}
    first, second, third = _batch("stdout", "a", "b"), _batch("stderr", "e"), _batch("stdout", "c")
    answers: list[Answer] = [QUEUED, STARTED, first, second, third, done]
    record: list[str] = []
    out, err = Writes("out", record), Writes("err", record)
    with fake_daemon(path, *answers):
        code = client.trigger(str(path), SubmitRequest(), out=out, err=err)
    assert code == client.EXIT_OK
    assert out.getvalue() == "a\nb\nc\n"
    assert err.getvalue().splitlines()[2:] == ["e", "runbroker: done"]
    # One write for a read's lines; the other stream flushed before a stream is written to.
    writes = [entry for entry in record if entry not in ("out:\n", "err:\n")]
    a_b, e, c = writes.index("out:a\nb\n"), writes.index("err:e\n"), writes.index("out:c\n")
    assert a_b < e < c
    assert "out:flush" in writes[a_b:e]
    assert "err:flush" in writes[e:c]


def test_json_prints_a_batch_as_an_output_line_for_each_line(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    done = {"event": "done", "ok": True, "id": "r1"}
    with fake_daemon(path, QUEUED, _batch("stderr", "x", "y"), done):
        code, out, _err = trigger(path, as_json=True)
    assert code == client.EXIT_OK
    printed = [json.loads(line) for line in out.splitlines()]
    assert printed[1:3] == [
        {"event": "output", "ok": True, "id": "r1", "stream": "stderr", "line": "x"},
        {"event": "output", "ok": True, "id": "r1", "stream": "stderr", "line": "y"},
    ]


@pytest.mark.parametrize("as_json", [False, True])
def test_lines_the_daemon_dropped_are_said_in_words_with_the_count(
    short_dir: Path, as_json: bool
) -> None:
    path = short_dir / "rb.sock"
    done = {"event": "done", "ok": True, "id": "r1", "exit_code": 0, "dropped_lines": 1234}
    with fake_daemon(path, QUEUED, STARTED, _batch("stdout", "kept"), done):
        code, _out, err = trigger(path, as_json=as_json)
    assert code == client.EXIT_OK  # the run's own status: it succeeded
    said = "runbroker: 1234 lines dropped: this client read more slowly than the run wrote"
    assert said in err.splitlines()


def test_json_prints_the_raw_events(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    events: list[dict[str, Any]] = [
        QUEUED,
        STARTED,
        {"event": "output", "ok": True, "id": "r1", "stream": "stderr", "line": "é"},
        {"event": "done", "ok": True, "id": "r1", "exit_code": 0},
    ]
    with fake_daemon(path, *events):
        code, out, err = trigger(path, as_json=True)
    assert code == client.EXIT_OK
    assert [json.loads(line) for line in out.splitlines()] == events
    assert err == ""


class _ReaderLeavesAfterFlush(io.TextIOWrapper):
    """Our stdout: a pipe whose reader reads nothing more and exits once our output is in
    the pipe, as ``head -1`` does after the first line of output that fit the pipe."""

    def __init__(self, write_end: int, read_end: int | None) -> None:
        super().__init__(io.FileIO(write_end, "w"), encoding="utf-8")
        self.read_end = read_end

    def flush(self) -> None:
        super().flush()
        if self.read_end is not None and not self.closed:
            os.close(self.read_end)
            self.read_end = None


@pytest.mark.parametrize("reader_leaves", [True, False])
def test_a_reader_gone_after_the_output_fit_the_pipe_ends_141(
    monkeypatch: pytest.MonkeyPatch, short_dir: Path, reader_leaves: bool
) -> None:
    path = short_dir / "rb.sock"
    answers: list[Answer] = [
        QUEUED,
        {"event": "output", "ok": True, "id": "r1", "stream": "stdout", "line": "hello"},
        {"event": "done", "ok": True, "id": "r1", "exit_code": 0},
    ]
    read_end, write_end = os.pipe()
    stdout = _ReaderLeavesAfterFlush(write_end, read_end if reader_leaves else None)
    monkeypatch.setattr(sys, "stdout", stdout)
    try:
        with fake_daemon(path, *answers):
            code = cli.main(["trigger", "report", "--socket", str(path)])
        if not reader_leaves:  # a reader still there (| cat) gets it all and exit 0
            assert os.read(read_end, 100) == b"hello\n"
    finally:
        monkeypatch.undo()
        stdout.close()
        if not reader_leaves:
            os.close(read_end)
    assert code == (client.EXIT_BROKEN_PIPE if reader_leaves else 0)


def test_a_batchs_lines_are_taken_whole_whatever_they_hold_and_however_they_arrive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch's bytes may look like answer lines, and arrive a few bytes a read: they are the
    run's lines all the same, and what follows them is the next answer line."""
    lines = ['a "quoted" line', '{"event":"done","ok":false}', "", "\u20ac"]
    answer = batch_frame("r1", "stdout", *lines) + b'{"event":"done","ok":true,"id":"r1"}\n'
    ours, theirs = socket.socketpair()
    theirs.sendall(answer)
    theirs.close()
    monkeypatch.setattr("daemon.wire.client_socket.RECV_BYTES", 5)
    events = [
        {**event, "data": bytes(event["data"])} if "data" in event else event  # a copy: the
        for event in client.Connection(ours).events(None, batches=True)  # view is the buffer's
    ]
    ours.close()
    assert [event["event"] for event in events] == ["output", "done"]
    assert events[0]["data"] == "".join(f"{line}\n" for line in lines).encode()
    assert events[1]["ok"] is True
