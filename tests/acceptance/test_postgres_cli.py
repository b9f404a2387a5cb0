"""Acceptance: bad input to the database commands is one line and exit 2, never a traceback.

A malformed ``RUNBROKER_DATABASE_URL`` is a configuration error (naming the setting, never the
password) for ``run``, ``migrate`` and ``jobs``; a well-formed URL to a database that is not
there is an outage the daemon waits out. ``jobs add`` and ``jobs history`` refuse what
PostgreSQL or the runner could not use, and writes nothing."""

from __future__ import annotations

import pytest

from tests.support.harness import Daemon, Workdir
from tests.support.pgsupport import cli, database_url, value

MALFORMED = [
    "not a url",
    "postgresql://app:hunter2@127.0.0.1:notaport/db",
    "postgresql://app:hunter2@[::1/x",
    "mysql://app:hunter2@127.0.0.1/db",
    "postgresql://app:hunter2@127.0.0.1/db?sslmode=bogus",
    "postgresql://app:hunter2@127.0.0.1/db?foo=bar",  # every connection would fail
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
        env = {"RUNBROKER_DATABASE_URL": url, "RUNBROKER_LEASE": "3s", "RUNBROKER_GRACE": "1s"}
        daemon = Daemon(work.path, ["true"], env=env)
        try:
            daemon.log.wait_for("db.disconnected")
            assert daemon.exec("status").returncode == 0  # still serving
        finally:
            daemon.stop()
    finally:
        work.cleanup()


DEEP = "[" * 3000 + "]" * 3000
TOO_DEEP = "[" * 101 + "]" * 101


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["add", "j", "--task", "t", "--every", "1m", "--payload", "NaN"], "--payload"),
        (["add", "j", "--task", "t", "--every", "1m", "--payload", '{"a":Infinity}'], "--payload"),
        (["add", "j", "--task", "t", "--every", "1m", "--payload", '{"a":1e999}'], "--payload"),
        (["add", "j", "--task", "t", "--every", "1m", "--payload", '"\\u0000"'], "u0000"),
        (["add", "j", "--task", "t", "--every", "1m", "--payload", '{"\\u0000":1}'], "u0000"),
        (["add", "j", "--task", "t", "--every", "1m", "--payload", DEEP], "nested"),
        (["add", "j", "--task", "t", "--every", "1m", "--payload", TOO_DEEP], "nested"),
        (["add", "j", "--task", "t", "--every", "1m", "--payload", "1" * 5000], "--payload"),
        (["add", "j", "--task", "t", "--every", "1m", "--max-attempts", "99999999999"], "attempts"),
        (["add", "j", "--task", "t", "--every", "1m", "--depends-on", "nosuchjob"], "nosuchjob"),
        (["history", "--limit", "99999999999999999999"], "--limit"),
        (["history", "j", "--limit", "99999999999999999999"], "--limit"),
    ],
)
def test_jobs_refuses_what_the_database_cannot_take(dsn: str, argv: list[str], says: str) -> None:
    done = cli(dsn, "jobs", *argv)
    assert done.returncode == 2, done.stderr
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert says in err
    assert value(dsn, "SELECT count(*) FROM scheduled_jobs") == 0


def test_jobs_add_takes_a_payload_at_the_depth_limit_and_existing_dependencies(dsn: str) -> None:
    nested = "[" * 100 + "]" * 100
    assert cli(dsn, "jobs", "add", "a", "--task", "t", "--every", "1m").returncode == 0
    done = cli(dsn, "jobs", "add", "b", "--task", "t", "--every", "1m", "--payload", nested,
               "--depends-on", "a", "--depends-on", "a:skip", "--max-attempts", "1000")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert value(dsn, "SELECT payload::text FROM scheduled_jobs WHERE name = 'b'") == nested
