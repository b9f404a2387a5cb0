"""``on_busy`` and ``start_deadline`` in the tasks file: their values, and a bad one named with
the file and the line it is on."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.core.ticker.busy import ON_BUSY
from daemon.taskfile import TaskConfigError, parse_tasks_toml
from daemon.taskfile.key_lines import key_lines

SOURCE = "/etc/runbroker/tasks.toml"


def _tasks(text: str) -> dict[str, object]:
    return dict(parse_tasks_toml(text, SOURCE))


@pytest.mark.parametrize("policy", ON_BUSY)
def test_each_policy_and_a_deadline_are_read(policy: str) -> None:
    text = f"""
[tasks.report]
command = ["true"]
schedule = "daily 02:30"
on_busy = "{policy}"
start_deadline = "15m"
"""
    task = parse_tasks_toml(text, SOURCE)["report"]
    assert (task.on_busy, task.start_deadline_s) == (policy, 900.0)


def test_unset_they_are_none() -> None:
    task = parse_tasks_toml('[tasks.t]\ncommand = ["true"]\ninterval = "1m"\n', SOURCE)["t"]
    assert (task.on_busy, task.start_deadline_s) == (None, None)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            'on_busy = "drop"',
            f"{SOURCE}:5: tasks.report: on_busy must be one of 'queue', 'skip', 'coalesce', "
            "'replace', got 'drop'",
        ),
        ("on_busy = 3", f"{SOURCE}:5: tasks.report: on_busy must be one of"),
        ('start_deadline = "soon"', f"{SOURCE}:5: tasks.report: start_deadline: "),
        ("start_deadline = 90", f"{SOURCE}:5: tasks.report: start_deadline must be a duration"),
        ('start_deadline = "0s"', f"{SOURCE}:5: tasks.report: start_deadline must be positive"),
        ('start_deadline = "-5m"', f"{SOURCE}:5: tasks.report: start_deadline"),
    ],
)
def test_a_bad_value_names_the_file_and_line(lines: str, message: str) -> None:
    text = f"""# the nightly report
[tasks.report]
command = ["true"]
schedule = "daily 02:30"
{lines}
"""
    with pytest.raises(TaskConfigError) as raised:
        parse_tasks_toml(text, SOURCE)
    assert str(raised.value).startswith(message)


def test_a_deadline_needs_a_timing_to_apply_to() -> None:
    text = '[tasks.manual]\ncommand = ["true"]\nstart_deadline = "5m"\n'
    with pytest.raises(TaskConfigError, match=r":3: tasks.manual: start_deadline needs an"):
        parse_tasks_toml(text, SOURCE)


def test_the_default_task_ticks_at_the_global_interval_and_may_have_one() -> None:
    text = '[tasks.default]\ncommand = ["true"]\nstart_deadline = "5m"\n'
    assert parse_tasks_toml(text, SOURCE)["default"].start_deadline_s == 300.0


def test_an_inline_table_names_the_line_of_its_key() -> None:
    text = '\ntasks.report = { command = ["true"], interval = "1m", on_busy = "later" }\n'
    with pytest.raises(TaskConfigError, match=rf"^{SOURCE}:2: tasks.report: on_busy must"):
        parse_tasks_toml(text, SOURCE)


_names = st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True)
_keys = st.sampled_from(["command", "interval", "on_busy", "start_deadline", "timeout"])


@settings(deadline=None)
@given(
    st.lists(st.tuples(_names, st.lists(_keys, unique=True)), unique_by=lambda t: t[0]),
    st.booleans(),
)
def test_key_line_finds_the_line_of_each_tables_own_key(
    tables: list[tuple[str, list[str]]], quoted: bool
) -> None:
    lines = ["# tasks"]
    where: dict[tuple[str, str], int] = {}
    for name, keys in tables:
        lines.append(f'[tasks."{name}"]' if quoted else f"[ tasks.{name} ]")
        for key in keys:
            lines.append(f'{key} = "x"')
            where[(name, key)] = len(lines)
        lines.append("")
    found = key_lines("\n".join(lines))
    for name, _keys_of in tables:
        for key in ("command", "interval", "on_busy", "start_deadline", "timeout"):
            assert found.get(("tasks", name, key)) == where.get((name, key))


def test_check_places_a_bad_busy_key_on_its_line() -> None:
    from daemon.taskfile.checking import check_tasks_text

    text = """[tasks.report]
command = ["true"]
schedule = "daily 02:30"
start_deadline = "later"

[tasks.sync]
command = ["true"]
on_busy = "drop"
"""
    problems = [problem.text(SOURCE) for problem in check_tasks_text(text)]
    assert len(problems) == 2
    assert problems[0].startswith(f"{SOURCE}:4: tasks.report: start_deadline: ")
    assert problems[1].startswith(f"{SOURCE}:8: tasks.sync: on_busy must be one of 'queue'")
