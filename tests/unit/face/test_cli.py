"""The ``runbroker`` command (daemon/face/cli.py): the request a trigger makes, the control
commands and their exit codes, and what a cold trigger imports and leaves to its exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from daemon.face import cli
from daemon.wire import client
from tests.support.fake_daemon import QUEUED, STARTED, Answer, fake_daemon
from tests.support.fake_extras import MARKS_VARIABLE, install_extras
from tests.unit.conftest import REPO


def test_cli_trigger_builds_the_request(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = short_dir / "rb.sock"
    done = {"event": "done", "ok": True, "id": "r1"}
    argv = ["trigger", "report", "--arg", "a1", "--arg", "a2", "--env", "K=v=w", "--timeout", "5s"]
    with fake_daemon(path, QUEUED, done) as requests:
        code = cli.main([*argv, "--socket", str(path), "--json"])
    assert code == 0
    expected = {"task": "report", "args": ["a1", "a2"], "env": {"K": "v=w"}, "batch": True}
    assert requests == [expected]
    assert [json.loads(line)["event"] for line in capsys.readouterr().out.splitlines()] == [
        "queued",
        "done",
    ]


@pytest.mark.parametrize("abbreviation", [[], ["--det"]])  # the fast path, then argparse
def test_cli_trigger_takes_values_that_start_with_a_dash(
    short_dir: Path, abbreviation: list[str]
) -> None:
    path = short_dir / "rb.sock"
    done = {"event": "done", "ok": True, "id": "r1"}
    argv = ["trigger", "report", "--arg", "--flag", "--arg", "-x", "--env", "K=-v", *abbreviation]
    with fake_daemon(path, QUEUED, done) as requests:
        code = cli.main([*argv, "--socket", str(path)])
    assert code == 0
    assert requests == [
        {"task": "report", "args": ["--flag", "-x"], "env": {"K": "-v"}, "batch": True}
    ]


@pytest.mark.parametrize(
    ("argv", "answer", "code", "printed"),
    [
        (["health"], {"event": "health", "ok": True}, 0, "healthy"),
        (["health"], {"event": "health", "ok": False, "reason": "shutting down"}, 1, "unhealthy"),
        (["cancel", "r7"], {"event": "cancel", "ok": True, "state": "running"}, 0, "cancelled r7"),
        (["cancel", "r7"], {"event": "cancel", "ok": False, "reason": "no run"}, 1, "no run"),
    ],
)
def test_cli_control_commands(
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    answer: dict[str, Any],
    code: int,
    printed: str,
) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, answer):
        assert cli.main([*argv, "--socket", str(path)]) == code
    captured = capsys.readouterr()
    assert printed in captured.out + captured.err


@pytest.mark.parametrize(
    ("argv", "code"),
    [(["status"], 69), (["status", "--json"], 69), (["cancel", "r7"], 69), (["health"], 1)],
)
def test_cli_control_commands_refused_by_the_peer_check_say_so(
    short_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int
) -> None:
    """The daemon answers a peer of another uid with a refusal instead of the op's answer: that
    is said in words, never shown as an empty status report or a failed cancel."""
    path = short_dir / "rb.sock"
    with fake_daemon(path, {"event": "done", "ok": False, "reason": "permission denied"}):
        assert cli.main([*argv, "--socket", str(path)]) == code
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == f"runbroker: {client.FORBIDDEN_TEXT}"


def test_cli_health_of_an_unreachable_daemon_is_1(short_dir: Path) -> None:
    assert cli.main(["health", "--socket", str(short_dir / "missing.sock")]) == 1


def test_cli_bad_timeout_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["trigger", "--timeout", "soon", "--socket", "/nonexistent/x.sock"])
    assert exit_info.value.code == 2
    assert "--timeout" in capsys.readouterr().err


def test_a_cold_trigger_never_imports_asyncio_pydantic_or_structlog() -> None:
    code = (
        "import daemon.face.cli, json, sys\n"
        "rc = daemon.face.cli.main(['trigger', '--socket', '/nonexistent/x.sock'])\n"
        "heavy = ('asyncio', 'pydantic', 'pydantic_settings', 'structlog', 'uvloop')\n"
        "print(json.dumps(sorted(m for m in heavy if m in sys.modules)))\n"
        "sys.exit(rc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 69, result.stderr
    assert "daemon unreachable" in result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == []


@pytest.mark.parametrize(
    ("answers", "code"),
    [
        ([QUEUED, STARTED, {"event": "output", "line": "hi"}, {"event": "done", "ok": True}], 0),
        ([{"event": "done", "ok": False, "reason": "unknown task 'x': this container ..."}], 2),
        ([{"event": "done", "ok": False, "reason": "run queue is full"}], 75),
    ],
)
def test_a_plain_trigger_stays_off_argparse_difflib_and_typing(
    short_dir: Path, answers: list[Answer], code: int
) -> None:
    """The cold path of every answer: what it imports beyond a bare interpreter's modules."""
    path = short_dir / "rb.sock"
    script = (
        "import sys\n"
        "before = set(sys.modules)\n"  # an editable install's path finder imports a few itself
        "import daemon.face.cli\n"
        f"rc = daemon.face.cli.main(['trigger', 'x', '--socket', {str(path)!r}])\n"
        "slow = ('argparse', 'difflib', 'typing', 're', 'enum', 'contextlib', 'asyncio')\n"
        "print(','.join(sorted(m for m in slow if m in set(sys.modules) - before)))\n"
        "sys.exit(rc)\n"
    )
    with fake_daemon(path, *answers):
        result = subprocess.run(
            [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=30
        )
    assert result.returncode == code, result.stderr
    assert result.stdout.splitlines()[-1] == ""


@pytest.mark.parametrize(
    ("words", "leaves"),
    [(["trigger"], True), (["status", "--json"], True), ([], True), (["run", "--", "true"], False)],
)
def test_only_short_lived_commands_leave_their_sockets_to_exit(
    words: list[str], leaves: bool
) -> None:
    assert cli.leaves_sockets_to_exit(words) is leaves


@pytest.mark.parametrize(
    ("answer", "code", "said"),
    [
        ({"ok": True, "added": [], "removed": [], "changed": [], "unchanged": ["a"]}, 0, ""),
        ({"ok": False, "reason": "tasks file /x: line 1"}, 1, "reload refused: tasks file"),
        ({"ok": False, "reason": "scheduler is shutting down"}, 75, "shutting down"),
        ({"ok": False, "reason": "stopping", "code": "shutting_down"}, 75, "refused: stopping"),
        (
            {"ok": False, "reason": "scheduler is shutting down", "code": "reload_refused"},
            1,
            "reload refused: scheduler",
        ),
        ({"ok": False, "reason": "unknown op 'reload'"}, 2, "does not know `reload`"),
    ],
)
def test_cli_reload_exit_codes(
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    answer: dict[str, Any],
    code: int,
    said: str,
) -> None:
    path = short_dir / "rb.sock"
    with fake_daemon(path, {"event": "done", **answer}):
        assert cli.main(["reload", "--socket", str(path)]) == code
    assert said in capsys.readouterr().err


@pytest.mark.parametrize(
    "words", [("check", "TASKS"), ("next", "--file", "TASKS"), ("once", "a")], ids=str
)
def test_a_command_that_loads_the_core_imports_no_console_extra(
    tmp_path: Path, words: tuple[str, ...]
) -> None:
    """As ``run`` does: rich and the others, installed, are never drawn with by runbroker."""
    site = install_extras(tmp_path / "site")
    marks = tmp_path / "marks"
    marks.mkdir()
    tasks = tmp_path / "tasks.toml"
    tasks.write_text('[tasks.a]\ncommand = ["true"]\nschedule = "every 1h"\n')
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
        "RUNBROKER_TASKS_FILE": str(tasks),
        MARKS_VARIABLE: str(marks),
    }
    argv = [sys.executable, "-m", "daemon", *(str(tasks) if w == "TASKS" else w for w in words)]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in marks.iterdir()) == []
    subprocess.run([sys.executable, "-c", "import structlog"], env=env, check=True)
    assert sorted(path.name for path in marks.iterdir()) != [], "the stand-ins are found"
