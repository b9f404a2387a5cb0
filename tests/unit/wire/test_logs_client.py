"""``runbroker logs`` on the client's side: which request the arguments make, how the answer
is printed, and the exit codes (against a fake daemon)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from daemon.face.logs import logs_request
from daemon.wire.logs_client import logs, runs_table
from daemon.wire.protocol import LogsRequest
from tests.support.fake_daemon import fake_daemon

HEADER = {
    "event": "logs",
    "ok": True,
    "id": "r1a2b3c4d-7",
    "task": "chatty",
    "trigger": "tick",
    "state": "running",
    "started_at": 1796180000.0,
    "dropped_lines": 0,
}
OUT = {"event": "output", "ok": True, "id": "r1a2b3c4d-7", "stream": "stdout", "line": "out"}
ERR = {**OUT, "stream": "stderr", "line": "err"}
FAILED = {"event": "done", "ok": False, "id": "r1a2b3c4d-7", "reason": "exit status 3"}


@pytest.mark.parametrize(
    ("target", "task", "request_"),
    [
        ("", "", LogsRequest()),
        ("r1a2b3c4d-7", "", LogsRequest(id="r1a2b3c4d-7")),
        ("report", "", LogsRequest(task="report")),
        ("", "r1a2b3c4d-7", LogsRequest(task="r1a2b3c4d-7")),  # a task so named
        ("r1a2b3c4d-7", "report", None),
    ],
)
def test_the_arguments_name_a_run_or_a_task(
    target: str, task: str, request_: LogsRequest | None
) -> None:
    assert logs_request(target, task, follow=False) == request_


def _logs(short_dir: Path, follow: bool, *answers: Any) -> tuple[int, str, str, list[Any]]:
    out, err = io.StringIO(), io.StringIO()
    path = short_dir / "rb.sock"
    path.unlink(missing_ok=True)  # one fake daemon a call
    with fake_daemon(path, *answers) as requests:
        code = logs(str(path), LogsRequest(task="chatty", follow=follow), out=out, err=err)
    return code, out.getvalue(), err.getvalue(), requests


def test_following_prints_streams_apart_and_exits_with_the_runs_status(short_dir: Path) -> None:
    dropped = {**HEADER, "dropped_lines": 12}
    code, out, err, requests = _logs(
        short_dir, True, dropped, OUT, ERR, {**FAILED, "dropped_lines": 3}
    )
    assert requests == [{"op": "logs", "task": "chatty", "follow": True, "batch": True}]
    assert code == 1
    assert out == "out\n"
    assert err.splitlines() == [
        "runbroker: 12 earlier lines of r1a2b3c4d-7 dropped (a run's last lines are kept)",
        "err",
        "runbroker: 3 lines dropped: this client read more slowly than the run wrote",
        "runbroker: failed: exit status 3",
    ]


def test_without_follow_a_failed_run_is_printed_and_exit_0(short_dir: Path) -> None:
    code, out, _err, _requests = _logs(short_dir, False, {**HEADER, "state": "done"}, OUT, FAILED)
    assert (code, out) == (0, "out\n")
    end = {"event": "end", "ok": True, "id": "r1a2b3c4d-7", "dropped_lines": 0}
    code, out, _err, _requests = _logs(short_dir, False, HEADER, OUT, end)  # running: what there is
    assert (code, out) == (0, "out\n")


def test_without_follow_the_lines_dropped_while_reading_are_said(short_dir: Path) -> None:
    end = {"event": "end", "ok": True, "id": "r1a2b3c4d-7", "dropped_lines": 4639}
    code, out, err, _requests = _logs(short_dir, False, HEADER, OUT, end)
    assert (code, out) == (0, "out\n")
    assert err.splitlines() == [
        "runbroker: 4639 lines dropped: this client read more slowly than the run wrote"
    ]


@pytest.mark.parametrize("state", ["running", "done"])
def test_a_cut_off_answer_without_its_terminal_line_is_69(short_dir: Path, state: str) -> None:
    # The daemon cut the connection (a reader stopped for a minute): not the run's whole output.
    code, out, err, _requests = _logs(short_dir, False, {**HEADER, "state": state}, OUT)
    assert (code, out) == (69, "out\n")
    assert "connection closed before the end of the run's lines" in err


def test_no_such_run_is_exit_2_and_a_lost_follow_is_69(short_dir: Path) -> None:
    refusal = {"event": "logs", "ok": False, "reason": "no run yet"}
    code, _out, err, _requests = _logs(short_dir, True, refusal)
    assert (code, err) == (2, "runbroker: no run yet\n")
    code, _out, err, _requests = _logs(short_dir, True, HEADER, OUT)  # closed before the end
    assert code == 69
    assert err.endswith("runbroker: connection closed before the run's result\n")
    forbidden = {"event": "done", "ok": False, "reason": "permission denied"}
    code, _out, _err, _requests = _logs(short_dir, True, forbidden)
    assert code == 69


def test_the_runs_table() -> None:
    runs = [
        {
            "id": "r1a2b3c4d-8",
            "task": "chatty",
            "trigger": "tick",
            "outcome": "failed",
            "exit_code": 3,
            "started_at": 0.0 + 1796180000,
            "duration_ms": 1500,
            "lines": 20000,
            "kept_lines": 9000,
        }
    ]
    assert runs_table(runs).splitlines() == [
        "ID           TASK    TRIGGER  OUTCOME     STARTED               DURATION  LINES",
        "r1a2b3c4d-8  chatty  tick     failed (3)  2026-12-02 02:53:20Z  1.500s    "
        "20000 (9000 kept)",
    ]
    assert runs_table([]) == "no finished run kept"


def test_following_a_task_before_its_first_run_says_it_waits(short_dir: Path) -> None:
    waiting = {"event": "logs", "ok": True, "id": "", "task": "chatty", "state": "waiting"}
    queued = {**HEADER, "state": "queued", "started_at": None}
    code, out, err, _ = _logs(short_dir, True, waiting, queued, OUT, FAILED)
    assert code == 1  # the run's own status, as once it was running
    assert out == "out\n"
    assert err.splitlines() == [
        "runbroker: task 'chatty' has no run yet; waiting for one to be queued (Ctrl-C to stop)",
        "runbroker: r1a2b3c4d-7 is queued; waiting for it to start",
        "runbroker: failed: exit status 3",
    ]
