"""``runbroker next``, ``check`` and ``reload --dry-run`` with the real daemon, PID 1 of its
namespace: the planned times across the 2026 offset changes of Europe/Berlin and
Australia/Lord_Howe (a 30-minute one), asked of the daemon and of the file alone; a tasks file
checked for CI; a reload's plan that changes nothing."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.support.harness import RUNBROKER
from tests.support.reload_scenarios import StartDaemon, unwatched_tasks_file

TASKS = """
[tasks.berlin]
command = ["echo", "berlin"]
schedule = "daily 02:30"
tz = "Europe/Berlin"

[tasks.lordhowe]
command = ["echo", "lord howe"]
schedule = "daily 02:15"
tz = "Australia/Lord_Howe"

[tasks.lh_half]
command = ["echo", "every half hour"]
schedule = "cron */30 1 * * *"
tz = "Australia/Lord_Howe"

[tasks.manual]
command = ["echo", "manual"]
"""

# What the planned times are, computed by hand from the zone rules of 2026:
#   Berlin      03-29 01:00Z 02:00 +01 -> 03:00 +02;  10-25 01:00Z 03:00 +02 -> 02:00 +01
#   Lord Howe   04-04 15:00Z 02:00 +11 -> 01:30 +10:30;  10-03 15:30Z 02:00 +10:30 -> 02:30 +11
EXPECTED: dict[tuple[str, str], list[tuple[str, str, Any]]] = {
    ("berlin", "2026-03-28T00:00:00Z"): [
        ("2026-03-28T01:30:00Z", "2026-03-28T02:30:00+01:00", None),
        ("2026-03-29T01:00:00Z", "2026-03-29T03:00:00+02:00", ("gap", "02:30", None)),
        ("2026-03-30T00:30:00Z", "2026-03-30T02:30:00+02:00", None),
    ],
    ("berlin", "2026-10-24T00:00:00Z"): [
        ("2026-10-24T00:30:00Z", "2026-10-24T02:30:00+02:00", None),
        ("2026-10-25T00:30:00Z", "2026-10-25T02:30:00+02:00", ("fold", "02:30", "first")),
        ("2026-10-26T01:30:00Z", "2026-10-26T02:30:00+01:00", None),
    ],
    ("lordhowe", "2026-10-02T00:00:00Z"): [
        ("2026-10-02T15:45:00Z", "2026-10-03T02:15:00+10:30", None),
        ("2026-10-03T15:30:00Z", "2026-10-04T02:30:00+11:00", ("gap", "02:15", None)),
        ("2026-10-04T15:15:00Z", "2026-10-05T02:15:00+11:00", None),
    ],
    ("lh_half", "2026-04-04T00:00:00Z"): [
        ("2026-04-04T14:00:00Z", "2026-04-05T01:00:00+11:00", None),
        ("2026-04-04T14:30:00Z", "2026-04-05T01:30:00+11:00", ("fold", "01:30", "first")),
        ("2026-04-04T15:00:00Z", "2026-04-05T01:30:00+10:30", ("fold", "01:30", "second")),
    ],
}


def _times(answer: dict[str, Any]) -> list[tuple[str, str, Any]]:
    (task,) = answer["tasks"]
    found = []
    for slot in task["times"]:
        dst = slot.get("dst")
        mark = None if dst is None else (dst["kind"], dst["wall"], dst.get("fold_pass"))
        found.append((slot["at"], slot["local"], mark))
    return found


def _host_env(**more: str) -> dict[str, str]:
    """The environment of a command run on the host, with no daemon: no RUNBROKER_* of ours."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RUNBROKER_")}
    return {**env, **more}


def _host(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RUNBROKER, *args],
        env=_host_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_next_across_the_2026_changes_from_the_daemon_and_from_the_file(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = start_daemon(tasks_toml=TASKS)
    for (task, after), expected in EXPECTED.items():
        asked = daemon.exec("next", task, "--count", "3", "--after", after, "--json")
        assert asked.returncode == 0, asked.stderr
        answer = json.loads(asked.stdout)
        assert answer["source"] == "daemon"
        assert _times(answer) == expected, (task, after)
        offline = _host(
            "next",
            task,
            "--count",
            "3",
            "--after",
            after,
            "--json",
            "--file",
            str(workdir / "tasks.toml"),
        )
        assert offline.returncode == 0, offline.stderr
        from_file = json.loads(offline.stdout)
        assert from_file["source"] == "file"
        assert from_file["tasks"] == answer["tasks"]  # the same times, the same words


def test_next_prints_every_task_for_people_and_marks_the_moved_slot(
    start_daemon: StartDaemon,
) -> None:
    daemon = start_daemon(tasks_toml=TASKS)
    asked = daemon.exec("next", "--count", "2", "--after", "2026-03-28T00:00:00Z")
    assert asked.returncode == 0, asked.stderr
    lines = asked.stdout.splitlines()
    assert lines[0] == "berlin: daily 02:30 (Europe/Berlin)"
    assert lines[2] == (
        "  2026-03-29 03:00:00+02:00  = 2026-03-29T01:00:00Z  [DST gap: 02:30 did not exist "
        "(clocks went forward from 02:00 to 03:00); runs at 03:00, the end of the gap]"
    )
    assert "manual: no schedule (runs when triggered)" in lines
    now = daemon.exec("next", "berlin", "--count", "1", "--json")
    assert now.returncode == 0, now.stderr
    (slot,) = json.loads(now.stdout)["tasks"][0]["times"]
    status = json.loads(daemon.exec("status", "--json").stdout)
    (tick,) = [tick for tick in status["ticks"] if tick["task"] == "berlin"]
    assert tick["next_at"].startswith(slot["at"][:19])  # the ticker's own next time


def test_next_refuses_an_unknown_task_with_exit_2(start_daemon: StartDaemon, workdir: Path) -> None:
    daemon = start_daemon(tasks_toml=TASKS)
    asked = daemon.exec("next", "nope")
    assert asked.returncode == 2
    assert asked.stderr == (
        "runbroker: unknown task 'nope': this container defines berlin, lh_half, lordhowe, manual\n"
    )
    offline = _host("next", "nope", "--file", str(workdir / "tasks.toml"))
    assert (offline.returncode, offline.stderr) == (2, asked.stderr)


def test_check_passes_a_good_file_and_names_each_problem_of_a_bad_one(workdir: Path) -> None:
    good = workdir / "good.toml"
    good.write_text(TASKS)
    done = _host("check", str(good))
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{good}: ok\n", "")
    by_setting = _host("check", RUNBROKER_TASKS_FILE=str(good))
    assert by_setting.returncode == 0, by_setting.stderr
    bad = workdir / "bad.toml"
    bad.write_text(
        '[tasks.a]\ncommand = ["true"]\nschedule = "daily 24:00"\n\n'
        '[tasks.b]\ncommand = ["true"]\nschedule = "daily 02:30"\ntz = "Europe/Berln"\n\n'
        '[tasks.c]\ncommand = ["true"]\nretries = 3\n'
    )
    done = _host("check", str(bad))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"{bad}:3: tasks.a: invalid schedule 'daily 24:00': time of day must be HH:MM "
        "(00:00-23:59)",
        f"{bad}:8: tasks.b: unknown time zone 'Europe/Berln'",
        f"{bad}:12: tasks.c: unknown key 'retries'",
    ]
    broken = workdir / "broken.toml"
    broken.write_text('[tasks.a]\ncommand = ["true"\n')
    done = _host("check", str(broken))
    assert (done.returncode, done.stderr) == (
        2,
        f"{broken}:2: Unclosed array (at end of document)\n",
    )


def test_check_fails_the_file_run_refuses_and_both_name_the_same_problem(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    watched = '[tasks.watch]\ncommand = ["true"]\n\n[tasks.watch.notify]\nmax_silence = "auto"\n'
    daemon = start_daemon(tasks_toml=watched, wait_ready=False)
    assert daemon.wait() == 2
    problem = "tasks.watch.notify: max_silence = 'auto' needs the task's own interval or schedule"
    assert daemon.stderr() == f"runbroker: {problem}\n"
    path = workdir / "tasks.toml"
    checked = _host("check", str(path))
    assert (checked.returncode, checked.stdout, checked.stderr) == (2, "", f"{path}:5: {problem}\n")


NEW_TASKS = TASKS.replace('schedule = "daily 02:30"', 'schedule = "daily 04:00"').replace(
    '[tasks.manual]\ncommand = ["echo", "manual"]\n',
    '[tasks.hourly]\ncommand = ["echo", "hourly"]\nschedule = "cron 0 * * * *"\n',
)


def test_reload_dry_run_prints_the_plan_and_changes_nothing(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    path, swap = unwatched_tasks_file(workdir, TASKS, NEW_TASKS)
    daemon = start_daemon(env={"RUNBROKER_TASKS_FILE": str(path)})
    swap()
    planned = daemon.exec("reload", "--dry-run")
    assert planned.returncode == 0, planned.stderr
    lines = planned.stdout.splitlines()
    assert lines[0] == (
        "dry run, nothing changed; a reload would make: 1 added (hourly), 1 removed (manual), "
        "1 changed (berlin), 2 unchanged"
    )
    assert lines[1].startswith("  hourly (added): next none -> ")
    assert lines[2] == "  manual (removed): next none -> none"
    assert lines[3].startswith("  berlin (changed): next ")
    assert lines[3].endswith(
        "; schedule daily 02:30 (Europe/Berlin) -> daily 04:00 (Europe/Berlin)"
    )
    answer = json.loads(daemon.exec("next", "berlin", "--json").stdout)
    assert answer["tasks"][0]["schedule"] == "daily 02:30"  # not reloaded
    assert daemon.exec("trigger", "manual").returncode == 0
    assert daemon.log.events("tasks.reloaded") == []
    done = daemon.exec("reload")
    assert done.returncode == 0, done.stderr
    assert daemon.exec("trigger", "manual").returncode == 2  # the real reload removed it


def test_reload_dry_run_of_a_bad_file_says_why_and_changes_nothing(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    bad = TASKS + '\n[tasks.broken]\ncommand = ["true"]\nschedule = "weekly fun 02:00"\n'
    path, swap = unwatched_tasks_file(workdir, TASKS, bad)
    daemon = start_daemon(env={"RUNBROKER_TASKS_FILE": str(path)})
    swap()
    planned = daemon.exec("reload", "--dry-run")
    assert planned.returncode == 1
    assert planned.stdout == ""
    assert planned.stderr.startswith("runbroker: reload would be refused: tasks file ")
    assert "tasks.broken: invalid schedule 'weekly fun 02:00'" in planned.stderr
    health = daemon.exec("health")
    assert (health.returncode, health.stdout) == (0, "healthy\n")  # no failed reload recorded
    assert daemon.log.events("tasks.reload_refused") == []
