"""The acceptance suite's backends (tests/support/backends.py).

``local`` is run for real. ``compose`` runs on podman in the container tier (tests/container);
what is checked here, without an engine, is everything it would hand to one: the override file
it generates is valid compose and resolves to the hardened ``daemon`` service with the test's
command and environment, and every flag of every ``docker compose`` command line it builds is
one the shipped compose binary accepts.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import backends
from tests.support.backends import (
    BROKER_SERVICE,
    COMPOSE_FILE,
    DAEMON_SERVICE,
    ComposeBackend,
    ComposeCLI,
    LocalBackend,
    daemon_environment,
    get_backend,
    override_document,
)
from tests.support.container_files import (
    DEV_COMPOSE,
    RUNBROKER_UID,
    compose_config,
    docker_compose,
    run_tool,
)
from tests.support.eventually import eventually
from tests.support.harness import RUNBROKER


def test_backend_comes_from_the_environment() -> None:
    assert isinstance(get_backend({}), LocalBackend)
    assert isinstance(get_backend({"RUNBROKER_TEST_BACKEND": "local"}), LocalBackend)
    assert isinstance(get_backend({"RUNBROKER_TEST_BACKEND": "compose"}), ComposeBackend)
    with pytest.raises(ValueError, match=r"'kubernetes' is not a backend \(known: compose, local"):
        get_backend({"RUNBROKER_TEST_BACKEND": "kubernetes"})


@pytest.mark.acceptance
def test_local_backend_starts_a_daemon_that_runs_and_stops(workdir: Path) -> None:
    daemon = LocalBackend().start(workdir, ("echo", "from the backend"))
    try:
        result = daemon.exec("trigger")
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "from the backend"
        assert daemon.exec_argv("health")[:2] == ["nsenter", "-t"]
        daemon.signal(15)
        assert daemon.wait() == 0
        assert daemon.zombies() == []
    finally:
        daemon.stop()


def test_the_backend_agrees_with_the_image_and_the_compose_file() -> None:
    assert backends.DAEMON_UID == RUNBROKER_UID
    assert COMPOSE_FILE == DEV_COMPOSE
    services = compose_config(DEV_COMPOSE)["services"]
    assert services[DAEMON_SERVICE]["profiles"] == [backends.COMPOSE_PROFILE]
    assert BROKER_SERVICE in services


def _resolved_daemon(workdir: Path, command: tuple[str, ...], tasks: bool) -> dict[str, Any]:
    tasks_file = workdir / "tasks.toml" if tasks else None
    env = daemon_environment(workdir, {"RUNBROKER_GRACE": "7s", "PRICE": "$5"}, tasks_file)
    override = workdir / "compose.override.json"
    override.write_text(json.dumps(override_document(workdir, command, env)))
    cli = ComposeCLI("rbtest-static", (COMPOSE_FILE, override), (backends.COMPOSE_PROFILE,))
    argv = [str(docker_compose()), *cli.argv("config", "--format", "json")[2:]]
    result = run_tool(argv, workdir)
    assert result.returncode == 0, result.stderr
    service: dict[str, Any] = json.loads(result.stdout)["services"][DAEMON_SERVICE]
    return service


def test_generated_override_makes_the_hardened_daemon_of_the_test(workdir: Path) -> None:
    job = 'while [ ! -e "$1" ]; do echo "$HOME ${RUNBROKER_TASK}"; done'
    service = _resolved_daemon(workdir, ("sh", "-c", job, "job"), tasks=True)
    # `config` prints a literal $ as $$; HOME=/nonexistent in the tool's environment would
    # show here had compose interpolated it.
    assert service["command"] == ["--", "sh", "-c", job.replace("$", "$$"), "job"]
    assert service.get("entrypoint") is None, "the image's `runbroker run` must stay"
    assert service["environment"] == {
        "RUNBROKER_SOCKET": str(workdir / "rb.sock"),
        "RUNBROKER_LOG_FORMAT": "json",
        "RUNBROKER_INTERVAL": "off",
        "RUNBROKER_TASKS_FILE": str(workdir / "tasks.toml"),
        "RUNBROKER_GRACE": "7s",
        "PRICE": "$$5",
        "PYTHONUNBUFFERED": "1",
    }
    volumes = service["volumes"]
    assert isinstance(volumes, list)
    assert [(v["type"], v["source"], v["target"]) for v in volumes] == [
        ("bind", str(workdir), str(workdir))
    ]
    # Inherited from the base file: the same hardening as the broker.
    assert service["read_only"] is True
    assert service["user"] == f"{RUNBROKER_UID}:{RUNBROKER_UID}"
    assert "/run/runbroker:mode=1777" in service["tmpfs"]
    assert "RUNBROKER_DATABASE_URL" not in service["environment"]


def test_no_command_keeps_the_image_default(workdir: Path) -> None:
    service = _resolved_daemon(workdir, (), tasks=False)
    assert service.get("command") is None
    assert "RUNBROKER_TASKS_FILE" not in service["environment"]


_OPTION = re.compile(r"^\s+(?:-(\w), )?(--[a-z][\w-]*)(?: (\w+))?", re.MULTILINE)


def _options(help_text: str) -> dict[str, bool]:
    """The flags a `--help` lists (long and short), each with whether it takes a value."""
    found: dict[str, bool] = {}
    for short, long, value_type in _OPTION.findall(help_text):
        takes_value = bool(value_type)
        found[long] = takes_value
        if short:
            found["-" + short] = takes_value
    return found


def _check_flags(argv: list[str]) -> None:
    """Every flag of a `docker compose ...` argv, up to the service name, is one the shipped
    compose binary accepts at that place (what follows the service is the container's)."""
    assert argv[:2] == ["docker", "compose"]
    words = argv[2:]
    known = _options(run_tool([docker_compose(), "--help"]).stdout)
    index = 0
    while words[index].startswith("-"):
        assert words[index] in known, f"docker compose {words[index]}"
        index += 2 if known[words[index]] else 1
    subcommand = words[index]
    sub_help = run_tool([docker_compose(), subcommand, "--help"])
    assert sub_help.returncode == 0, f"no subcommand {subcommand}"
    known = _options(sub_help.stdout)
    index += 1
    while index < len(words) and words[index].startswith("-"):
        assert words[index] in known, f"docker compose {subcommand} {words[index]}"
        index += 2 if known[words[index]] else 1
    assert index == len(words) or not words[index].startswith("-")


def test_every_compose_command_line_uses_real_flags(workdir: Path) -> None:
    cli = ComposeCLI("p", (COMPOSE_FILE, workdir / "o.json"), ("backend",))
    lines = [
        cli.up_argv(DAEMON_SERVICE),
        cli.container_id_argv(DAEMON_SERVICE),
        cli.down_argv(),
        cli.exec_argv(DAEMON_SERVICE, "health", as_user="nobody"),
        ComposeBackend().broker_argv("trigger", "--json"),
    ]
    for argv in lines:
        _check_flags(argv)


def test_broker_argv_is_docker_compose_exec_into_the_broker() -> None:
    argv = ComposeBackend().broker_argv("health")
    assert argv == [
        "docker",
        "compose",
        "--project-name",
        "runbroker",
        "--file",
        str(COMPOSE_FILE),
        "exec",
        "-T",
        "broker",
        "runbroker",
        "health",
    ]
    assert compose_config(DEV_COMPOSE)["name"] == "runbroker"


def test_flag_check_is_really_checking() -> None:
    with pytest.raises(AssertionError, match="--detatch"):
        _check_flags(["docker", "compose", "up", "--detatch", "x"])


@pytest.fixture
def fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``docker`` on PATH that is tests/static/fake_docker.py (see there: what it fakes)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "docker"
    fake = Path(__file__).with_name("fake_docker.py")
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{fake}" "$@"\n')
    shim.chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(state))
    monkeypatch.setenv("FAKE_DOCKER_COMPOSE_BINARY", str(docker_compose()))
    monkeypatch.setenv("FAKE_DOCKER_RUNBROKER", RUNBROKER)
    return state


@pytest.mark.acceptance
def test_compose_backend_plumbing_against_a_stand_in_engine(
    fake_engine: Path, workdir: Path
) -> None:
    """The compose backend's own code, run end to end: its override file resolved by the real
    compose binary, its parsing of ps/inspect/wait answers, logs split into events and stderr,
    exec as the image's user and as another uid, signals, teardown."""
    release = workdir / "release"
    job = 'echo "task=$RUNBROKER_TASK"; while [ ! -e "$1" ]; do sleep 0.02; done'
    daemon = get_backend({"RUNBROKER_TEST_BACKEND": "compose"}).start(
        workdir, ("sh", "-c", job, "job", str(release)), env={"RUNBROKER_GRACE": "3s"}
    )
    try:
        assert daemon.exec_argv("health")[:3] == ["docker", "compose", "--project-name"]
        assert daemon.exec("health").returncode == 0
        client = daemon.popen("trigger")
        assert client.stdout is not None
        assert client.stdout.readline().strip() == "task=default"  # `$` reached the job as is
        assert daemon.log.wait_for("run.started")[0]["trigger"] == "external"
        refused = daemon.exec("status", as_user="nobody")
        assert refused.returncode != 0
        release.touch()
        assert client.wait(timeout=20) == 0
        assert daemon.zombies() == []
        assert os.stat(daemon.socket).st_uid == backends.DAEMON_UID
        daemon.signal(signal.SIGTERM)
        assert daemon.wait() == 0
        assert daemon.log.events("broker.stopped")
    finally:
        daemon.stop()
    assert list(fake_engine.iterdir()) == [], "down did not remove the project"


@pytest.mark.acceptance
def test_compose_backend_stop_leaves_nothing_running(fake_engine: Path, workdir: Path) -> None:
    daemon = get_backend({"RUNBROKER_TEST_BACKEND": "compose"}).start(workdir, ("sleep", "60"))
    assert daemon.exec("trigger", "--detach").returncode == 0
    daemon.log.wait_for("run.started")
    init = daemon.pid
    daemon.stop()

    def state() -> str:
        try:
            stat = Path(f"/proc/{init}/stat").read_text()
        except FileNotFoundError:
            return "gone"
        return stat[stat.rfind(")") + 2 :].split()[0]

    # SIGKILL is delivered at once but the exit itself takes a moment on a loaded machine.
    eventually(lambda: state() in ("gone", "Z"), "the daemon to die after `down`", timeout_s=10)
    assert list(fake_engine.iterdir()) == []


@pytest.mark.acceptance
def test_compose_backend_reports_a_bad_setting_like_the_local_one(
    fake_engine: Path, workdir: Path
) -> None:
    daemon = get_backend({"RUNBROKER_TEST_BACKEND": "compose"}).start(
        workdir, ("true",), env={"RUNBROKER_GRACE": "soon"}, wait_ready=False
    )
    try:
        assert daemon.wait() == 2
        assert "RUNBROKER_GRACE" in daemon.stderr()
    finally:
        daemon.stop()


def test_compose_overrides_come_after_the_compose_file(tmp_path: Path) -> None:
    first, second = tmp_path / "a.yml", tmp_path / "b.yml"
    env = {backends.COMPOSE_OVERRIDES_ENV: f"{first}{os.pathsep}{second}"}
    assert backends.compose_files(env) == (COMPOSE_FILE, first, second)
    assert backends.compose_files({}) == (COMPOSE_FILE,)
    assert backends.compose_files({backends.COMPOSE_OVERRIDES_ENV: ""}) == (COMPOSE_FILE,)
