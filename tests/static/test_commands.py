"""Every ``runbroker ...`` command the Dockerfile, the compose files and the manifests run is one
the program has, with arguments it accepts; and the wheel the image installs holds every module
and migration of the package (an editable install would hide a missing one)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from daemon.face.parser import build_parser
from tests.support.container_files import REPO, Invocation, all_invocations

# Subcommands whose arguments are parsed by their own module (daemon/pg/admin/commands.py).
OWN_PARSERS = frozenset({"jobs", "migrate"})


def _subcommands() -> set[str]:
    parser = build_parser()
    for action in parser._actions:  # argparse has no public accessor for sub-parsers
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict):
            return set(choices)
    raise AssertionError("build_parser() has no subcommands")


def test_the_files_run_the_commands_they_should() -> None:
    """The extraction below is not vacuous: the commands we know the files run are found."""
    found = {(inv.argv[1], inv.where.split()[0]) for inv in all_invocations()}
    for where in ("Dockerfile", "docker-compose.yml", "deploy/compose/docker-compose.yml"):
        assert ("run", where) in found, where
        assert ("health", where) in found, where
    assert ("migrate", "deployment.yaml") in found
    assert ("health", "deployment.yaml") in found
    assert ("migrate", "docker-compose.yml") in found


@pytest.mark.parametrize("invocation", all_invocations(), ids=lambda inv: inv.where)
def test_every_command_exists_and_its_arguments_parse(invocation: Invocation) -> None:
    argv = list(invocation.argv[1:])
    assert argv, f"{invocation.where}: bare `runbroker`"
    assert argv[0] in _subcommands(), f"{invocation.where}: no subcommand {argv[0]!r}"
    if argv[0] in OWN_PARSERS:
        return
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        refused = " ".join(argv)
        raise AssertionError(f"{invocation.where}: `runbroker {refused}` is refused") from exc


def test_the_own_parser_commands_exist_in_the_package() -> None:
    from daemon.pg.admin import commands as jobs_cli

    assert callable(jobs_cli.main)
    assert callable(jobs_cli.migrate_main)


def test_the_wheel_holds_every_module_and_migration(tmp_path: Path) -> None:
    """The image installs the wheel, not the source tree: build it exactly as the Dockerfile's
    build stage does (`pip wheel .`, isolated) and compare its files with the package."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), "."],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("runbroker-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name for name in archive.namelist() if name.startswith("daemon/")}
    package = REPO / "daemon"
    wanted = {
        str(path.relative_to(REPO))
        for pattern in ("*.py", "*.sql", "py.typed")
        for path in package.rglob(pattern)
        if "__pycache__" not in path.parts
    }
    missing = sorted(wanted - shipped)
    assert not missing, f"the wheel (and so the image) lacks: {missing}"


OPERATIONS = REPO / "docs" / "operations.md"


def _doc_commands() -> list[list[str]]:
    """``runbroker ...`` command lines in the shell blocks of the operations page."""
    text = OPERATIONS.read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)
    found: list[list[str]] = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words: list[str] = []
            for token in [*lexer, ";"]:
                if token not in ("|", "||", "&&", ";", "&"):
                    words.append(token)
                    continue
                # The program, not a container or a file named runbroker (`-c runbroker`).
                starts = [
                    i
                    for i, word in enumerate(words)
                    if word == "runbroker" and (i == 0 or words[i - 1] not in ("-c", "-f"))
                ]
                if starts:
                    found.append(words[starts[-1] + 1 :])
                words = []
    return found


def test_the_operations_page_shows_only_commands_that_exist() -> None:
    commands = _doc_commands()
    assert len(commands) >= 10, "the extraction found too little"
    assert {argv[0] for argv in commands} >= {"trigger", "status", "health", "jobs", "migrate"}
    for argv in commands:
        assert argv[0] in _subcommands(), argv
        if argv[0] == "jobs":
            usage = subprocess.run(
                [sys.executable, "-m", "daemon", "jobs", argv[1], "--help"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert usage.returncode == 0, f"runbroker jobs {argv[1]}: {usage.stderr}"
            for flag in (word for word in argv[2:] if word.startswith("--")):
                assert flag in usage.stdout, f"runbroker jobs {argv[1]} {flag}"
        elif argv[0] not in OWN_PARSERS:
            try:
                build_parser().parse_args(argv)
            except SystemExit as exc:
                raise AssertionError(f"`runbroker {' '.join(argv)}` is refused") from exc
