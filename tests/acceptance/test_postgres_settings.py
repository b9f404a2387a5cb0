"""Acceptance: a malformed ``RUNBROKER_DATABASE_URL`` is a configuration error (exit 2, one line
naming the setting, never the password) for ``run``, ``migrate`` and ``jobs``; a well-formed URL
to a database that is not there is an outage the daemon waits out."""

from __future__ import annotations

import pytest

from tests.acceptance.harness import Daemon, Workdir
from tests.acceptance.pgsupport import cli, database_url

MALFORMED = [
    "not a url",
    "postgresql://app:hunter2@127.0.0.1:notaport/db",
    "postgresql://app:hunter2@[::1/x",
    "mysql://app:hunter2@127.0.0.1/db",
    "postgresql://app:hunter2@127.0.0.1/db?sslmode=bogus",
]


@pytest.mark.parametrize("url", MALFORMED)
def test_run_refuses_a_malformed_database_url(url: str) -> None:
    work = Workdir()
    try:
        daemon = Daemon(work.path, ["true"], env={"RUNBROKER_DATABASE_URL": url}, wait_ready=False)
        try:
            assert daemon.wait() == 2
            err = daemon.stderr().strip()
            assert "RUNBROKER_DATABASE_URL: " in err
            assert len(err.splitlines()) == 1
            assert "hunter2" not in err
            assert not daemon.socket.exists()
        finally:
            daemon.stop()
    finally:
        work.cleanup()


@pytest.mark.parametrize("url", MALFORMED)
@pytest.mark.parametrize("command", [["migrate"], ["jobs", "list"], ["jobs", "history"]])
def test_migrate_and_jobs_refuse_a_malformed_database_url(url: str, command: list[str]) -> None:
    done = cli(url, *command)
    assert done.returncode == 2
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert "RUNBROKER_DATABASE_URL: " in err
    assert "Traceback" not in err
    assert "hunter2" not in err


def test_a_missing_database_is_an_outage_not_a_configuration_error() -> None:
    work = Workdir()
    try:
        url = database_url("rb_no_such_database")
        env = {"RUNBROKER_DATABASE_URL": url, "RUNBROKER_LEASE": "1s"}
        daemon = Daemon(work.path, ["true"], env=env)
        try:
            daemon.log.wait_for("db.disconnected")
            assert daemon.exec("status").returncode == 0  # still serving
        finally:
            daemon.stop()
    finally:
        work.cleanup()
