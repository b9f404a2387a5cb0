"""The Dockerfile, checked without an engine: hadolint (no finding at any level), then the facts
the image must have for runbroker to be a correct PID 1."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.support.container_files import (
    DOCKERFILE,
    REPO,
    RUNBROKER_UID,
    Instruction,
    dockerfile_stages,
    final_stage,
    hadolint,
    parse_dockerfile,
    run_tool,
    settings_for,
)

DOCKER_STOP_DEFAULT_S = 10.0  # `docker stop` / `docker run` without --stop-timeout
EXIT_MARGIN_S = 0.5  # the process's own exit after the budget


def test_the_default_shutdown_budget_fits_docker_stops_default_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An image run without --stop-timeout (the Dockerfile cannot set one) drains in time."""
    budget_s = settings_for({}, monkeypatch).shutdown_timeout_s
    assert budget_s + EXIT_MARGIN_S < DOCKER_STOP_DEFAULT_S, (
        f"the default RUNBROKER_SHUTDOWN_TIMEOUT {budget_s}s does not fit `docker stop`'s"
        f" {DOCKER_STOP_DEFAULT_S}s: a clean drain would be SIGKILLed"
    )


def _env(stage_instructions: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for ins in stage_instructions:
        if ins.keyword == "ENV":
            for key, value in re.findall(r'([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S+)', ins.args):
                env[key] = value.strip('"')
    return env


def test_hadolint_finds_nothing() -> None:
    result = run_tool([hadolint(), "--failure-threshold", "info", DOCKERFILE])
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_hadolint_is_really_checking(tmp_path: Path) -> None:
    """A control: the same binary fails a Dockerfile with known findings, so a pass above means
    something."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN pip install requests\nUSER root\n")
    result = run_tool([hadolint(), "--failure-threshold", "info", bad])
    assert result.returncode != 0
    for rule in ("DL3006", "DL3013", "DL3042", "DL3002"):
        assert rule in result.stdout, result.stdout


def test_multi_stage_with_slim_python_runtime_last() -> None:
    stages = dockerfile_stages()
    names = [stage.name for stage in stages]
    assert names[-1] == "runtime", "the runtime stage must be the last (the default target)"
    assert "build" in names
    assert names.index("build") < names.index("runtime")
    runtime = stages[-1]
    assert re.fullmatch(r"python:3\.\d+-slim(-\w+)?", runtime.base), runtime.base
    # Every stage is tagged (no :latest, no untagged base).
    for stage in stages:
        assert stage.base in names or re.search(r":[\w.-]+$", stage.base), stage.base
        assert not stage.base.endswith(":latest"), stage.base


def test_final_image_has_no_build_tools_wheels_or_caches() -> None:
    runtime = final_stage()
    copies = runtime.all("COPY") + runtime.all("ADD")
    assert copies == [], (
        "the runtime stage installs straight from the build stage through a bind mount; a COPY"
        " would leave wheels in a layer"
    )
    env = _env(runtime.instructions)
    assert env.get("PIP_NO_CACHE_DIR") == "1"
    for run in runtime.all("RUN"):
        text = run.args
        for tool in ("apt-get", "apk ", "gcc", "build-essential", "make ", "git "):
            assert tool not in text, f"line {run.line}: {tool.strip()} in the final image"
        if "pip install" in text:
            assert "--mount=type=bind,from=build" in text, f"line {run.line}: wheels not mounted"
            assert "--no-index" in text, f"line {run.line}: the runtime must not reach PyPI"
    assert any("pip uninstall --yes setuptools wheel" in run.args for run in runtime.all("RUN"))


def test_non_root_numeric_user() -> None:
    user = final_stage().last("USER")
    assert user is not None, "no USER in the final stage: the daemon would run as root"
    uid, _, gid = user.args.partition(":")
    assert uid.isdigit(), f"USER {user.args!r}: not numeric (may not resolve on the host)"
    assert int(uid) != 0, "USER root"
    assert int(uid) == RUNBROKER_UID
    assert gid == "" or (gid.isdigit() and int(gid) != 0)


def test_run_sticky_and_writable_by_all_without_a_socket_directory() -> None:
    """/run as /tmp, and no /run/runbroker: without a mount the daemon makes its own (0700);
    a tmpfs mounted there has the mode it is given on every engine, which it would not over a
    directory of the image (runc before 1.1.8 gives it that directory's mode, podman's copy of
    /run under --read-only drops the directory's write bits for others)."""
    runs = " ".join(run.args for run in final_stage().all("RUN"))
    made = re.search(r"install -d -o (\w+) -g (\w+) -m (0?\d{3,4}) /run(?:\s|$)", runs)
    assert made is not None, "/run is not made writable for the daemon's socket directory"
    owner, group, mode = made.groups()
    assert (owner, group) == ("root", "root")
    assert int(mode, 8) == 0o1777
    assert "/run/runbroker" not in runs


def test_environment_entrypoint_stopsignal_healthcheck() -> None:
    runtime = final_stage()
    assert _env(runtime.instructions).get("PYTHONUNBUFFERED") == "1"
    entrypoint = runtime.last("ENTRYPOINT")
    assert entrypoint is not None
    assert entrypoint.exec_form() == ["runbroker", "run"], (
        "ENTRYPOINT must be the exec form: the shell form makes /bin/sh PID 1, and sh neither"
        " forwards SIGTERM nor reaps"
    )
    assert runtime.last("CMD") is None, "a CMD would be appended to `runbroker run`"
    stopsignal = runtime.last("STOPSIGNAL")
    assert stopsignal is not None
    assert stopsignal.args == "SIGTERM"
    health = runtime.last("HEALTHCHECK")
    assert health is not None
    options, _, command = health.args.partition("CMD")
    # Liveness, not readiness (`--ready`): a container marked unhealthy during a database
    # outage would be restarted by whatever watches health, with its running job.
    assert Instruction("CMD", command, health.line).exec_form() == ["runbroker", "health"]
    timeout = re.search(r"--timeout=(\d+)s", options)
    assert timeout is not None
    assert int(timeout.group(1)) >= 2
    # Nothing runs after USER: every RUN of the final stage is part of the image's set-up.
    keywords = [ins.keyword for ins in runtime.instructions]
    assert "RUN" not in keywords[keywords.index("USER") :]


def test_oci_labels_and_version_agree_with_pyproject() -> None:
    runtime = final_stage()
    labels = " ".join(ins.args for ins in runtime.all("LABEL"))
    keys = set(re.findall(r"(org\.opencontainers\.image\.[a-z.]+)=", labels))
    required = {"title", "description", "version", "revision", "created", "licenses"}
    assert {f"org.opencontainers.image.{key}" for key in required} <= keys
    version_arg = next(ins for ins in runtime.all("ARG") if ins.args.startswith("VERSION="))
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert version_arg.args == f"VERSION={project['version']}"
    assert f'org.opencontainers.image.licenses="{project["license"]["text"]}"' in labels


def test_context_is_an_allow_list_that_holds_what_is_copied() -> None:
    lines = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*", ".dockerignore must exclude everything first (no .git, no .venv)"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    for stage in dockerfile_stages():
        for copy in stage.all("COPY"):
            if "--from=" in copy.args:
                continue
            *sources, _dest = copy.args.split()
            for source in sources:
                assert source.rstrip("/") in allowed, f"COPY {source}: not in the build context"
                assert (REPO / source).exists(), f"COPY {source}: missing from the repository"


def test_parser_joins_continuations_and_reads_stages() -> None:
    stages = parse_dockerfile(
        "# syntax=docker/dockerfile:1\n"
        "FROM a:1 AS one\n"
        "RUN x \\\n"
        "    # a comment inside\n"
        "    && y\n"
        "FROM one\n"
        'ENTRYPOINT ["p", "q"]\n'
    )
    assert [(stage.name, stage.base) for stage in stages] == [("one", "a:1"), ("1", "one")]
    assert stages[0].instructions[0].args == "x && y"
    assert stages[1].instructions[0].exec_form() == ["p", "q"]
    assert Instruction("ENTRYPOINT", "p q", 1).exec_form() is None
