"""``runbroker next`` (daemon/face/upcoming.py): from a tasks file without a daemon, its text
and JSON, and its exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon import exits
from daemon.face import cli
from daemon.face.upcoming import render_next

TASKS = """
[tasks.report]
command = ["true"]
schedule = "at 2026-03-29T02:30"
tz = "Europe/Berlin"
[tasks.manual]
command = ["true"]
"""


@pytest.fixture
def tasks_file(clean_env: None, tmp_path: Path) -> Path:
    path = tmp_path / "tasks.toml"
    path.write_text(TASKS)
    return path


def test_next_from_a_file_prints_each_task(
    tasks_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["next", "--file", str(tasks_file), "--after", "2026-01-01T00:00:00Z", "--json"]
    assert cli.main(argv) == exits.EXIT_OK
    answer = json.loads(capsys.readouterr().out)
    assert (answer["source"], answer["after"]) == ("file", "2026-01-01T00:00:00Z")
    assert [task["task"] for task in answer["tasks"]] == ["manual", "report"]
    (moved,) = answer["tasks"][1]["times"]
    assert moved["at"] == "2026-03-29T01:00:00Z"
    assert moved["local"] == "2026-03-29T03:00:00+02:00"
    assert moved["dst"]["kind"] == "gap"
    argv = ["next", "report", "--file", str(tasks_file), "--after", "2026-06-01T00:00:00Z"]
    assert cli.main(argv) == exits.EXIT_OK
    assert capsys.readouterr().out.splitlines() == [
        "report: at 2026-03-29T01:00:00Z (Europe/Berlin)",
        "  (a one-shot whose time has passed)",
    ]


def test_an_unknown_task_exits_2_naming_the_tasks(
    tasks_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["next", "nope", "--file", str(tasks_file)]) == exits.EXIT_USAGE
    assert capsys.readouterr().err == (
        "runbroker: unknown task 'nope': this container defines manual, report\n"
    )


def test_a_bad_file_exits_2_with_its_problem(
    tasks_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks_file.write_text('[tasks.a]\ncommand = ["true"]\nschedule = "daily 25:00"\n')
    assert cli.main(["next", "--file", str(tasks_file)]) == exits.EXIT_CONFIG
    assert "tasks.a: invalid schedule 'daily 25:00'" in capsys.readouterr().err
    missing = tasks_file.with_name("missing.toml")
    assert cli.main(["next", "--file", str(missing)]) == exits.EXIT_CONFIG
    assert "does not exist" in capsys.readouterr().err


def test_without_a_daemon_next_exits_69_and_says_how_to_ask_a_file(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["next", "--socket", str(short_dir / "none.sock")])
    assert code == exits.EXIT_UNAVAILABLE
    assert "runbroker next --file PATH" in capsys.readouterr().err


@pytest.mark.parametrize("count", ["0", "101", "x"])
def test_a_count_out_of_range_is_a_usage_error(
    count: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["next", "--count", count])
    assert exit_info.value.code == exits.EXIT_USAGE
    assert "expected a number from 1 to 100" in capsys.readouterr().err


def test_the_text_marks_a_moved_slot_and_a_fold() -> None:
    answer = {
        "tasks": [
            {
                "task": "report",
                "schedule": "daily 02:30",
                "tz": "Europe/Berlin",
                "times": [
                    {
                        "at": "2026-03-29T01:00:00Z",
                        "local": "2026-03-29T03:00:00+02:00",
                        "dst": {"kind": "gap", "wall": "02:30", "note": "02:30 did not exist"},
                    },
                    {"at": "2026-03-30T00:30:00Z", "local": "2026-03-30T02:30:00+02:00"},
                ],
            },
            {"task": "manual", "schedule": None, "tz": "UTC", "times": []},
        ]
    }
    assert render_next(answer).splitlines() == [
        "report: daily 02:30 (Europe/Berlin)",
        "  2026-03-29 03:00:00+02:00  = 2026-03-29T01:00:00Z  [DST gap: 02:30 did not exist]",
        "  2026-03-30 02:30:00+02:00  = 2026-03-30T00:30:00Z",
        "manual: no schedule (runs when triggered)",
    ]
    assert render_next({"tasks": []}) == "no tasks"


@pytest.mark.parametrize(
    ("argv", "answer", "code", "said"),
    [
        (
            ["next"],
            {"event": "done", "ok": False, "reason": "unknown op 'next'", "code": "bad_request"},
            exits.EXIT_USAGE,
            "this daemon does not know `next`",
        ),
        (
            ["reload", "--dry-run"],
            {
                "event": "done",
                "ok": False,
                "reason": "invalid request: unknown field 'dry_run' (op 'reload' takes id, op)",
                "code": "bad_request",
            },
            exits.EXIT_USAGE,
            "this daemon does not know `reload --dry-run`",
        ),
        (
            ["reload", "--dry-run"],
            {"event": "reload", "ok": False, "reason": "tasks file t: bad", "code": "x"},
            exits.EXIT_FAILED,
            "runbroker: reload would be refused: tasks file t: bad",
        ),
    ],
)
def test_an_older_or_refusing_daemon_is_said_in_words(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    answer: dict[str, object],
    code: int,
    said: str,
) -> None:
    from daemon.wire import client

    monkeypatch.setattr(client, "control", lambda _path, _request: answer)
    assert cli.main([*argv, "--socket", "/nonexistent.sock"]) == code
    assert said in capsys.readouterr().err


def test_next_and_check_take_schedules_as_cron_users_write_them(
    clean_env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tasks.toml"
    path.write_text(
        '[tasks.five]\ncommand = "true"\nschedule = "*/5 * * * *"\n'
        '[tasks.tick]\ncommand = "true"\nschedule = "@every 90s"\n'
        '[tasks.day]\ncommand = "true"\nschedule = "@daily"\ntz = "Europe/Berlin"\n'
    )
    argv = ["next", "--file", str(path), "--count", "2", "--after", "2026-01-01T00:00:00Z"]
    assert cli.main(argv) == exits.EXIT_OK
    assert capsys.readouterr().out.splitlines() == [
        "day: cron @daily (Europe/Berlin)",
        "  2026-01-02 00:00:00+01:00  = 2026-01-01T23:00:00Z",
        "  2026-01-03 00:00:00+01:00  = 2026-01-02T23:00:00Z",
        "five: cron */5 * * * * (UTC)",
        "  2026-01-01 00:05:00+00:00  = 2026-01-01T00:05:00Z",
        "  2026-01-01 00:10:00+00:00  = 2026-01-01T00:10:00Z",
        "tick: every 1m30s (UTC)",
        "  2026-01-01 00:01:30+00:00  = 2026-01-01T00:01:30Z",
        "  2026-01-01 00:03:00+00:00  = 2026-01-01T00:03:00Z",
    ]
    assert cli.main(["check", str(path)]) == exits.EXIT_OK
    assert capsys.readouterr().out == f"{path}: ok\n"
