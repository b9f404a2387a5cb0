"""The runtime image on the real engine, as a user meets it: ``runbroker run`` is PID 1 of its
container (the ``daemon`` service of docker-compose.yml: the broker's hardening, started by
the acceptance suite's compose backend), and everything else goes through ``exec``, ``stop``,
``kill`` and the image's HEALTHCHECK.

Behaviour tests of the acceptance suite run here too, unchanged, with this module's
``daemon_backend``: the daemon in a container instead of a PID namespace of the test process
(three of PID 1's scenarios; three of reloading: ``podman kill --signal HUP``, a rename over
the bind-mounted file seen by the watch inside the container, a refused file). They are
imported below under their own names."""

from __future__ import annotations

import json
import selectors
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.container.conftest import Engine
from tests.support.backends import Backend, ComposeBackend, DaemonHandle
from tests.support.eventually import eventually
from tests.support.pid1_scenarios import (
    test_every_signal_has_its_documented_effect,
    test_orphans_leave_no_zombies,
    test_second_signal_forces_exit,
    test_sigterm_during_a_run,
)
from tests.support.reload_scenarios import (
    test_a_bad_file_is_refused_and_the_old_tasks_keep_working,
    test_a_rename_over_the_file_is_picked_up,
    test_sighup_reloads_a_task_that_can_then_be_triggered,
)

__all__ = [
    "test_a_bad_file_is_refused_and_the_old_tasks_keep_working",
    "test_a_rename_over_the_file_is_picked_up",
    "test_every_signal_has_its_documented_effect",
    "test_orphans_leave_no_zombies",
    "test_second_signal_forces_exit",
    "test_sighup_reloads_a_task_that_can_then_be_triggered",
    "test_sigterm_during_a_run",
]

StartDaemon = Callable[..., DaemonHandle]
DAEMON_UID = 10001
SHUTDOWN_BUDGET_S = 8.0  # RUNBROKER_SHUTDOWN_TIMEOUT's default, which the daemon service keeps


@pytest.fixture
def daemon_backend(engine: Engine) -> Backend:
    """``runbroker run`` as PID 1 of a container of its own compose project, taken down
    (``compose down --volumes``) when the test's daemon stops."""
    return ComposeBackend()


def _container(daemon: DaemonHandle) -> str:
    container: str = getattr(daemon, "container")  # noqa: B009 (the compose backend's)
    return container


def _podman(engine: Engine, *args: str) -> subprocess.CompletedProcess[str]:
    return engine.run(["podman", *args])


def _status_fields(text: str) -> dict[str, str]:
    fields = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        fields[name] = rest.strip()
    return fields


def _read_line(stream: Any, timeout_s: float) -> str:
    """One line of a child's output, within a deadline."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            raise AssertionError(f"no output within {timeout_s} s")
    return str(stream.readline()).rstrip("\n")


def test_the_daemon_is_pid_1_as_10001_read_only_without_capabilities(
    engine: Engine, start_daemon: StartDaemon
) -> None:
    daemon = start_daemon("true")
    container = _container(daemon)
    status = _podman(engine, "exec", container, "cat", "/proc/1/status")
    assert status.returncode == 0, status.stderr
    fields = _status_fields(status.stdout)
    assert fields["Uid"].split() == [str(DAEMON_UID)] * 4
    assert fields["Gid"].split() == [str(DAEMON_UID)] * 4
    for caps in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields[caps], 16) == 0, f"{caps} {fields[caps]}"
    assert fields["NoNewPrivs"] == "1"
    cmdline = _podman(engine, "exec", container, "cat", "/proc/1/cmdline").stdout
    argv = cmdline.split("\0")
    assert argv[0].startswith("/usr/local/bin/python"), argv
    assert argv[1:3] == ["/usr/local/bin/runbroker", "run"], argv
    # The same process, seen from the host: the container's PID 1 is the daemon.
    assert Path(f"/proc/{daemon.pid}/cmdline").read_text() == cmdline
    # A read-only root; the socket directory a tmpfs, sticky and writable by all (as /tmp).
    probe = _podman(engine, "exec", container, "touch", "/probe")
    assert probe.returncode != 0
    assert "Read-only file system" in probe.stderr
    socket_dir = _podman(engine, "exec", container, "stat", "-c", "%a %u %g", "/run/runbroker")
    assert socket_dir.stdout.split() == ["1777", "0", "0"]
    writable = _podman(engine, "exec", container, "touch", "/run/runbroker/probe", "/tmp/probe")
    assert writable.returncode == 0, writable.stderr
    host_config = engine.inspect(container)["HostConfig"]
    assert host_config["ReadonlyRootfs"] is True


def test_trigger_streams_the_output_and_exits_with_the_job_status(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    gate = workdir / "go"
    tasks = f"""
[tasks.stream]
command = ["sh", "-c", "echo first; while [ ! -e {gate} ]; do sleep 0.05; done; echo second"]
timeout = "60s"

[tasks.fails]
command = ["sh", "-c", "echo failing; exit 3"]
"""
    daemon = start_daemon("true", tasks_toml=tasks)
    client = daemon.popen("trigger", "stream")
    try:
        # The first line arrives while the job is still running: it waits for the gate.
        assert _read_line(client.stdout, 30) == "first"
        assert client.poll() is None
        gate.touch()
        rest, err = client.communicate(timeout=30)
    finally:
        if client.poll() is None:
            client.kill()
            client.communicate(timeout=30)
    assert client.returncode == 0, err
    assert rest.splitlines() == ["second"]
    failed = daemon.exec("trigger", "fails")
    assert failed.returncode == 1
    assert failed.stdout.splitlines() == ["failing"]
    assert failed.stderr.splitlines()[-1] == "runbroker: failed: exit status 3", failed.stderr
    ok = daemon.exec("trigger")  # the default task, `true`
    assert ok.returncode == 0, ok.stderr


def test_status_and_the_image_healthcheck(
    engine: Engine, start_daemon: StartDaemon, workdir: Path
) -> None:
    gate = workdir / "go"
    job = f"echo running; while [ ! -e {gate} ]; do sleep 0.05; done"
    daemon = start_daemon("sh", "-c", job)
    container = _container(daemon)
    client = daemon.popen("trigger")
    try:
        daemon.log.wait_for("run.output", lambda line: line["line"] == "running")
        status = daemon.exec("status", "--json")
        assert status.returncode == 0, status.stderr
        current = json.loads(status.stdout)["current"]
        assert current["task"] == "default"
        assert current["trigger"] == "external"
        human = daemon.exec("status")
        assert human.returncode == 0, human.stderr
        assert "default" in human.stdout
        # The image's HEALTHCHECK (`runbroker health`), run by the engine as its timer would.
        check = _podman(engine, "healthcheck", "run", container)
        assert check.returncode == 0, check.stdout + check.stderr
        health = engine.inspect(container)["State"]["Health"]
        assert health["Status"] == "healthy"
        assert health["Log"][-1]["ExitCode"] == 0
        assert "healthy" in health["Log"][-1]["Output"]
    finally:
        gate.touch()
        client.communicate(timeout=30)
    assert client.returncode == 0


def test_stop_during_a_running_job_drains_and_exits_0(
    engine: Engine, start_daemon: StartDaemon, workdir: Path
) -> None:
    marker = workdir / "got-term"
    job = f"trap 'echo term > {marker}; exit 143' TERM; echo ready; while :; do sleep 0.05; done"
    daemon = start_daemon("sh", "-c", job)
    container = _container(daemon)
    client = daemon.popen("trigger")
    try:
        daemon.log.wait_for("run.output", lambda line: line["line"] == "ready")
        started = time.monotonic()
        # `docker stop` with the compose file's grace: SIGTERM, SIGKILL only after 30 s.
        stopped = _podman(engine, "stop", "--time", "30", container)
        elapsed = time.monotonic() - started
        assert stopped.returncode == 0, stopped.stderr
    finally:
        client.communicate(timeout=30)
    state = engine.inspect(container)["State"]
    assert state["ExitCode"] == 0, "\n".join(daemon.log.raw)
    assert elapsed < SHUTDOWN_BUDGET_S
    assert marker.read_text().strip() == "term"  # the job got SIGTERM
    assert daemon.wait() == 0
    assert daemon.log.events("broker.stopped")[0]["clean"] is True
    eventually(lambda: not Path(f"/proc/{daemon.pid}").exists(), "the daemon to be gone")
