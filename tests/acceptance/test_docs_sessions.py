"""The README's tour as a user types it: its tasks file given to a real daemon, PID 1 of its
namespace, and every command of each session marked ``<!-- runnable: tour -->`` run against it,
its stdout compared with the lines shown (``...`` stands for anything, within a line or for
lines). ``check`` needs no daemon: it reads the tour's file from a directory of its own."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from tests.support.harness import RUNBROKER
from tests.support.reload_scenarios import StartDaemon

README = Path(__file__).resolve().parents[2] / "README.md"
FENCE = re.compile(r"<!-- ([a-z]+): ([a-z ]+) -->\n```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _marked(kind: str, name: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    found = [m.group(4) for m in FENCE.finditer(text) if (m.group(1), m.group(2)) == (kind, name)]
    assert found, f"README.md: no block marked {kind}: {name}"
    return found


def _sessions(block: str) -> list[tuple[list[str], list[str]]]:
    """Each ``$ command`` of a console block with the lines shown after it."""
    sessions: list[tuple[list[str], list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            sessions.append((shlex.split(line[2:]), []))
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


def test_the_tour_runs_as_shown(start_daemon: StartDaemon, tmp_path: Path) -> None:
    (tasks,) = _marked("tour", "tasks file")
    daemon = start_daemon(tasks_toml=tasks, env={"RUNBROKER_INTERVAL": "off"})
    (tmp_path / "tasks.toml").write_text(tasks)
    ran = 0
    for block in _marked("runnable", "tour"):
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
    assert ran == 5  # trigger, logs -f, status, next, check
