"""The thin client against a fake daemon speaking the wire protocol: exit codes, detach,
tolerance of unknown events, time-outs, control requests, the socket's path."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from daemon.wire import client
from daemon.wire.protocol import CancelRequest, HealthRequest, SubmitRequest
from tests.support.fake_daemon import QUEUED, STARTED, Answer, fake_daemon, trigger


def test_a_failed_run_exits_1_with_its_reason(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    done = {"event": "done", "ok": False, "id": "r1", "reason": "exit status 3", "exit_code": 3}
    with fake_daemon(path, QUEUED, STARTED, done):
        code, _out, err = trigger(path)
    assert code == client.EXIT_FAILED
    assert "runbroker: failed: exit status 3" in err


@pytest.mark.parametrize("reason", ["run queue is full", "scheduler is shutting down"])
def test_rejections_exit_75(short_dir: Path, reason: str) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, {"event": "done", "ok": False, "reason": reason}):
        code, _out, err = trigger(path)
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
        code, out, err = trigger(path)
    assert code == client.EXIT_USAGE == 2
    assert (out, err) == ("", f"runbroker: refused: {reason}\n")
    with fake_daemon(short_dir / "json.sock", {"event": "done", "ok": False, "reason": reason}):
        assert trigger(short_dir / "json.sock", as_json=True)[0] == client.EXIT_USAGE


def test_a_run_refused_after_it_was_queued_is_a_failure(short_dir: Path) -> None:
    # A task removed between queueing and starting: the run exists, and it failed.
    path = short_dir / "rb.sock"
    done = {"event": "done", "ok": False, "reason": "unknown task 'gone': this container ..."}
    with fake_daemon(path, QUEUED, done):
        code, _out, err = trigger(path)
    assert code == client.EXIT_FAILED
    assert "runbroker: failed: unknown task 'gone'" in err


def test_another_uid_refused_is_unavailable_not_a_usage_error(short_dir: Path) -> None:
    """Refused by the daemon's peer check: the same exit (69) as a socket whose mode refuses
    the user, with the reason in words."""
    path = short_dir / "rb.sock"
    with fake_daemon(path, {"event": "done", "ok": False, "reason": "permission denied"}):
        code, _out, err = trigger(path)
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
        assert trigger(path)[0] == exit_code


def test_a_cancelled_run_exits_1_not_75(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    done = {"event": "done", "ok": False, "reason": "cancelled: scheduler shutting down"}
    with fake_daemon(path, QUEUED, done):
        assert trigger(path)[0] == client.EXIT_FAILED


def test_unreachable_daemon_exits_69(short_dir: Path) -> None:
    code, _out, err = trigger(short_dir / "missing.sock")
    assert code == client.EXIT_UNAVAILABLE == 69
    assert "daemon unreachable at" in err
    stale = short_dir / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bound:
        bound.bind(str(stale))  # a socket file nobody listens on
        assert trigger(stale)[0] == client.EXIT_UNAVAILABLE


def test_a_connection_closed_before_the_result_exits_69(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, QUEUED, STARTED):
        code, _out, err = trigger(path)
    assert code == client.EXIT_UNAVAILABLE
    assert "closed before the run's result" in err


def test_detach_returns_once_queued_and_prints_the_id(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, QUEUED, hold=True):
        code, out, _err = trigger(path, detach=True, timeout_s=5)
    assert code == client.EXIT_OK
    assert out == "r1\n"


def test_detach_with_json_prints_the_queued_event_only(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, QUEUED, hold=True):
        code, out, _err = trigger(path, detach=True, as_json=True, timeout_s=5)
    assert code == client.EXIT_OK
    assert [json.loads(line) for line in out.splitlines()] == [QUEUED]


def test_detach_still_reports_a_rejection(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, {"event": "done", "ok": False, "reason": "run queue is full"}):
        assert trigger(path, detach=True)[0] == client.EXIT_TEMPFAIL


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
        code, out, err = trigger(path)
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
        code, _out, err = trigger(path, timeout_s=0.2)
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
        assert client.control(str(path), CancelRequest("r7")) == answer
    assert requests == [{"op": "cancel", "id": "r7"}]


def test_control_without_an_answer_is_unreachable(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path), pytest.raises(client.Unreachable, match="no answer"):
        client.control(str(path), HealthRequest())
    with pytest.raises(client.Unreachable, match="unreachable"):
        client.control(str(short_dir / "missing.sock"), HealthRequest())


def test_socket_path_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNBROKER_SOCKET", raising=False)
    assert client.socket_path_from_env() == "/run/runbroker/runbroker.sock"
    monkeypatch.setenv("RUNBROKER_SOCKET", "/tmp/x/rb.sock")
    assert client.socket_path_from_env() == "/tmp/x/rb.sock"
