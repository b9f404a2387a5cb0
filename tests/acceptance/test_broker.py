"""The daemon as a container runs it: PID 1, triggered through nsenter (``docker exec``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.support.eventually import eventually
from tests.support.fake_extras import MARKS_VARIABLE, install_extras
from tests.support.harness import STUBBORN_HANDLER, Daemon
from tests.support.pid1_scenarios import (
    test_every_signal_has_its_documented_effect,
    test_orphans_leave_no_zombies,
    test_second_signal_forces_exit,
    test_sigterm_during_a_run,
)

__all__ = [  # run here as PID 1 of an unshare namespace; see pid1_scenarios
    "test_every_signal_has_its_documented_effect",
    "test_orphans_leave_no_zombies",
    "test_second_signal_forces_exit",
    "test_sigterm_during_a_run",
]

StartDaemon = Callable[..., Daemon]

# A job that blocks until the test creates the file named by its first argument.
WAIT_FOR_FILE = 'while [ ! -e "$1" ]; do sleep 0.02; done'


def _raw_request(
    path: Path, payload: bytes, read_timeout_s: float = 10.0
) -> list[dict[str, object]]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(read_timeout_s)
        sock.connect(str(path))
        sock.sendall(payload)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return [json.loads(line) for line in data.splitlines() if line]


def test_success_and_failure_exit_codes(start_daemon: StartDaemon, workdir: Path) -> None:
    tasks = """
[tasks.ok]
command = ["true"]
[tasks.fail]
command = ["sh", "-c", "echo failing >&2; exit 7"]
[tasks.echo]
command = ["sh", "-c", 'echo "arg=$1 env=$GREETING $RUNBROKER_TASK/$RUNBROKER_TRIGGER"', "x"]
allow_args = true
allow_env = ["GREETING"]
"""
    daemon = start_daemon(tasks_toml=tasks)
    ok = daemon.exec("trigger", "ok")
    assert ok.returncode == 0, ok.stderr
    failed = daemon.exec("trigger", "fail")
    assert failed.returncode == 1
    assert "failing" in failed.stderr
    assert "exit status 7" in failed.stderr
    echoed = daemon.exec("trigger", "echo", "--arg", "one", "--env", "GREETING=hi")
    assert echoed.returncode == 0, echoed.stderr
    assert echoed.stdout.strip() == "arg=one env=hi echo/external"
    unknown = daemon.exec("trigger", "nope")
    assert unknown.returncode == 2  # a usage error, as `runbroker once nope` says too
    assert unknown.stderr == (
        "runbroker: refused: unknown task 'nope': this container defines echo, fail, ok\n"
    )
    not_allowed = daemon.exec("trigger", "ok", "--env", "SECRET=x")
    assert not_allowed.returncode == 2
    assert "refused: task 'ok' does not allow env 'SECRET'" in not_allowed.stderr
    assert len(daemon.log.wait_for("run.started", count=3)) == 3


def test_live_output_reaches_the_client_before_the_job_ends(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = start_daemon(
        "sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do echo line $i; sleep 0.1; done"
    )
    client = daemon.popen("trigger")
    assert client.stdout is not None
    first = client.stdout.readline()
    assert first.strip() == "line 1"
    assert client.poll() is None, "the client had exited before the first line was shown"
    assert not daemon.log.events("run.done"), "the job had ended before its first line arrived"
    rest = client.stdout.read()
    assert client.wait(timeout=20) == 0
    assert rest.splitlines()[-1] == "line 10"


def test_queue_full_is_75_with_the_exact_reason(start_daemon: StartDaemon, workdir: Path) -> None:
    release = workdir / "go"
    daemon = start_daemon(
        "sh", "-c", WAIT_FOR_FILE, "job", str(release), env={"RUNBROKER_QUEUE_CAPACITY": "1"}
    )
    running = daemon.popen("trigger")
    daemon.log.wait_for("run.started")
    queued = daemon.exec("trigger", "--detach")
    assert queued.returncode == 0, queued.stderr
    full = daemon.exec("trigger", "--json")
    assert full.returncode == 75
    events = [json.loads(line) for line in full.stdout.splitlines()]
    assert events == [
        {"event": "done", "ok": False, "reason": "run queue is full", "code": "queue_full"}
    ]
    release.touch()
    assert running.wait(timeout=20) == 0
    daemon.log.wait_for("run.done", count=2)


def test_unreachable_daemon_is_69(start_daemon: StartDaemon, workdir: Path) -> None:
    daemon = start_daemon("true")
    result = daemon.exec("trigger", "--socket", str(workdir / "missing.sock"))
    assert result.returncode == 69
    assert "unreachable" in result.stderr


def test_client_of_another_uid_is_refused(start_daemon: StartDaemon, workdir: Path) -> None:
    daemon = start_daemon("true")
    mode = stat.S_IMODE(os.stat(daemon.socket).st_mode)
    assert mode == 0o600
    result = daemon.exec("trigger", as_user="nobody")
    assert result.returncode == 69
    assert "Permission denied" in result.stderr
    assert not daemon.log.events("run.queued")


def test_second_daemon_does_not_steal_a_live_socket(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    first = start_daemon("true")
    second = start_daemon("true", wait_ready=False)
    assert second.wait() == 1
    assert "owns" in second.stderr() or "live daemon" in second.stderr()
    assert first.exec("trigger").returncode == 0


def test_stale_socket_is_replaced(start_daemon: StartDaemon, workdir: Path) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(workdir / "rb.sock"))
    stale.close()  # bound, never listening: connect gets ECONNREFUSED
    daemon = start_daemon("true")
    assert daemon.exec("trigger").returncode == 0


def test_regular_file_at_socket_path_is_not_deleted(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    path = workdir / "rb.sock"
    path.write_text("precious")
    daemon = start_daemon("true", wait_ready=False)
    assert daemon.wait() == 1
    assert "not a socket" in daemon.stderr()
    assert path.read_text() == "precious"


def test_bad_requests_get_reasons_while_others_are_served(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = start_daemon("echo", "served", env={"RUNBROKER_REQUEST_TIMEOUT": "1s"})
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.connect(str(daemon.socket))
    slow.sendall(b'{"task":')  # and nothing more
    assert _raw_request(daemon.socket, b"this is not json\n") == [
        {"event": "done", "ok": False, "reason": "undecodable request", "code": "bad_request"}
    ]
    big = b'{"task":"' + b"x" * (8 * 1024 * 1024) + b'"}\n'
    too_large = _raw_request(daemon.socket, big)[-1]
    assert (too_large["reason"], too_large["code"]) == ("request too large", "bad_request")
    served = daemon.exec("trigger")
    assert served.returncode == 0
    assert served.stdout.strip() == "served"
    slow.setblocking(False)
    try:
        early = slow.recv(65536)
    except BlockingIOError:
        early = b""
    assert early == b"", "the slow client was answered before the others were served"
    slow.setblocking(True)
    slow.settimeout(10)
    answer = json.loads(slow.recv(65536))
    slow.close()
    too_slow = {"reason": "request not received in time", "code": "bad_request"}
    assert answer == {"event": "done", "ok": False, **too_slow}
    assert daemon.exec("health").returncode == 0


def test_cancel_queued_and_running_runs(start_daemon: StartDaemon, workdir: Path) -> None:
    release = workdir / "never"
    daemon = start_daemon("sh", "-c", WAIT_FOR_FILE, "job", str(release))
    running = daemon.popen("trigger", "--json")
    started = daemon.log.wait_for("run.started")[0]
    queued = daemon.exec("trigger", "--detach")
    queued_id = queued.stdout.strip()
    assert daemon.exec("cancel", queued_id).returncode == 0
    assert daemon.exec("cancel", started["run_id"]).returncode == 0
    out, _err = running.communicate(timeout=20)
    assert running.returncode == 1
    assert json.loads(out.splitlines()[-1])["reason"] == "cancelled by request"
    status = json.loads(daemon.exec("status", "--json").stdout)
    assert status["current"] is None
    assert status["queue"]["waiting"] == 0
    assert {item["id"] for item in status["recent"]} >= {queued_id, started["run_id"]}
    assert daemon.exec("cancel", "r-unknown").returncode == 1


def test_bad_setting_exits_2_naming_the_variable(start_daemon: StartDaemon, workdir: Path) -> None:
    daemon = start_daemon("true", env={"RUNBROKER_GRACE": "soon"}, wait_ready=False)
    assert daemon.wait() == 2
    err = daemon.stderr()
    assert "RUNBROKER_GRACE" in err
    assert len(err.strip().splitlines()) == 1
    assert not daemon.socket.exists()


def test_a_grace_longer_than_half_the_lease_is_refused_with_a_database(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    # Lease fencing needs room to stop a run before its lease ends (daemon/pg/fence.py). The
    # check runs before anything starts: the database is never reached.
    env = {
        "RUNBROKER_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        "RUNBROKER_LEASE": "10s",
        "RUNBROKER_GRACE": "6s",
    }
    daemon = start_daemon("true", env=env, wait_ready=False)
    assert daemon.wait() == 2
    err = daemon.stderr()
    assert "RUNBROKER_GRACE" in err
    assert "half of RUNBROKER_LEASE" in err
    assert len(err.strip().splitlines()) == 1
    assert not daemon.socket.exists()


def test_interval_ticks_without_piling_up(start_daemon: StartDaemon, workdir: Path) -> None:
    release = workdir / "go"
    daemon = start_daemon(
        "sh",
        "-c",
        WAIT_FOR_FILE,
        "job",
        str(release),
        env={"RUNBROKER_INTERVAL": "100ms", "RUNBROKER_JITTER": "0"},
    )
    daemon.log.wait_for("tick.skipped", count=3)
    assert len(daemon.log.events("run.started")) == 1
    release.touch()
    daemon.log.wait_for("run.done")
    daemon.log.wait_for("run.started", count=2)


def test_a_trigger_during_the_drain_is_told_shutting_down(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    job = "trap '' TERM; echo ready; while :; do sleep 0.05; done"  # ignores SIGTERM
    daemon = start_daemon("sh", "-c", job, env={"RUNBROKER_GRACE": "3s"})
    running = daemon.popen("trigger")
    daemon.log.wait_for("run.output", lambda line: line["line"] == "ready")
    daemon.signal(signal.SIGTERM)
    daemon.log.wait_for("broker.draining")
    late = daemon.exec("trigger")
    assert late.returncode == 75
    assert "scheduler is shutting down" in late.stderr
    health = daemon.exec("health")
    assert health.returncode == 1
    assert "shutting down" in health.stdout
    assert daemon.wait() == 0
    assert running.wait(timeout=20) == 1


# Loaded by the trigger's interpreter: its teardown takes far longer than the daemon waits for
# its clients to close at shutdown (a loaded machine makes a real teardown slow too).
SLOW_TEARDOWN = """
import atexit
import time

atexit.register(time.sleep, 5)
"""


def test_a_trigger_outlives_the_daemon_it_saw_drain(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    """As PID 1 the daemon's exit kills every process of its namespace, ``docker exec`` clients
    too. A trigger must not close its socket (which lets the daemon exit) before its own exit
    status is fixed, or it dies with -9 after it printed the run's result."""
    (workdir / "sitecustomize.py").write_text(SLOW_TEARDOWN)
    daemon = start_daemon("sh", "-c", "echo ready; exec sleep 60")
    argv = daemon.exec_argv("trigger")
    at = next(i for i, part in enumerate(argv) if part.endswith("runbroker"))
    argv[at:at] = ["env", f"PYTHONPATH={workdir}", f"RUNBROKER_SOCKET={daemon.socket}"]
    running = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    daemon.log.wait_for("run.output", lambda line: line["line"] == "ready")
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0
    _out, err = running.communicate(timeout=20)
    assert running.returncode == 1, err
    assert err.rstrip().endswith("failed: cancelled: scheduler shutting down"), err


SWALLOWING_HANDLER = """
import asyncio
import pathlib

HERE = pathlib.Path(__file__).parent


async def swallow(run):
    while not (HERE / "release").exists():
        try:
            await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            (HERE / "swallowed").touch()  # and goes on
    return {"finished": True}
"""


def test_cancel_tells_the_truth_about_a_handler_that_swallows_it(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    (workdir / "swallowing_handlers.py").write_text(SWALLOWING_HANDLER)
    tasks = '[tasks.swallow]\nhandler = "swallowing_handlers:swallow"\n'
    daemon = start_daemon(tasks_toml=tasks, env={"PYTHONPATH": str(workdir)})
    running = daemon.popen("trigger", "swallow")
    (started,) = daemon.log.wait_for("run.started")
    run_id = started["run_id"]
    first = daemon.exec("cancel", run_id)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == (
        f"{run_id}: cancel requested; the run is being terminated and is still running"
    )
    eventually((workdir / "swallowed").exists, "the handler to swallow the cancellation")
    second = daemon.exec("cancel", run_id)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == (
        f"{run_id}: cancel already requested; the run is still being terminated"
    )
    (workdir / "release").touch()
    _out, err = running.communicate(timeout=20)
    assert running.returncode == 0, err  # the run's own result: it ended well
    (done,) = daemon.log.wait_for("run.done")
    assert done["ok"] is True


def test_a_handler_that_ignores_cancellation_cannot_hold_the_daemon(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    (workdir / "stubborn_handlers.py").write_text(STUBBORN_HANDLER)
    tasks = '[tasks.stubborn]\nhandler = "stubborn_handlers:stubborn"\n'
    daemon = start_daemon(
        tasks_toml=tasks,
        env={"PYTHONPATH": str(workdir), "RUNBROKER_SHUTDOWN_TIMEOUT": "2s"},
    )
    running = daemon.popen("trigger", "stubborn")
    daemon.log.wait_for("run.started")
    daemon.signal(signal.SIGTERM)
    assert daemon.wait(timeout_s=15) == 1  # not clean, but ended
    assert daemon.log.events("broker.shutdown_timeout")
    # The run still got its one result, and its client the line that says so.
    _out, err = running.communicate(timeout=20)
    assert running.returncode == 1, err
    assert err.rstrip().endswith("failed: cancelled: scheduler shutting down"), err


def test_the_daemon_imports_no_console_extra_of_structlog_even_where_installed(
    workdir: Path,
) -> None:
    """rich and the others, installed, are left out of ``runbroker run`` (the log never draws
    with them), and a handler can still import them."""
    site = install_extras(workdir / "site")
    marks = workdir / "marks"
    marks.mkdir()
    (site / "imports_rich.py").write_text("async def run(run):\n    import rich  # noqa\n")
    tasks = '[tasks.job]\ncommand = ["true"]\n[tasks.rich]\nhandler = "imports_rich:run"\n'
    env = {"PYTHONPATH": str(site), MARKS_VARIABLE: str(marks)}
    daemon = Daemon(workdir, tasks_toml=tasks, env=env)
    try:
        assert daemon.exec("trigger", "job").returncode == 0
        assert sorted(path.name for path in marks.iterdir()) == []
        assert daemon.exec("trigger", "rich").returncode == 0
        assert sorted(path.name for path in marks.iterdir()) == ["rich"]
    finally:
        daemon.stop()
