"""The README's "Add it to your image", done as a user does it on the real engine: the wheel
built from this checkout with the README's command, the README's Dockerfile snippet written
word for word beside a tasks file, then every line of its shell block run as written with the
`docker` CLI (against podman's Docker-compatible API): the image builds, the container starts,
once it serves `exec ... trigger report` streams the job's output and exits 0, `status`
answers, and `stop` drains the daemon to exit 0."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.container.conftest import Engine
from tests.support.backends import REPO
from tests.support.eventually import eventually

SECTION = "## Add it to your image"
TASKS = """
[tasks.report]
command = ["sh", "-c", "echo report for $RUNBROKER_TASK; echo done"]
"""
IMAGE, CONTAINER = "myjobs", "jobs"  # the names the README's lines use


def _section() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return readme.split(SECTION, 1)[1].split("\n## ", 1)[0]


def _block(language: str) -> str:
    (found,) = re.findall(rf"^```{language}\n(.*?)^```", _section(), re.MULTILINE | re.DOTALL)
    return str(found)


def _docker(engine: Engine, line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """One line of the README's shell block, as a shell runs it."""
    return subprocess.run(
        ["bash", "-c", line],
        cwd=cwd,
        env=engine.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.fixture
def context(engine: Engine, tmp_path: Path) -> Iterator[Path]:
    """A build context as the README leaves it: dist/ with the wheel, the Dockerfile, a tasks
    file; the README's container and image removed before and after."""
    (wheel_command,) = re.findall(r"\(`(python3 -m pip wheel [^`]*)`\)", _section())
    built = subprocess.run(
        [sys.executable, *wheel_command.split()[1:-2], str(tmp_path / "dist"), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    assert wheel_command.split()[-2:] == ["dist", "."]  # written into ./dist from the checkout
    (tmp_path / "Dockerfile").write_text(_block("dockerfile"))
    (tmp_path / "tasks.toml").write_text(TASKS)
    for cleanup in (f"docker rm -f {CONTAINER}", f"docker rmi -f {IMAGE}"):
        _docker(engine, cleanup, tmp_path)
    yield tmp_path
    for cleanup in (f"docker rm -f {CONTAINER}", f"docker rmi -f {IMAGE}"):
        _docker(engine, cleanup, tmp_path)
    shutil.rmtree(tmp_path / "dist", ignore_errors=True)


def test_the_readme_image_recipe_builds_and_runs_as_written(engine: Engine, context: Path) -> None:
    lines = [line.split("  #", 1)[0].strip() for line in _block("sh").splitlines()]
    assert [line.split()[:2] for line in lines] == [
        ["docker", "build"],
        ["docker", "run"],
        ["docker", "exec"],
        ["docker", "exec"],
        ["docker", "stop"],
    ]
    build, run, trigger, status, stop = lines
    built = _docker(engine, build, context)
    assert built.returncode == 0, built.stderr[-3000:]
    started = _docker(engine, run, context)
    assert started.returncode == 0, started.stderr
    # A person types the next line a moment later; the test waits for what that moment gives.
    health = f"docker exec {CONTAINER} runbroker health"
    eventually(lambda: _docker(engine, health, context).returncode == 0, "the daemon to serve")
    triggered = _docker(engine, trigger, context)
    assert triggered.returncode == 0, triggered.stderr
    assert triggered.stdout == "report for report\ndone\n"
    answered = _docker(engine, status, context)
    assert answered.returncode == 0, answered.stderr
    assert "1 accepted, 1 finished" in answered.stdout
    stopped = _docker(engine, stop, context)
    assert stopped.returncode == 0, stopped.stderr
    exit_code = _docker(
        engine, f"docker inspect --format '{{{{.State.ExitCode}}}}' {CONTAINER}", context
    )
    assert exit_code.stdout.strip() == "0", exit_code.stderr
