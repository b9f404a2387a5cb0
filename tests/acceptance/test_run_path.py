"""The run path from the outside, with the daemon as PID 1: what a hostile handler, a hostile
peer or a careless job does to it, and what it must still do."""

from __future__ import annotations

import json
import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path

from tests.support.eventually import eventually
from tests.support.harness import Daemon

StartDaemon = Callable[..., Daemon]

HANDLERS = """
import asyncio
import os


class Odd(BaseException):
    pass


async def generator_exit(run):
    raise GeneratorExit("x")


async def odd(run):
    token = "hunter2-" + "local-secret"  # a local of the failing frame: never in the log
    raise Odd("its own BaseException")


async def fine(run):
    return {"fine": True}


async def leaves_exits(run):
    # Left behind, to go off once the run has its result: a callback calling sys.exit(7), a
    # task raising KeyboardInterrupt, another raising SystemExit.
    import sys

    loop = asyncio.get_running_loop()
    loop.call_later(0.1, sys.exit, 7)

    async def interrupt():
        await asyncio.sleep(0.2)
        raise KeyboardInterrupt("left behind")

    async def exits():
        await asyncio.sleep(0.3)
        raise SystemExit(9)

    LEFT.extend([loop.create_task(interrupt()), loop.create_task(exits())])
    return None


LEFT = []


async def deaf(run):
    # Swallows every cancellation until the test leaves its release file.
    while not os.path.exists(os.environ["RP_RELEASE"]):
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            pass
    return None


async def orphans(run):
    # Twenty subshells, each leaving a sleep behind it: orphans in the daemon's own session.
    proc = await asyncio.create_subprocess_exec(
        "sh", "-c", "for i in $(seq 20); do (sleep 0.1 &); done"
    )
    await proc.wait()
    return None
"""

TASKS = """
[tasks.generator_exit]
handler = "rp_handlers:generator_exit"

[tasks.odd]
handler = "rp_handlers:odd"

[tasks.fine]
handler = "rp_handlers:fine"

[tasks.leaves_exits]
handler = "rp_handlers:leaves_exits"

[tasks.orphans]
handler = "rp_handlers:orphans"

[tasks.deaf]
handler = "rp_handlers:deaf"
timeout = "1s"
grace = "1s"

[tasks.true]
command = ["true"]

[tasks.missing]
command = ["/nonexistent/job"]

[tasks.slow]
command = ["sh", "-c", "echo started; sleep 2; echo finished"]
"""


def _start(start_daemon: StartDaemon, workdir: Path) -> Daemon:
    (workdir / "rp_handlers.py").write_text(HANDLERS)
    env = {"PYTHONPATH": str(workdir), "RP_RELEASE": str(workdir / "release")}
    return start_daemon(tasks_toml=TASKS, env=env)


def test_a_handler_that_swallows_its_timeout_is_given_up_on_and_the_queue_moves_on(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = _start(start_daemon, workdir)
    deaf = daemon.popen("trigger", "deaf")
    [started] = daemon.log.wait_for("run.started", lambda line: line["task"] == "deaf")
    queued = daemon.popen("trigger", "true")
    daemon.log.wait_for("run.queued", lambda line: line["task"] == "true")
    _out, err = deaf.communicate(timeout=20)
    assert deaf.returncode == 1, err
    assert "timed out after 1s" in err
    queued.communicate(timeout=20)
    assert queued.returncode == 0
    status = json.loads(daemon.exec("status", "--json").stdout)
    assert [(stray["id"], stray["task"]) for stray in status["strays"]] == [
        (started["run_id"], "deaf")
    ]
    assert "stray: " in daemon.exec("status").stdout
    health = daemon.exec("health")
    assert health.returncode == 0, health.stderr  # a warning: the daemon works
    assert "its handler ignored its cancellation" in health.stdout + health.stderr
    (workdir / "release").touch()
    daemon.log.wait_for("run.stray_ended", lambda line: line["run_id"] == started["run_id"])
    assert "strays" not in json.loads(daemon.exec("status", "--json").stdout)
    assert "warning" not in daemon.exec("health").stdout
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0


def test_a_handler_raising_any_base_exception_fails_its_run_and_pid_1_goes_on(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = _start(start_daemon, workdir)
    for task, reason in (
        ("generator_exit", "GeneratorExit: x"),
        ("odd", "Odd: its own BaseException"),
    ):
        result = daemon.exec("trigger", task)
        assert result.returncode == 1, result.stderr
        assert reason in result.stderr
    assert daemon.exec("trigger", "fine").returncode == 0
    assert daemon.proc.poll() is None  # PID 1 still runs
    crashes = daemon.log.wait_for("run.crashed", count=2)
    assert {event["error_type"] for event in crashes} == {"GeneratorExit", "Odd"}
    assert all("exception" in event for event in crashes)  # the traceback is logged
    assert "hunter2-local-secret" not in "\n".join(daemon.log.raw)  # without its locals


def test_a_system_exit_or_interrupt_a_handler_leaves_behind_is_logged_and_pid_1_goes_on(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = _start(start_daemon, workdir)
    slow = daemon.popen("trigger", "slow")  # a command run in flight while they go off
    daemon.log.wait_for("run.started", lambda line: line["task"] == "slow")
    assert daemon.exec("trigger", "leaves_exits").returncode == 0
    strays = daemon.log.wait_for("broker.stray_exit", count=3)
    assert sorted((line["error_type"], line["error"]) for line in strays) == [
        ("KeyboardInterrupt", "left behind"),
        ("SystemExit", "7"),
        ("SystemExit", "9"),
    ]
    out, err = slow.communicate(timeout=20)
    assert slow.returncode == 0, err
    assert out == "started\nfinished\n"
    assert daemon.exec("trigger", "fine").returncode == 0
    assert daemon.exec("health").returncode == 0
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0


def test_orphans_in_the_daemons_own_session_are_reaped(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = _start(start_daemon, workdir)
    for _ in range(3):
        assert daemon.exec("trigger", "orphans").returncode == 0
    # Sixty sleeps of 0.1 s end as orphans of PID 1; none may stay a zombie.
    eventually(lambda: not daemon.zombies(), "the orphans to be reaped", timeout_s=15)
    assert daemon.exec("trigger", "fine").returncode == 0


def test_a_program_that_cannot_start_is_a_failed_run(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = _start(start_daemon, workdir)
    result = daemon.exec("trigger", "missing")
    assert result.returncode == 1
    assert "cannot start '/nonexistent/job': No such file or directory" in result.stderr
    assert daemon.exec("trigger", "fine").returncode == 0


def test_a_peer_of_another_uid_is_told_permission_denied_every_time(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    """With the socket's mode opened up by hand, the peer check is what refuses: the client
    must learn why every time, never a broken pipe."""
    daemon = _start(start_daemon, workdir)
    os.chmod(daemon.socket, 0o666)  # noqa: S103 - so that only the peer check can refuse
    for _ in range(10):
        result = daemon.exec("trigger", "fine", as_user="nobody")
        assert result.returncode == 69, result.stderr
        assert "permission denied" in result.stderr.lower()
        assert "broken pipe" not in result.stderr.lower()
    # The control commands learn it the same way: no empty report, no "cancel failed".
    for argv, code in ((["status"], 69), (["cancel", "r1"], 69), (["health"], 1)):
        result = daemon.exec(*argv, as_user="nobody")
        assert result.returncode == code, (argv, result.stdout, result.stderr)
        assert "refused: permission denied" in result.stderr, argv
        assert result.stdout == "", argv
    assert not daemon.log.events("run.queued")


def test_a_client_that_leaves_mid_run_is_not_an_error(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = _start(start_daemon, workdir)
    client = daemon.popen("trigger", "slow")  # goes away once the job has started
    assert client.stdout is not None
    assert client.stdout.readline().strip() == "started"
    client.kill()
    client.wait()
    done = daemon.log.wait_for("run.done", lambda line: line.get("task") == "slow")
    assert done[0]["ok"] is True
    assert [e for e in daemon.log.lines if e.get("level") in ("error", "critical")] == []


def test_every_accepted_run_logs_queued_started_and_one_done(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = _start(start_daemon, workdir)
    assert daemon.exec("trigger", "fine").returncode == 0
    assert daemon.exec("trigger", "odd").returncode == 1
    # A trigger can have its result before the daemon's log line of it is written: the whole
    # log is there once the daemon has exited.
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0
    for kind in ("run.queued", "run.started", "run.done"):
        events = daemon.log.events(kind)
        assert len(events) == 2, (kind, events)
        assert all({"run_id", "task", "trigger"} <= set(event) for event in events)
    assert len({event["run_id"] for event in daemon.log.events("run.done")}) == 2


def test_requests_that_hold_memory_are_refused_before_it_grows(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    """Forty clients sending 8 MiB each without a newline (320 MiB unbounded): the daemon's
    memory stays bounded (unfinished requests together at most 64 MiB, so at most eight of
    them) and the excess is told why."""
    daemon = _start(start_daemon, workdir)
    block = b'{"task":"' + b"x" * (8 * 1024 * 1024 - 16)
    clients = []
    try:
        for _ in range(40):
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.connect(str(daemon.socket))
            client.settimeout(30)
            client.sendall(block)
            clients.append(client)
        rss_kib = _rss_kib(daemon.pid)
        assert rss_kib < 160 * 1024, f"the daemon holds {rss_kib} KiB"
        busy = 0
        for client in clients:
            client.sendall(b"\n")
            answer = client.recv(4096)
            busy += b"server busy" in answer
        assert busy >= 32
    finally:
        for client in clients:
            client.close()
    assert daemon.exec("trigger", "fine").returncode == 0


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")
