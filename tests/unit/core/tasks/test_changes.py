"""What a reload changes (daemon/core/tasks/changes.py): each change named, and a file read twice
unchanged whatever its schedules."""

from __future__ import annotations

from daemon.core.tasks import Task, compare_tasks
from daemon.taskfile import parse_tasks_toml


def test_compare_tasks_names_each_change() -> None:
    old = {"a": Task("a", command=("true",)), "b": Task("b", command=("true",))}
    new = {"a": Task("a", command=("false",)), "c": Task("c", command=("true",))}
    changes = compare_tasks(old, new)
    assert (changes.added, changes.removed, changes.changed, changes.unchanged) == (
        ("c",),
        ("b",),
        ("a",),
        (),
    )
    assert compare_tasks(old, dict(old)).unchanged == ("a", "b")


def test_the_same_file_read_twice_is_unchanged_for_every_schedule_form() -> None:
    text = "".join(
        f'[tasks.t{i}]\ncommand = ["true"]\nschedule = "{spec}"\ntz = "Europe/Berlin"\n'
        for i, spec in enumerate(
            [
                "every 5m",
                "daily 02:30",
                "weekly mon 02:30",
                "cron 30 2 * * *",
                "at 2030-01-01T00:00:00Z",
            ]
        )
    )
    changes = compare_tasks(parse_tasks_toml(text), parse_tasks_toml(text))
    assert changes.unchanged == ("t0", "t1", "t2", "t3", "t4")
