"""A reload of a tasks file at the size cap (1 MiB, about 18,000 cron tasks) takes seconds of
checking: the daemon, PID 1 of its namespace, answers ``health`` all the while, and the reload
stays all or nothing (with metrics on: the new tasks' series are made off the loop too).

Ordering, not time: the test sends the reload request, then ``health`` requests one after
another, each once the previous one is answered, and requires several of them answered before
the reload is. A daemon whose loop the reload holds reads the reload request at the latest
with the first ``health`` (its bytes are already there) and then answers nothing else until the
reload is answered, so it can answer at most one of them first.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

from tests.support.reload_scenarios import ONE, StartDaemon, unwatched_tasks_file

CAP_BYTES = 1 << 20
ANSWER_S = 300.0  # for a machine so loaded that the check of the file takes minutes
HEALTH_BEFORE_RELOAD = 3


def at_the_cap(last: str = "") -> tuple[str, int]:
    """Cron tasks (and ``last`` at the end) as many as fit in the size cap, and their count."""
    entries: list[str] = []
    size = len(last.encode())
    while True:
        number = len(entries)
        entry = f'[tasks.t{number:05d}]\ncommand="true"\nschedule="cron {number % 60} * * * *"\n'
        if size + len(entry) > CAP_BYTES:
            return "".join(entries) + last, len(entries)
        entries.append(entry)
        size += len(entry)


def send(path: Path, request: dict[str, object]) -> socket.socket:
    """A connection that has sent ``request``; its answer is read by ``answer``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(ANSWER_S)
    sock.connect(str(path))
    sock.sendall(json.dumps(request).encode() + b"\n")
    return sock


def answer(sock: socket.socket) -> dict[str, object]:
    with sock:
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(1 << 16)
            assert chunk, f"the daemon closed the connection without an answer: {data!r}"
            data += chunk
    answered: dict[str, object] = json.loads(data)
    return answered


def answers_during(path: Path, pending: socket.socket) -> int:
    """``health`` asked one after another until ``pending`` has its answer (ready to read):
    how many were answered before it."""
    answered = 0
    while True:
        pending.setblocking(False)
        try:
            ready = pending.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            ready = b""
        finally:
            pending.settimeout(ANSWER_S)
        if ready:
            return answered
        health = answer(send(path, {"op": "health"}))
        assert health["ok"] is True, health
        answered += 1


def test_health_is_answered_while_a_file_at_the_cap_is_reloaded(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    bad, _count = at_the_cap(last='[tasks.zz_bad]\ncommand="true"\nschedule="daily 25:00"\n')
    good, count = at_the_cap()
    path, swap = unwatched_tasks_file(workdir, ONE, bad)
    (workdir / "v3").mkdir()
    (workdir / "v3" / "tasks.toml").write_text(good)
    # With metrics: each new task's series (about 20 each) are made too.
    daemon = start_daemon(
        env={"RUNBROKER_TASKS_FILE": str(path), "RUNBROKER_METRICS_ADDR": "127.0.0.1:0"}
    )
    swap()  # the file with a mistake in its last task: refused, all or nothing
    pending = send(daemon.socket, {"op": "reload"})
    assert answers_during(daemon.socket, pending) >= HEALTH_BEFORE_RELOAD
    refused = answer(pending)
    assert refused["ok"] is False
    assert "tasks.zz_bad: invalid schedule 'daily 25:00'" in str(refused["reason"])
    assert daemon.exec("trigger", "first").returncode == 0  # the old tasks, all of them
    assert daemon.exec("trigger", "t00000").returncode == 2  # none of the refused file's
    (workdir / "current.new").symlink_to("v3")
    (workdir / "current.new").replace(workdir / "current")
    pending = send(daemon.socket, {"op": "reload"})
    assert answers_during(daemon.socket, pending) >= HEALTH_BEFORE_RELOAD
    reloaded = answer(pending)
    assert reloaded["ok"] is True, reloaded
    assert len(reloaded["added"]) == count  # type: ignore[arg-type]
    assert reloaded["removed"] == ["first"]
    assert daemon.exec("trigger", f"t{count - 1:05d}").returncode == 0
    assert daemon.exec("health").returncode == 0
