"""The thin client against a fake daemon speaking the wire protocol: exit codes, output,
detach, JSON, tolerance of unknown events, time-outs; and what a cold client imports."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from daemon.face import cli
from daemon.wire import client
from daemon.wire.protocol import ControlRequest, SubmitRequest
from tests.support.frames import batch_frame
from tests.unit.conftest import REPO

Answer = dict[str, Any] | bytes

QUEUED = {"event": "queued", "ok": True, "id": "r1", "position": 1, "task": "default"}
STARTED = {"event": "started", "ok": True, "id": "r1", "task": "default"}


def _line(answer: Answer) -> bytes:
    if isinstance(answer, bytes):
        return answer if answer.endswith(b"\n") else answer + b"\n"
    return json.dumps(answer).encode() + b"\n"


@contextmanager
def fake_daemon(path: Path, *answers: Answer, hold: bool = False) -> Iterator[list[Any]]:
    """Serve one connection: record its request, send ``answers``, then close (or, with
    ``hold``, keep the connection open until the test is over)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    listener.settimeout(10)
    requests: list[Any] = []
    done = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            requests.append(json.loads(data))
            for answer in answers:
                conn.sendall(_line(answer))
            if hold:
                done.wait(10)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield requests
    finally:
        done.set()
        thread.join(10)
        listener.close()


def _trigger(
    path: Path, request: SubmitRequest | None = None, **options: Any
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = client.trigger(str(path), request or SubmitRequest(), out=out, err=err, **options)
    return code, out.getvalue(), err.getvalue()


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
        code, out, err = _trigger(path, request)
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
        code, out, _err = _trigger(path, as_json=True)
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
        code, _out, err = _trigger(path, as_json=as_json)
    assert code == client.EXIT_OK  # the run's own status: it succeeded
    said = "runbroker: 1234 lines dropped: this client read more slowly than the run wrote"
    assert said in err.splitlines()


def test_a_failed_run_exits_1_with_its_reason(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    done = {"event": "done", "ok": False, "id": "r1", "reason": "exit status 3", "exit_code": 3}
    with fake_daemon(path, QUEUED, STARTED, done):
        code, _out, err = _trigger(path)
    assert code == client.EXIT_FAILED
    assert "runbroker: failed: exit status 3" in err


@pytest.mark.parametrize("reason", ["run queue is full", "scheduler is shutting down"])
def test_rejections_exit_75(short_dir: Path, reason: str) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, {"event": "done", "ok": False, "reason": reason}):
        code, _out, err = _trigger(path)
    assert code == client.EXIT_TEMPFAIL == 75
    assert err == f"runbroker: rejected: {reason}\n"


@pytest.mark.parametrize(
    "reason",
    [
        "unknown task 'nosuch': this container defines default, report",
        "task 'report' does not accept args",
        "task 'report' does not allow env 'SECRET'",
        "undecodable request",
    ],
)
def test_a_request_the_daemon_refuses_is_a_usage_error(short_dir: Path, reason: str) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, {"event": "done", "ok": False, "reason": reason}):
        code, out, err = _trigger(path)
    assert code == client.EXIT_USAGE == 2
    assert (out, err) == ("", f"runbroker: refused: {reason}\n")
    with fake_daemon(short_dir / "json.sock", {"event": "done", "ok": False, "reason": reason}):
        assert _trigger(short_dir / "json.sock", as_json=True)[0] == client.EXIT_USAGE


def test_a_run_refused_after_it_was_queued_is_a_failure(short_dir: Path) -> None:
    # A task removed between queueing and starting: the run exists, and it failed.
    path = short_dir / "rb.sock"
    done = {"event": "done", "ok": False, "reason": "unknown task 'gone': this container ..."}
    with fake_daemon(path, QUEUED, done):
        code, _out, err = _trigger(path)
    assert code == client.EXIT_FAILED
    assert "runbroker: failed: unknown task 'gone'" in err


def test_another_uid_refused_is_unavailable_not_a_usage_error(short_dir: Path) -> None:
    """Refused by the daemon's peer check: the same exit (69) as a socket whose mode refuses
    the user, with the reason in words."""
    path = short_dir / "rb.sock"
    with fake_daemon(path, {"event": "done", "ok": False, "reason": "permission denied"}):
        code, _out, err = _trigger(path)
    assert code == client.EXIT_UNAVAILABLE
    assert "permission denied" in err


@pytest.mark.parametrize(
    ("events", "exit_code"),
    [
        # Refused before a run existed: the code says which refusal, whatever the words.
        ([{"reason": "run queue is full", "code": "queue_full"}], 75),
        ([{"reason": "the queue has no room", "code": "queue_full"}], 75),
        ([{"reason": "stopping now", "code": "shutting_down"}], 75),
        ([{"reason": "server busy: too many connections", "code": "busy"}], 75),
        ([{"reason": "run queue is full", "code": "bad_request"}], 2),
        ([{"reason": "not for you", "code": "forbidden"}], 69),
        ([{"reason": "permission denied", "code": "unknown_task"}], 2),
        # A run's end: a handler's own words that read as a refusal are still a failure.
        ([QUEUED, {"reason": "run queue is full", "code": "failed"}], 1),
        ([QUEUED, {"reason": "server busy: too many connections", "code": "failed"}], 1),
        ([QUEUED, {"reason": "cancelled by request", "code": "cancelled"}], 1),
        # A daemon older than the code: the reason's text decides.
        ([{"reason": "run queue is full"}], 75),
        ([{"reason": "server busy: too many unfinished requests"}], 75),
        ([{"reason": "permission denied"}], 69),
        ([{"reason": "the queue has no room"}], 2),
    ],
)
def test_the_exit_code_follows_the_code_beside_the_reason(
    short_dir: Path, events: list[dict[str, Any]], exit_code: int
) -> None:
    path = short_dir / "rb.sock"
    *before, last = events
    with fake_daemon(path, *before, {"event": "done", "ok": False, **last}):
        assert _trigger(path)[0] == exit_code


def test_a_cancelled_run_exits_1_not_75(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    done = {"event": "done", "ok": False, "reason": "cancelled: scheduler shutting down"}
    with fake_daemon(path, QUEUED, done):
        assert _trigger(path)[0] == client.EXIT_FAILED


def test_unreachable_daemon_exits_69(short_dir: Path) -> None:
    code, _out, err = _trigger(short_dir / "missing.sock")
    assert code == client.EXIT_UNAVAILABLE == 69
    assert "daemon unreachable at" in err
    stale = short_dir / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bound:
        bound.bind(str(stale))  # a socket file nobody listens on
        assert _trigger(stale)[0] == client.EXIT_UNAVAILABLE


def test_a_connection_closed_before_the_result_exits_69(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, QUEUED, STARTED):
        code, _out, err = _trigger(path)
    assert code == client.EXIT_UNAVAILABLE
    assert "closed before the run's result" in err


def test_detach_returns_once_queued_and_prints_the_id(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, QUEUED, hold=True):
        code, out, _err = _trigger(path, detach=True, timeout_s=5)
    assert code == client.EXIT_OK
    assert out == "r1\n"


def test_detach_with_json_prints_the_queued_event_only(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, QUEUED, hold=True):
        code, out, _err = _trigger(path, detach=True, as_json=True, timeout_s=5)
    assert code == client.EXIT_OK
    assert [json.loads(line) for line in out.splitlines()] == [QUEUED]


def test_detach_still_reports_a_rejection(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, {"event": "done", "ok": False, "reason": "run queue is full"}):
        assert _trigger(path, detach=True)[0] == client.EXIT_TEMPFAIL


def test_json_prints_the_raw_events(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    events: list[dict[str, Any]] = [
        QUEUED,
        STARTED,
        {"event": "output", "ok": True, "id": "r1", "stream": "stderr", "line": "é"},
        {"event": "done", "ok": True, "id": "r1", "exit_code": 0},
    ]
    with fake_daemon(path, *events):
        code, out, err = _trigger(path, as_json=True)
    assert code == client.EXIT_OK
    assert [json.loads(line) for line in out.splitlines()] == events
    assert err == ""


def test_unknown_events_fields_and_garbage_are_ignored(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    answers: list[Answer] = [
        {**QUEUED, "colour": "red"},
        {"event": "progress", "ok": True, "percent": 50},
        b"this is not json",
        b'{"no": "event"}',
        b"[1, 2]",
        {**STARTED, "host": "x"},
        {"event": "done", "ok": True, "id": "r1", "future": {"nested": [1]}},
    ]
    with fake_daemon(path, *answers):
        code, out, err = _trigger(path)
    assert code == client.EXIT_OK
    assert out == ""
    assert err.splitlines() == [
        "runbroker: queued r1 (position 1)",
        "runbroker: started r1",
        "runbroker: done",
    ]


def test_timeout_gives_up_and_says_the_run_goes_on(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, QUEUED, STARTED, hold=True):
        code, _out, err = _trigger(path, timeout_s=0.2)
    assert code == client.EXIT_GAVE_UP == 124  # not 1: the run has not failed
    assert "gave up waiting; run r1 goes on" in err


def test_an_interrupt_exits_130(short_dir: Path) -> None:
    class Interrupting(io.StringIO):
        def write(self, text: str) -> int:
            if "hello" in text:
                raise KeyboardInterrupt
            return super().write(text)

    path = short_dir / "rb.sock"
    output = {"event": "output", "ok": True, "id": "r1", "stream": "stdout", "line": "hello"}
    with fake_daemon(path, QUEUED, STARTED, output, hold=True):
        err = io.StringIO()
        code = client.trigger(str(path), SubmitRequest(), out=Interrupting(), err=err)
    assert code == client.EXIT_INTERRUPTED == 130
    assert "interrupted; run r1 goes on" in err.getvalue()


def test_control_returns_the_single_answer(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    answer = {"event": "cancel", "ok": True, "id": "r7", "state": "queued"}
    with fake_daemon(path, answer) as requests:
        assert client.control(str(path), ControlRequest("cancel", "r7")) == answer
    assert requests == [{"op": "cancel", "id": "r7"}]


def test_control_without_an_answer_is_unreachable(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path), pytest.raises(client.Unreachable, match="no answer"):
        client.control(str(path), ControlRequest("health"))
    with pytest.raises(client.Unreachable, match="unreachable"):
        client.control(str(short_dir / "missing.sock"), ControlRequest("health"))


def test_socket_path_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNBROKER_SOCKET", raising=False)
    assert client.socket_path_from_env() == "/run/runbroker/runbroker.sock"
    monkeypatch.setenv("RUNBROKER_SOCKET", "/tmp/x/rb.sock")
    assert client.socket_path_from_env() == "/tmp/x/rb.sock"


# -- through the command line ---------------------------------------------------------------


def test_cli_trigger_builds_the_request(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = short_dir / "rb.sock"
    done = {"event": "done", "ok": True, "id": "r1"}
    argv = ["trigger", "report", "--arg", "a1", "--arg", "a2", "--env", "K=v=w", "--timeout", "5s"]
    with fake_daemon(path, QUEUED, done) as requests:
        code = cli.main([*argv, "--socket", str(path), "--json"])
    assert code == 0
    expected = {"task": "report", "args": ["a1", "a2"], "env": {"K": "v=w"}, "batch": True}
    assert requests == [expected]
    assert [json.loads(line)["event"] for line in capsys.readouterr().out.splitlines()] == [
        "queued",
        "done",
    ]


@pytest.mark.parametrize("abbreviation", [[], ["--det"]])  # the fast path, then argparse
def test_cli_trigger_takes_values_that_start_with_a_dash(
    short_dir: Path, abbreviation: list[str]
) -> None:
    path = short_dir / "rb.sock"
    done = {"event": "done", "ok": True, "id": "r1"}
    argv = ["trigger", "report", "--arg", "--flag", "--arg", "-x", "--env", "K=-v", *abbreviation]
    with fake_daemon(path, QUEUED, done) as requests:
        code = cli.main([*argv, "--socket", str(path)])
    assert code == 0
    assert requests == [
        {"task": "report", "args": ["--flag", "-x"], "env": {"K": "-v"}, "batch": True}
    ]


@pytest.mark.parametrize(
    ("argv", "answer", "code", "printed"),
    [
        (["health"], {"event": "health", "ok": True}, 0, "healthy"),
        (["health"], {"event": "health", "ok": False, "reason": "shutting down"}, 1, "unhealthy"),
        (["cancel", "r7"], {"event": "cancel", "ok": True, "state": "running"}, 0, "cancelled r7"),
        (["cancel", "r7"], {"event": "cancel", "ok": False, "reason": "no run"}, 1, "no run"),
    ],
)
def test_cli_control_commands(
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    answer: dict[str, Any],
    code: int,
    printed: str,
) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, answer):
        assert cli.main([*argv, "--socket", str(path)]) == code
    captured = capsys.readouterr()
    assert printed in captured.out + captured.err


@pytest.mark.parametrize(
    ("argv", "code"),
    [(["status"], 69), (["status", "--json"], 69), (["cancel", "r7"], 69), (["health"], 1)],
)
def test_cli_control_commands_refused_by_the_peer_check_say_so(
    short_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int
) -> None:
    """The daemon answers a peer of another uid with a refusal instead of the op's answer: that
    is said in words, never shown as an empty status report or a failed cancel."""
    path = short_dir / "rb.sock"
    with fake_daemon(path, {"event": "done", "ok": False, "reason": "permission denied"}):
        assert cli.main([*argv, "--socket", str(path)]) == code
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == f"runbroker: {client.FORBIDDEN_TEXT}"


def test_cli_health_of_an_unreachable_daemon_is_1(short_dir: Path) -> None:
    assert cli.main(["health", "--socket", str(short_dir / "missing.sock")]) == 1


def test_cli_bad_timeout_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["trigger", "--timeout", "soon", "--socket", "/nonexistent/x.sock"])
    assert exit_info.value.code == 2
    assert "--timeout" in capsys.readouterr().err


def test_a_cold_trigger_never_imports_asyncio_pydantic_or_structlog() -> None:
    code = (
        "import daemon.face.cli, json, sys\n"
        "rc = daemon.face.cli.main(['trigger', '--socket', '/nonexistent/x.sock'])\n"
        "heavy = ('asyncio', 'pydantic', 'pydantic_settings', 'structlog', 'uvloop')\n"
        "print(json.dumps(sorted(m for m in heavy if m in sys.modules)))\n"
        "sys.exit(rc)\n"
    )
    root = REPO
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 69, result.stderr
    assert "daemon unreachable" in result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == []


@pytest.mark.parametrize(
    ("answers", "code"),
    [
        ([QUEUED, STARTED, {"event": "output", "line": "hi"}, {"event": "done", "ok": True}], 0),
        ([{"event": "done", "ok": False, "reason": "unknown task 'x': this container ..."}], 2),
        ([{"event": "done", "ok": False, "reason": "run queue is full"}], 75),
    ],
)
def test_a_plain_trigger_stays_off_argparse_difflib_and_typing(
    short_dir: Path, answers: list[Answer], code: int
) -> None:
    """The cold path of every answer: what it imports beyond a bare interpreter's modules."""
    path = short_dir / "rb.sock"
    script = (
        "import sys\n"
        "before = set(sys.modules)\n"  # an editable install's path finder imports a few itself
        "import daemon.face.cli\n"
        f"rc = daemon.face.cli.main(['trigger', 'x', '--socket', {str(path)!r}])\n"
        "slow = ('argparse', 'difflib', 'typing', 're', 'enum', 'contextlib', 'asyncio')\n"
        "print(','.join(sorted(m for m in slow if m in set(sys.modules) - before)))\n"
        "sys.exit(rc)\n"
    )
    root = REPO
    with fake_daemon(path, *answers):
        result = subprocess.run(
            [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=30
        )
    assert result.returncode == code, result.stderr
    assert result.stdout.splitlines()[-1] == ""


@pytest.mark.parametrize(
    ("words", "leaves"),
    [(["trigger"], True), (["status", "--json"], True), ([], True), (["run", "--", "true"], False)],
)
def test_only_short_lived_commands_leave_their_sockets_to_exit(
    words: list[str], leaves: bool
) -> None:
    assert cli.leaves_sockets_to_exit(words) is leaves


@pytest.mark.parametrize(
    ("answer", "code", "said"),
    [
        ({"ok": True, "added": [], "removed": [], "changed": [], "unchanged": ["a"]}, 0, ""),
        ({"ok": False, "reason": "tasks file /x: line 1"}, 1, "reload refused: tasks file"),
        ({"ok": False, "reason": "scheduler is shutting down"}, 75, "shutting down"),
        ({"ok": False, "reason": "stopping", "code": "shutting_down"}, 75, "refused: stopping"),
        (
            {"ok": False, "reason": "scheduler is shutting down", "code": "reload_refused"},
            1,
            "reload refused: scheduler",
        ),
        ({"ok": False, "reason": "unknown op 'reload'"}, 2, "does not know `reload`"),
    ],
)
def test_cli_reload_exit_codes(
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    answer: dict[str, Any],
    code: int,
    said: str,
) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, {"event": "done", **answer}):
        assert cli.main(["reload", "--socket", str(path)]) == code
    assert said in capsys.readouterr().err


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
    monkeypatch: pytest.MonkeyPatch, reader_leaves: bool
) -> None:
    read_end, write_end = os.pipe()
    stdout = _ReaderLeavesAfterFlush(write_end, read_end if reader_leaves else None)
    monkeypatch.setattr(sys, "stdout", stdout)
    try:
        code = cli.main(["version"])
        if not reader_leaves:  # a reader still there (| cat) gets it all and exit 0
            assert os.read(read_end, 100).startswith(b"runbroker ")
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
