"""The shell sessions of the README and docs/ marked ``<!-- runnable: NAME -->``, as a user
types them: the tasks file marked ``<!-- NAME: tasks file -->`` given to a real daemon, PID 1
of its namespace, and every command of the sessions run against it, its stdout compared with
the lines shown (``...`` stands for anything, within a line or for lines). ``check`` needs no
daemon: it reads that file from a directory of its own. NAME is ``tour`` (the README's
five-minute tour) or ``dst`` (``runbroker next`` across offset changes, docs/schedules.md)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.support.harness import RUNBROKER
from tests.support.reload_scenarios import StartDaemon

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"<!-- ([a-z]+): ([a-z ]+) -->\n```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _marked(kind: str, name: str) -> list[str]:
    found = [
        m.group(4)
        for page in PAGES
        for m in FENCE.finditer(page.read_text(encoding="utf-8"))
        if (m.group(1), m.group(2)) == (kind, name)
    ]
    assert found, f"no block marked {kind}: {name}"
    return found


def _sessions(block: str) -> list[tuple[list[str], list[str]]]:
    """Each ``$ command`` of a console block with the lines shown after it."""
    sessions: list[tuple[list[str], list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            sessions.append((shlex.split(line[2:], comments=True), []))
        else:
            sessions[-1][1].append(line)
    return sessions


def _shown(lines: list[str]) -> re.Pattern[str]:
    """The lines as a pattern: ``...`` alone is any lines, within a line anything."""
    parts = [
        r"(?:.*\n)*" if line == "..." else ".*".join(map(re.escape, line.split("..."))) + r"\n"
        for line in lines
    ]
    return re.compile("".join(parts))


@pytest.mark.parametrize(("name", "commands"), [("tour", 5), ("dst", 2)])
def test_the_session_runs_as_shown(
    name: str, commands: int, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    (tasks,) = _marked(name, "tasks file")
    daemon = start_daemon(tasks_toml=tasks, env={"RUNBROKER_INTERVAL": "off"})
    (tmp_path / "tasks.toml").write_text(tasks)
    ran = 0
    for block in _marked("runnable", name):
        for argv, lines in _sessions(block):
            assert argv[0] == "runbroker", argv
            if argv[1] == "check":
                done = subprocess.run(
                    [RUNBROKER, *argv[1:]],
                    cwd=tmp_path,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                )
            else:
                done = daemon.exec(*argv[1:])
            assert done.returncode == 0, (argv, done.stderr)
            assert _shown(lines).fullmatch(done.stdout), (argv, lines, done.stdout)
            ran += 1
    assert ran == commands
