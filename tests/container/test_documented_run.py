"""The ``docker run`` line of docs/operations.md ("Build and run"), run as written on the
real engine: read from the file at test time, so the documentation and what is tested cannot
drift. ``docker`` is the tier's shim (podman's command line); the image it names is the
tier's runtime image, tagged with that name."""

from __future__ import annotations

import shlex
from collections.abc import Iterator

import pytest

from tests.container.conftest import Engine
from tests.support.eventually import eventually
from tests.support.podman_engine import ENGINE_FILES, REPO, RUNTIME_IMAGE

OPERATIONS = REPO / "docs" / "operations.md"
DAEMON_UID = 10001
SOCKET = "/run/runbroker/runbroker.sock"


def documented_docker_run() -> list[str]:
    """The ``docker run`` command of the "Build and run" section, its continued lines joined."""
    section = OPERATIONS.read_text(encoding="utf-8").split("## Build and run", 1)[1]
    block = section.split("```sh", 1)[1].split("```", 1)[0]
    lines = block.replace("\\\n", " ").splitlines()
    (line,) = [line for line in lines if line.strip().startswith("docker run ")]
    return shlex.split(line)


@pytest.fixture
def documented(engine: Engine) -> Iterator[tuple[list[str], str]]:
    """The documented command and its container's name, the image it names present, the
    container removed before and after."""
    argv = documented_docker_run()
    name = argv[argv.index("--name") + 1]
    image = next(arg for arg in argv if arg.startswith("runbroker:"))
    engine.podman("tag", RUNTIME_IMAGE, f"docker.io/library/{image}")
    engine.run(["podman", "rm", "--force", "--ignore", name])
    try:
        yield argv, name
    finally:
        engine.run(["podman", "rm", "--force", "--ignore", name])


def test_the_documented_docker_run_line_runs_as_written(
    engine: Engine, documented: tuple[list[str], str]
) -> None:
    argv, name = documented
    docker = str(ENGINE_FILES / "docker")  # the tier's `docker`: podman's command line
    assert argv[0] == "docker"
    argv = [docker, *argv[1:]]
    assert "--read-only" in argv
    assert "/run/runbroker:mode=1777" in argv  # the one form Docker and podman both take
    started = engine.run(argv)
    assert started.returncode == 0, f"{shlex.join(argv)}: {started.stderr}"

    def exec_(*args: str) -> tuple[int, str]:
        done = engine.run([docker, "exec", name, *args])
        return done.returncode, done.stdout + done.stderr

    eventually(lambda: exec_("runbroker", "health"), "health", until=lambda r: r[0] == 0)
    assert exec_("runbroker", "status")[0] == 0
    assert exec_("stat", "-c", "%a %u", "/run/runbroker")[1].split() == ["1777", "0"]
    assert exec_("stat", "-c", "%a %u", SOCKET)[1].split() == ["600", str(DAEMON_UID)]
    code, output = exec_("runbroker", "trigger")  # the task `default`: -- /app/nightly.sh
    assert code == 1, output  # the image has no /app/nightly.sh: the run fails, and says so
    assert "nightly.sh" in output
    stopped = engine.run([docker, "stop", name])
    assert stopped.returncode == 0, stopped.stderr
    assert engine.inspect(name)["State"]["ExitCode"] == 0
