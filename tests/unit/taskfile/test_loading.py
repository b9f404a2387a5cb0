"""The TOML tasks file loaded (daemon/taskfile/loading.py): every key, every error named, and
the registry built from the command line's ``default`` and the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from daemon.core.tasks import RunContext
from daemon.taskfile import TaskConfigError, build_registry, parse_tasks_toml

HERE = __name__  # the handlers below, by the name their tasks file gives


async def good_handler(run: RunContext) -> dict[str, Any] | None:
    return {"task": run.task}


def sync_handler(_run: RunContext) -> None:
    return None


class Holder:
    @staticmethod
    async def nested(_run: RunContext) -> None:
        return None


not_callable = 42


def test_every_key() -> None:
    tasks = parse_tasks_toml(
        f"""
[tasks.backup]
command = ["backup", "--all"]
timeout = "30m"
soft_timeout = "10m"
grace = "20s"
allow_args = true
allow_env = ["LEVEL", "_X1"]
interval = "6h"

[tasks.report]
handler = "{HERE}:good_handler"
schedule = "daily 09:30"
tz = "Europe/Berlin"

[tasks."shell.v2"]
command = "echo 'hello world'"
grace = "0s"

[tasks.nested]
handler = "{HERE}:Holder.nested"
schedule = "every 90s"
"""
    )
    assert set(tasks) == {"backup", "report", "shell.v2", "nested"}
    backup = tasks["backup"]
    assert backup.command == ("backup", "--all")
    assert backup.handler is None
    assert (backup.timeout_s, backup.soft_timeout_s, backup.grace_s) == (1800.0, 600.0, 20.0)
    assert backup.allow_args is True
    assert backup.allow_env == frozenset({"LEVEL", "_X1"})
    assert backup.interval_s == 21600.0
    assert backup.schedule is None
    report = tasks["report"]
    assert report.handler is good_handler
    assert report.handler_ref == f"{HERE}:good_handler"
    assert report.command == ()
    assert report.schedule is not None
    assert (report.schedule.text, report.schedule.tz) == ("daily 09:30", "Europe/Berlin")
    assert report.allow_args is False
    assert report.allow_env == frozenset()
    assert (report.timeout_s, report.soft_timeout_s, report.grace_s) == (None, None, None)
    assert report.interval_s is None
    shell = tasks["shell.v2"]
    assert shell.command == ("echo", "hello world")
    assert shell.grace_s == 0.0
    nested = tasks["nested"]
    assert nested.handler is Holder.nested
    assert nested.schedule is not None
    assert nested.schedule.tz == "UTC"


def test_an_empty_file_defines_no_tasks() -> None:
    assert parse_tasks_toml("") == {}
    assert parse_tasks_toml("[tasks]\n") == {}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('bogus = 1\ncommand = ["true"]', "tasks.t: unknown key 'bogus'"),
        (
            'command = ["true"]\nhandler = "x:y"',
            "tasks.t: set exactly one of 'command' or 'handler'",
        ),
        ("timeout = '1s'", "tasks.t: set exactly one of 'command' or 'handler'"),
        ("command = []", "tasks.t: command must be a non-empty list of strings"),
        ("command = ['a', 1]", "tasks.t: command must be a non-empty list of strings"),
        ("command = ''", "tasks.t: command must be a non-empty list of strings"),
        ("command = 5", "tasks.t: command must be a non-empty list of strings"),
        ("handler = 5", "tasks.t: handler must be a string 'module:function'"),
        ("handler = 'nocolon'", "tasks.t: handler must be 'module:function', got 'nocolon'"),
        ("handler = ':f'", "tasks.t: handler must be 'module:function', got ':f'"),
        ("handler = 'no_such_module_xyz:f'", "tasks.t: cannot import 'no_such_module_xyz'"),
        (f"handler = '{HERE}:missing'", f"tasks.t: '{HERE}' has no 'missing'"),
        (
            f"handler = '{HERE}:sync_handler'",
            f"tasks.t: handler '{HERE}:sync_handler' must be an 'async def' function",
        ),
        (
            f"handler = '{HERE}:not_callable'",
            f"tasks.t: handler '{HERE}:not_callable' must be an 'async def' function",
        ),
        ("command = ['true']\nallow_args = 'yes'", "tasks.t: allow_args must be true or false"),
        (
            "command = ['true']\nallow_env = ['1BAD']",
            "tasks.t: allow_env must be a list of variable names",
        ),
        (
            "command = ['true']\nallow_env = ['A-B']",
            "tasks.t: allow_env must be a list of variable names",
        ),
        (
            "command = ['true']\nallow_env = 'HOME'",
            "tasks.t: allow_env must be a list of variable names",
        ),
        (
            "command = ['true']\ntimeout = 30",
            "tasks.t: timeout must be a duration string such as '30s'",
        ),
        ("command = ['true']\ntimeout = 'soon'", "tasks.t: timeout: invalid duration 'soon'"),
        ("command = ['true']\ntimeout = '0s'", "tasks.t: timeout must be positive"),
        ("command = ['true']\nsoft_timeout = '-1s'", "tasks.t: soft_timeout must be positive"),
        ("command = ['true']\ninterval = '0'", "tasks.t: interval must be positive"),
        ("command = ['true']\ngrace = '-1s'", "tasks.t: grace must not be negative"),
        (
            "command = ['true']\nschedule = 'daily 09:00'\ninterval = '1h'",
            "tasks.t: set either 'interval' or 'schedule', not both",
        ),
        ("command = ['true']\ntz = 'Europe/Berlin'", "tasks.t: 'tz' needs a 'schedule'"),
        ("command = ['true']\nschedule = 5", "tasks.t: schedule and tz must be strings"),
        ("command = ['true']\nschedule = 'fortnightly'", "tasks.t: invalid schedule 'fortnightly'"),
        (
            "command = ['true']\nschedule = 'daily 09:00'\ntz = 'Mars/Olympus'",
            "tasks.t: unknown time zone 'Mars/Olympus'",
        ),
    ],
)
def test_errors_name_the_task_and_the_problem(body: str, message: str) -> None:
    with pytest.raises(TaskConfigError) as excinfo:
        parse_tasks_toml(f"[tasks.t]\n{body}\n")
    assert str(excinfo.value).startswith(message)
    assert "\n" not in str(excinfo.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[tasks.t\n", "tasks.toml: Expected ']'"),
        ("[jobs.t]\ncommand = ['true']\n", "tasks.toml: unknown table 'jobs'"),
        ("tasks = 5\n", "tasks.toml: 'tasks' must be a table"),
        ("[tasks]\nt = 5\n", "tasks.toml: tasks.t must be a table"),
        ("[tasks.'bad name']\ncommand = ['true']\n", "tasks.bad name: invalid task name"),
        ("[tasks.'-x']\ncommand = ['true']\n", "tasks.-x: invalid task name"),
    ],
)
def test_errors_of_the_document(text: str, message: str) -> None:
    with pytest.raises(TaskConfigError) as excinfo:
        parse_tasks_toml(text, "tasks.toml")
    assert str(excinfo.value).startswith(message)


def test_registry_from_the_command_and_the_file(tmp_path: Path) -> None:
    tasks_file = tmp_path / "tasks.toml"
    tasks_file.write_text("[tasks.report]\ncommand = ['report']\n")
    registry = build_registry(("backup", "--all"), tasks_file)
    assert registry.names() == frozenset({"default", "report"})
    default = registry.get("default")
    assert default is not None
    assert default.command == ("backup", "--all")
    assert default.allow_args is False


def test_default_may_come_from_the_file_alone(tmp_path: Path) -> None:
    tasks_file = tmp_path / "tasks.toml"
    tasks_file.write_text("[tasks.default]\ncommand = ['run-me']\ninterval = '5m'\n")
    default = build_registry((), tasks_file).get("default")
    assert default is not None
    assert default.command == ("run-me",)
    assert default.interval_s == 300.0


def test_default_defined_twice_is_refused(tmp_path: Path) -> None:
    tasks_file = tmp_path / "tasks.toml"
    tasks_file.write_text("[tasks.default]\ncommand = ['run-me']\n")
    with pytest.raises(TaskConfigError, match="defined both by the command line and by the tasks"):
        build_registry(("backup",), tasks_file)


def test_a_missing_tasks_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    assert build_registry(("true",), missing).names() == frozenset({"default"})
    assert build_registry((), None).names() == frozenset()
    with pytest.raises(TaskConfigError, match=f"tasks file {missing} does not exist"):
        build_registry(("true",), missing, file_required=True)


def test_an_unreadable_or_bad_tasks_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(
        TaskConfigError, match=rf"tasks file {tmp_path}: not a regular file \(a directory\)"
    ):
        build_registry((), tmp_path)
    bad = tmp_path / "tasks.toml"
    bad.write_text("[tasks.x]\nbogus = 1\ncommand = ['true']\n")
    with pytest.raises(TaskConfigError, match=r"tasks\.x: unknown key 'bogus'"):
        build_registry((), bad)
    bad.write_text("not toml at all [")
    with pytest.raises(TaskConfigError, match=f"^{bad}: "):
        build_registry((), bad)


def test_more_bad_task_definitions_are_config_errors_not_crashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(TaskConfigError, match=r"tasks\.x: command: No closing quotation"):
        parse_tasks_toml('[tasks.x]\ncommand = "echo \'unclosed"\n')
    (tmp_path / "broken_handlers.py").write_text("def oops(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TaskConfigError, match=r"cannot import .broken_handlers.: SyntaxError"):
        parse_tasks_toml('[tasks.x]\nhandler = "broken_handlers:oops"\n')
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'[tasks.x]\ncommand = ["echo", "caf\xe9"]\n')
    with pytest.raises(TaskConfigError, match="not valid UTF-8"):
        build_registry((), latin)


def test_a_file_nested_too_deeply_is_a_config_error_not_a_crash() -> None:
    text = "[tasks.a]\ncommand = " + "[" * 3000 + "]" * 3000 + "\n"
    with pytest.raises(TaskConfigError, match=r"tasks\.toml: nested too deeply"):
        parse_tasks_toml(text, "tasks.toml")
