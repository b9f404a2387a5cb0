"""A command's environment (daemon/core/jobenv.py): the run's context, and none of the daemon's
own settings or secrets."""

from __future__ import annotations

from datetime import UTC, datetime

from daemon.core.jobenv import job_environment
from daemon.core.runqueue import Run, RunRequest
from tests.unit.conftest import JOB_ENV
from tests.unit.core.executing import Recorder, executing, result_of, sh_task

# Settings of the daemon that must never reach a job, next to what should.
DAEMON_ENV = {
    **JOB_ENV,
    "HOME": "/root",
    "RUNBROKER_DATABASE_URL": "postgres://app:hunter2@db/app",
    "RUNBROKER_GRACE": "5s",
    "RUNBROKER_SOCKET": "/run/runbroker/runbroker.sock",
}


async def test_job_environment_has_the_run_context_and_no_daemon_secrets() -> None:
    task = sh_task("env", "env", allow_env=frozenset({"GREETING"}))
    async with executing(task, base_env=DAEMON_ENV) as (queue, _):
        recorder = Recorder()
        request = RunRequest(
            task="env",
            trigger="schedule",
            env={"GREETING": "hi"},
            job="nightly",
            attempt=2,
            scheduled_for=datetime(2026, 1, 1, tzinfo=UTC),
        )
        run = queue.submit(request, recorder)
        assert (await result_of(run)).ok
    env = dict(line.split("=", 1) for line in recorder.lines if "=" in line)
    assert env["RUNBROKER_RUN_ID"] == run.id
    assert env["RUNBROKER_TASK"] == "env"
    assert env["RUNBROKER_TRIGGER"] == "schedule"
    assert env["RUNBROKER_JOB"] == "nightly"
    assert env["RUNBROKER_ATTEMPT"] == "2"
    assert env["RUNBROKER_SCHEDULED_FOR"] == "2026-01-01T00:00:00Z"
    assert env["GREETING"] == "hi"
    assert env["HOME"] == "/root"
    assert "RUNBROKER_DATABASE_URL" not in env
    assert "RUNBROKER_GRACE" not in env
    # The socket path is shared so that a job can run `runbroker trigger` itself.
    assert env["RUNBROKER_SOCKET"] == "/run/runbroker/runbroker.sock"
    assert "hunter2" not in "\n".join(recorder.lines)


def test_job_environment_context_wins_over_what_a_trigger_sets() -> None:
    run = Run(
        RunRequest(task="t", trigger="tick", env={"RUNBROKER_TASK": "forged", "A": "1"}),
        run_id="r1",
    )
    env = job_environment({"RUNBROKER_DATABASE_URL": "secret", "PATH": "/bin"}, run)
    assert env == {
        "PATH": "/bin",
        "A": "1",
        "RUNBROKER_RUN_ID": "r1",
        "RUNBROKER_TASK": "t",
        "RUNBROKER_TRIGGER": "tick",
    }
