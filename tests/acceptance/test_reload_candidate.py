"""``runbroker reload --dry-run --file PATH``: a candidate file previewed against the tasks the
daemon (PID 1 of its namespace) runs, before it is put in the watched place; nothing applied."""

from __future__ import annotations

from pathlib import Path

from tests.support.reload_scenarios import ONE, TWO, StartDaemon, reload_status


def test_a_candidate_file_shows_its_plan_and_nothing_is_applied(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = start_daemon(tasks_toml=ONE)
    candidate = workdir / "new.toml"
    candidate.write_text(
        TWO.replace("echo first", "echo changed") + '[tasks.hourly]\ncommand = ["true"]\n'
        'schedule = "cron 0 * * * *"\n'
    )
    done = daemon.exec("reload", "--dry-run", "--file", str(candidate))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "dry run, nothing changed; a reload would make: 2 added (hourly, second), 0 removed, "
        "1 changed (first), 0 unchanged"
    )
    assert any(line.startswith("  hourly (added): next none -> ") for line in lines)
    # Nothing applied: the running tasks, no reload recorded, the watched file as it was.
    assert daemon.exec("trigger", "first").stdout == "first\n"
    assert daemon.exec("trigger", "second").returncode == 2
    assert reload_status(daemon)["last_at"] is None
    assert daemon.log.events("tasks.reloaded") == []
    assert (workdir / "tasks.toml").read_text() == ONE


def test_a_bad_candidate_shows_the_error_and_the_tasks_stay(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = start_daemon(tasks_toml=ONE)
    candidate = workdir / "bad.toml"
    candidate.write_text(ONE + '[tasks.nightly]\ncommand = ["true"]\nschedule = "daily 25:00"\n')
    done = daemon.exec("reload", "--dry-run", "--file", str(candidate))
    assert done.returncode == 1
    assert done.stderr.startswith(f"runbroker: reload would be refused: tasks file {candidate}")
    assert "tasks.nightly: invalid schedule 'daily 25:00'" in done.stderr
    missing = daemon.exec("reload", "--dry-run", "--file", str(workdir / "absent.toml"))
    assert missing.returncode == 1
    assert f"tasks file {workdir / 'absent.toml'} does not exist" in missing.stderr
    without_dry_run = daemon.exec("reload", "--file", str(candidate))
    assert without_dry_run.returncode == 2
    assert "--file needs --dry-run" in without_dry_run.stderr
    assert daemon.exec("trigger", "first").returncode == 0
    assert daemon.exec("trigger", "nightly").returncode == 2
    status = reload_status(daemon)
    assert (status["last_at"], status["last_error"]) == (None, None)
    assert daemon.exec("health").stdout == "healthy\n"  # no warning: nothing was refused
