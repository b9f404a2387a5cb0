"""A task's ``misfire`` and ``catchup_window`` in the tasks file: read when they make sense,
refused with the task's name when they do not."""

from __future__ import annotations

import re

import pytest

from daemon.taskfile.loading import parse_tasks_toml
from daemon.taskfile.tasks_file import TaskConfigError


def test_a_scheduled_task_catches_up_by_default_with_no_window() -> None:
    task = parse_tasks_toml('[tasks.nightly]\ncommand = "true"\nschedule = "daily 02:30"\n')[
        "nightly"
    ]
    assert task.misfire == "coalesce"
    assert task.catchup_window_s is None


def test_misfire_and_a_window_are_read() -> None:
    text = '[tasks.t]\ncommand = "true"\ninterval = "1h"\nmisfire = "skip"\ncatchup_window = "6h"\n'
    task = parse_tasks_toml(text)["t"]
    assert task.misfire == "skip"
    assert task.catchup_window_s == 6 * 3600


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('misfire = "later"', "tasks.t: misfire must be one of 'coalesce', 'skip'"),
        ("misfire = 1", "tasks.t: misfire must be one of"),
        ('catchup_window = "0s"', "tasks.t: catchup_window must be positive"),
        ('catchup_window = "soon"', "tasks.t: catchup_window:"),
        ("catchup_window = 60", "tasks.t: catchup_window must be a duration string"),
    ],
)
def test_a_bad_value_names_the_task_and_the_key(extra: str, message: str) -> None:
    text = f'[tasks.t]\ncommand = "true"\nschedule = "every 1h"\n{extra}\n'
    with pytest.raises(TaskConfigError, match="^" + re.escape(message)):
        parse_tasks_toml(text)


@pytest.mark.parametrize("extra", ['misfire = "skip"', 'catchup_window = "1h"'])
def test_catch_up_settings_need_a_schedule_or_an_interval(extra: str) -> None:
    with pytest.raises(
        TaskConfigError, match=re.escape("tasks.t: 'misfire' and 'catchup_window' need")
    ):
        parse_tasks_toml(f'[tasks.t]\ncommand = "true"\n{extra}\n')
