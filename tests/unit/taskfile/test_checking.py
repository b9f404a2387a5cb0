"""Checking a tasks file (daemon/taskfile/checking.py): every problem, each on its line, in
the loader's own words."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.taskfile import TaskConfigError, parse_tasks_toml
from daemon.taskfile.checking import Problem, check_tasks_text, file_problems

BAD = """\
[tasks.ok]
command = ["true"]

[tasks.bad_schedule]
command = ["true"]
schedule = "daily 25:00"
tz = "Europe/Berlin"

[tasks.zone]
command = "true"
schedule = "daily 02:00"
tz = "Mars/Base"

[tasks."typo"]
comand = ["true"]

[tasks.slow]
command = ["true"]
allow_args = true
timeout = "-5s"

[tasks.nothing]

[other]
x = 1
"""


def test_every_problem_is_found_on_its_line() -> None:
    problems = check_tasks_text(BAD)
    assert [(problem.line, problem.message) for problem in problems] == [
        (24, "unknown table 'other'"),
        (
            6,
            "tasks.bad_schedule: invalid schedule 'daily 25:00': "
            "time of day must be HH:MM (00:00-23:59)",
        ),
        (12, "tasks.zone: unknown time zone 'Mars/Base'"),
        (15, "tasks.typo: unknown key 'comand'"),
        (20, "tasks.slow: timeout must be positive"),
        (22, "tasks.nothing: set exactly one of 'command' or 'handler'"),
    ]


def test_a_toml_error_is_the_one_problem_with_its_line() -> None:
    problems = check_tasks_text('[tasks.a]\ncommand = "true"\ntimeout = \n')
    assert len(problems) == 1
    assert problems[0].line == 3
    assert problems[0].text("t.toml") == "t.toml:3: Invalid value (at line 3, column 11)"
    unclosed = check_tasks_text('[tasks.a]\ncommand = ["true"\n')
    assert unclosed == [Problem(2, "Unclosed array (at end of document)")]


def test_a_file_that_cannot_be_read_is_one_problem_without_a_line(tmp_path: Path) -> None:
    assert file_problems(tmp_path / "none.toml")[1] == [Problem(None, "no such file")]
    assert file_problems(tmp_path)[1] == [Problem(None, "not a regular file (a directory)")]
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b"# caf\xe9\n")
    assert file_problems(latin)[1] == [Problem(None, "not valid UTF-8")]
    assert Problem(None, "no such file").text("x.toml") == "x.toml: no such file"


def test_a_good_file_has_no_problem(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text('[tasks.a]\ncommand = ["true"]\nschedule = "cron */5 * * * *"\n')
    assert file_problems(good)[1] == []


NAMES = st.sampled_from(["a", "b", "c", "d"])
VALUES = st.sampled_from(
    [
        'command = ["true"]',
        'schedule = "daily 02:30"',
        'schedule = "daily 99:00"',
        'tz = "Europe/Berlin"',
        'tz = "Nowhere/Atall"',
        'interval = "10m"',
        'timeout = "0s"',
        "allow_args = 3",
        'nonsense = "x"',
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(NAMES, st.lists(VALUES, max_size=4, unique=True)), max_size=4))
def test_the_check_agrees_with_the_loader(tables: list[tuple[str, list[str]]]) -> None:
    """No problem exactly when the loader takes the file; the loader's first error is among
    the problems."""
    text = "".join(
        f"[tasks.{name}]\n" + "".join(f"{v}\n" for v in values)
        for name, values in dict(tables).items()
    )
    problems = check_tasks_text(text)
    try:
        parse_tasks_toml(text, "t")
    except TaskConfigError as exc:
        assert str(exc).removeprefix("t: ") in [problem.message for problem in problems]
    else:
        assert problems == []


PLACED = """\
# tasks of the nightly jobs
[tasks.cron]
command = ["true"]

schedule = "cron 61 * * * *"
[tasks.report]
command = ["true"]
[tasks.report.notify.webhook]
on = ["failure"]

url = "ftp://hooks.example.invalid/x"

[tasks.sync]
command = ["true"]
interval = "1h"
notify.webhook.url = "https://hooks.example.invalid/y"
notify.webhook.on = ["bogus"]

[tasks.typed]
command = '''
true
schedule = "daily 02:30"
'''
schedule = "daily 25:00"
[tasks]
inline = { command = "true", notify = { ping = { url = "https://p.example.invalid", on = [
  "recovery"] } } }

[notify.command]
command = "true"
timeout = "2h"
"""


def test_each_problem_is_on_its_keys_own_line() -> None:
    """The key's line, whichever way TOML sets it: under its table, dotted, inline, after a
    multi-line string that holds a look-alike."""
    problems = {
        problem.message.partition(":")[0]: problem.line for problem in check_tasks_text(PLACED)
    }
    assert problems == {
        "notify.command": 31,
        "tasks.cron": 5,
        "tasks.report.notify.webhook": 11,
        "tasks.sync.notify.webhook": 17,
        "tasks.typed": 24,
        "tasks.inline.notify.ping": 26,
    }
