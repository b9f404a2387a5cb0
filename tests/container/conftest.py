"""Fixtures of the container tier: the real engine (podman behind its Docker-compatible API,
tests/support/podman_engine.py), the images scripts/test-container built, and compose
projects with unique names that are always taken down."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support import backends, podman_engine
from tests.support.backends import ComposeCLI
from tests.support.container_files import docker_compose
from tests.support.podman_engine import (
    ENGINE_FILES,
    PODMAN_OVERRIDE,
    POSTGRES_IMAGE,
    RUNTIME_IMAGE,
    TEST_IMAGE,
    HealthChecks,
)

COMMAND_TIMEOUT_S = 120.0
UP_TIMEOUT_S = 180.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/container/" in str(item.path):
            item.add_marker(pytest.mark.container)


def _run(
    argv: Sequence[str | Path], env: dict[str, str], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """A command of the tier: no stdin, its output captured, bounded in time."""
    return subprocess.run(
        [str(part) for part in argv],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


@dataclass
class Engine:
    """podman and docker-compose with the tier's configuration and API service."""

    state: Path
    env: dict[str, str]
    health: HealthChecks
    compose_bin: Path = field(default_factory=docker_compose)

    def run(
        self, argv: Sequence[str | Path], timeout_s: float = COMMAND_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        return _run(argv, self.env, timeout_s)

    def podman(self, *args: str, timeout_s: float = COMMAND_TIMEOUT_S) -> str:
        """``podman ARGS``'s stdout; a failure is an assertion naming the command."""
        result = self.run(["podman", *args], timeout_s)
        assert result.returncode == 0, f"podman {' '.join(args)}: {result.stderr}"
        return result.stdout

    def inspect(self, container: str) -> dict[str, Any]:
        found: list[dict[str, Any]] = json.loads(self.podman("container", "inspect", container))
        return found[0]


def wait_for_name(
    engine: Engine, container: str, name: str = "postgres", timeout_s: float = 120.0
) -> None:
    """Until ``name`` resolves promptly (three times in a row, each within 2 s) inside
    ``container``. podman's DNS server here, aardvark-dns 1.4, reloads whenever a container of
    the network starts or stops and can then leave queries unanswered for tens of seconds
    (glibc waits 5 s a try, then asks the host's resolver, which does not know the name): a
    command run meanwhile cannot reach the database. A test that needs the network waits for
    it to settle, as it waits for health."""
    deadline = time.monotonic() + timeout_s
    prompt = 0
    while prompt < 3:
        answer = engine.run(["podman", "exec", container, "timeout", "2", "getent", "hosts", name])
        prompt = prompt + 1 if answer.returncode == 0 else 0
        assert time.monotonic() < deadline, f"{name} did not resolve in {container} in time"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Stack:
    """One compose project of docker-compose.yml (plus the podman override) with a unique
    name and its own published database port."""

    engine: Engine
    cli: ComposeCLI
    env: dict[str, str]
    pg_port: int
    password: str = "runbroker"

    @property
    def project(self) -> str:
        return self.cli.project

    def compose(
        self, *args: str, timeout_s: float = COMMAND_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(self.engine.compose_bin), *self.cli.argv(*args)[2:]]
        return _run(argv, self.env, timeout_s)

    def ok(self, *args: str, timeout_s: float = COMMAND_TIMEOUT_S) -> str:
        result = self.compose(*args, timeout_s=timeout_s)
        assert result.returncode == 0, f"compose {' '.join(args)}: {result.stderr}"
        return result.stdout

    def container(self, service: str) -> str:
        """The one container of ``service`` (running or not)."""
        ids = self.ok("ps", "--all", "--quiet", service).split()
        assert len(ids) == 1, f"{service}: containers {ids}"
        return ids[0]

    def exec(
        self, service: str, *args: str, timeout_s: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """``docker compose exec -T SERVICE runbroker ARGS``."""
        argv = [str(self.engine.compose_bin), *self.cli.exec_argv(service, *args)[2:]]
        return subprocess.run(
            argv, env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=timeout_s, check=False,
        )  # fmt: skip

    def up(self, *args: str, timeout_s: float = UP_TIMEOUT_S) -> None:
        """``up --detach --wait ARGS``, then until the broker's DNS has settled (every start
        of a container reloads the network's DNS server: see ``wait_for_name``)."""
        self.ok("up", "--detach", "--wait", *args, timeout_s=timeout_s)
        wait_for_name(self.engine, self.container("broker"))

    def dsn(self, database: str = "runbroker") -> str:
        return f"postgresql://postgres:{self.password}@127.0.0.1:{self.pg_port}/{database}"

    def down(self) -> None:
        self.compose("down", "--volumes", "--remove-orphans", "--timeout", "5", timeout_s=180)


@pytest.fixture(scope="package")
def engine() -> Iterator[Engine]:
    """The engine's API service for this package's tests, with health checks driven, and the
    environment the acceptance suite's compose backend needs (restored afterwards)."""
    state = podman_engine.state_dir()
    for image in (RUNTIME_IMAGE, TEST_IMAGE, POSTGRES_IMAGE):
        if not podman_engine.image_exists(state, image):
            pytest.fail(f"{image} is missing: scripts/test-container sets the engine up")
    with (
        podman_engine.api_service(state) as api_env,
        HealthChecks(api_env) as health,
        pytest.MonkeyPatch.context() as patch,
    ):
        # Only what the engine needs; nothing of the host's compose settings.
        api_env = {k: v for k, v in api_env.items() if not k.startswith("COMPOSE_")}
        compose_bin = docker_compose()
        for name in (
            "CONTAINERS_CONF",
            "CONTAINERS_STORAGE_CONF",
            "CONTAINERS_REGISTRIES_CONF",
            "DOCKER_HOST",
            "DOCKER_BUILDKIT",
        ):
            patch.setenv(name, api_env[name])
        patch.setenv("PATH", f"{ENGINE_FILES}{os.pathsep}{os.environ['PATH']}")
        patch.setenv("RUNBROKER_DOCKER_COMPOSE", str(compose_bin))
        patch.setenv(backends.COMPOSE_OVERRIDES_ENV, str(PODMAN_OVERRIDE))
        yield Engine(state, api_env, health, compose_bin)


def new_stack(engine: Engine, *profiles: str) -> Stack:
    project = f"rbct-{uuid.uuid4().hex[:10]}"
    port = _free_port()
    env = {**engine.env, "RUNBROKER_PG_PORT": str(port), "POSTGRES_PASSWORD": "runbroker"}
    cli = ComposeCLI(project, (backends.COMPOSE_FILE, PODMAN_OVERRIDE), profiles)
    return Stack(engine, cli, env, port)


@pytest.fixture(scope="module")
def stack(engine: Engine) -> Iterator[Stack]:
    """postgres, migrate and broker up and healthy (``up --wait``), with the replicas and tests
    profiles known; taken down with its volumes at the end of the module."""
    made = new_stack(engine, "replicas", "tests")
    engine.health.watch(made.project)
    try:
        made.up("broker")
        yield made
    finally:
        engine.health.forget(made.project)
        made.down()
