"""``runbroker check`` (daemon/face/check.py): exit 0 or 2, one line per problem on stderr."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon import exits
from daemon.face import cli


def tasks_file(tmp_path: Path, text: str) -> Path:
    """``text`` written as a tasks file in ``tmp_path``, the file ``check`` is given."""
    path = tmp_path / "tasks.toml"
    path.write_text(text)
    return path


def test_a_good_file_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tasks_file(tmp_path, '[tasks.a]\ncommand = ["true"]\n')
    assert cli.main(["check", str(path)]) == exits.EXIT_OK
    assert capsys.readouterr().out == f"{path}: ok\n"


def test_a_bad_file_exits_2_with_a_line_per_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tasks_file(
        tmp_path, '[tasks.a]\ncomand = ["true"]\n\n[tasks.b]\ncommand = ["true"]\ntz = "UTC"\n'
    )
    assert cli.main(["check", str(path)]) == exits.EXIT_CONFIG
    assert capsys.readouterr().err.splitlines() == [
        f"{path}:2: tasks.a: unknown key 'comand'",
        f"{path}:6: tasks.b: 'tz' needs a 'schedule'",
    ]


def test_without_a_file_the_settings_name_it(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_env: None,
) -> None:
    monkeypatch.setenv("RUNBROKER_TASKS_FILE", str(tmp_path / "absent.toml"))
    assert cli.main(["check"]) == exits.EXIT_CONFIG
    assert capsys.readouterr().err == f"{tmp_path / 'absent.toml'}: no such file\n"


def test_a_file_run_refuses_is_refused_with_runs_words_on_its_line(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_env: None,
) -> None:
    path = tasks_file(
        tmp_path, '[tasks.a]\ncommand = ["true"]\n\n[tasks.a.notify]\nmax_silence = "auto"\n'
    )
    assert cli.main(["check", str(path)]) == exits.EXIT_CONFIG
    assert capsys.readouterr().err == (
        f"{path}:5: tasks.a.notify: max_silence = 'auto' needs the task's own interval or "
        "schedule\n"
    )
    path.write_text("# nothing yet\n")
    assert cli.main(["check", str(path)]) == exits.EXIT_CONFIG
    assert capsys.readouterr().err == (
        f"{path}: no tasks: give a command after '--', set RUNBROKER_COMMAND, or define tasks "
        "in RUNBROKER_TASKS_FILE\n"
    )
    monkeypatch.setenv("RUNBROKER_COMMAND", "true")  # the daemon's task default: it starts
    assert cli.main(["check", str(path)]) == exits.EXIT_OK


def test_an_interval_the_daemon_clamps_is_a_warning_on_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], clean_env: None
) -> None:
    path = tasks_file(
        tmp_path,
        '[tasks.a]\ncommand = ["true"]\n# fast\ninterval = "10ms"\n[tasks.b]\n'
        'command = ["true"]\ninterval = "50ms"\n',
    )
    assert cli.main(["check", str(path)]) == exits.EXIT_OK
    out, err = capsys.readouterr()
    assert out == f"{path}: ok\n"
    assert err == (
        f"{path}:4: warning: tasks.a: interval is below the minimum 50ms; using the minimum\n"
    )


def test_a_grace_that_breaks_the_fencing_rule_is_on_its_line_with_a_database(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_env: None,
) -> None:
    path = tasks_file(tmp_path, '[tasks.a]\ncommand = ["true"]\n\ngrace = "40s"\n')
    assert cli.main(["check", str(path)]) == exits.EXIT_OK
    capsys.readouterr()
    monkeypatch.setenv("RUNBROKER_DATABASE_URL", "postgresql://runbroker@127.0.0.1:1/none")
    assert cli.main(["check", str(path)]) == exits.EXIT_CONFIG
    assert capsys.readouterr().err.startswith(
        f"{path}:4: the grace of task a (40s) must be at most half of RUNBROKER_LEASE (60s)"
    )
