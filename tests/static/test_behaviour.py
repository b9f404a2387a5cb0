"""The commands the container files run, run for real: `runbroker health` as the HEALTHCHECK and
the probes run it, `runbroker migrate` as the one-shot service and the init container run it,
and `runbroker run` with the compose broker's own command and environment.

The daemon is PID 1 of a PID namespace and is entered with nsenter, as `docker exec` and a
Docker health check would (tests/support/harness.py). The database is the local PostgreSQL
(``RUNBROKER_TEST_DSN``, as in tests/integration); each test makes its own database and drops it.
All of them run the real ``runbroker`` and are marked ``acceptance`` (those that need the
database ``integration`` too); they stay in the static tier because they read the repository's
own container files, which the image that runs the acceptance tier in the compose stack lacks.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from daemon.pg.store.migrate import load_migrations
from daemon.schedules.interval import parse_duration
from tests.support.container_files import DEV_COMPOSE, compose_config, compose_invocations
from tests.support.harness import RUNBROKER, Daemon
from tests.support.pgsupport import fresh_database

pytestmark = pytest.mark.acceptance

# A job that ignores SIGTERM and ends when the test creates the file it names.
STUBBORN = 'trap "" TERM; while [ ! -e "$1" ]; do sleep 0.02; done'


@pytest.fixture
def database() -> Iterator[str]:
    """A throwaway, empty database; its DSN."""
    with fresh_database(migrated=False) as url:
        yield url


def _cli(
    *args: str, env: dict[str, str], timeout_s: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """``runbroker ARGS`` with exactly this environment (plus PATH)."""
    return subprocess.run(
        [RUNBROKER, *args],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def _migrate(dsn: str) -> subprocess.CompletedProcess[str]:
    return _cli("migrate", "--json", env={"RUNBROKER_DATABASE_URL": dsn})


async def _applied_versions(dsn: str) -> list[int]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT version FROM runbroker_migrations ORDER BY version")
    finally:
        await conn.close()
    return [int(row["version"]) for row in rows]


# ---------------------------------------------------------------------------------------------
# runbroker health: HEALTHCHECK CMD, compose healthcheck, Kubernetes exec probes


def test_health_is_0_while_serving_and_1_while_draining_and_after_exit(workdir: Path) -> None:
    release = workdir / "release"
    daemon = Daemon(
        workdir,
        ("sh", "-c", STUBBORN, "job", str(release)),
        env={"RUNBROKER_GRACE": "20s", "RUNBROKER_SHUTDOWN_TIMEOUT": "25s"},
    )
    try:
        healthy = daemon.exec("health")
        assert (healthy.returncode, healthy.stdout.strip()) == (0, "healthy"), healthy.stderr

        # Busy is still healthy: a long job is not a wedged executor.
        queued = daemon.exec("trigger", "--detach")
        assert queued.returncode == 0, queued.stderr
        daemon.log.wait_for("run.started")
        busy = daemon.exec("health")
        assert busy.returncode == 0, busy.stdout + busy.stderr

        # Draining (SIGTERM received, the job ignores it and has 20s of grace): not healthy,
        # so the orchestrator stops sending work and a health check cannot pass by accident.
        daemon.signal(signal.SIGTERM)
        daemon.log.wait_for("broker.draining")
        draining = daemon.exec("health")
        assert draining.returncode == 1, draining.stdout + draining.stderr
        reason = draining.stdout + draining.stderr
        assert "shutting down" in reason or "unreachable" in reason, reason

        release.touch()
        assert daemon.wait() == 0
    finally:
        daemon.stop()
    # No daemon: the socket is gone, health says so with 1 (not 69, not a traceback).
    gone = _cli("health", env={"RUNBROKER_SOCKET": str(daemon.socket)})
    assert gone.returncode == 1
    assert "unreachable" in gone.stderr
    assert "Traceback" not in gone.stderr


def test_health_is_1_when_nothing_ever_listened(workdir: Path) -> None:
    result = _cli("health", env={"RUNBROKER_SOCKET": str(workdir / "none.sock")})
    assert result.returncode == 1
    assert "unreachable" in result.stderr


def test_health_is_1_when_the_path_is_not_a_socket(workdir: Path) -> None:
    path = workdir / "plain-file"
    path.write_text("not a socket")
    result = _cli("health", env={"RUNBROKER_SOCKET": str(path)})
    assert result.returncode == 1


# ---------------------------------------------------------------------------------------------
# runbroker migrate: the compose `migrate` service and the Kubernetes init container


@pytest.mark.integration
def test_migrate_applies_every_migration_once_then_nothing(database: str) -> None:
    versions = [m.version for m in load_migrations()]
    first = _migrate(database)
    assert first.returncode == 0, first.stderr
    answer = json.loads(first.stdout)
    assert answer["ok"] is True
    assert answer["version"] == versions[-1]
    assert len(answer["applied"]) == len(versions)
    again = _migrate(database)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["applied"] == []
    assert asyncio.run(_applied_versions(database)) == versions


@pytest.mark.integration
def test_migrate_from_several_replicas_at_once(database: str) -> None:
    """Every replica's init container runs `runbroker migrate` at the same moment."""
    env = {"PATH": os.environ.get("PATH", ""), "RUNBROKER_DATABASE_URL": database}
    procs = [
        subprocess.Popen(
            [RUNBROKER, "migrate", "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [proc.communicate(timeout=60) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], [err for _, err in outputs]
    applied = [name for out, _ in outputs for name in json.loads(out)["applied"]]
    assert sorted(applied) == sorted(m.name for m in load_migrations()), "applied twice or never"
    assert asyncio.run(_applied_versions(database)) == [m.version for m in load_migrations()]


@pytest.mark.integration
def test_migrate_reads_the_url_from_a_file(database: str, workdir: Path) -> None:
    """The Kubernetes manifests give the URL as a Secret file (RUNBROKER_DATABASE_URL_FILE)."""
    url_file = workdir / "database-url"
    url_file.write_text(database + "\n")
    result = _cli("migrate", "--json", env={"RUNBROKER_DATABASE_URL_FILE": str(url_file)})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ok"] is True


def test_migrate_fails_cleanly_without_a_reachable_database() -> None:
    secret = "pw-" + uuid.uuid4().hex
    result = _cli(
        "migrate", env={"RUNBROKER_DATABASE_URL": f"postgresql://u:{secret}@127.0.0.1:1/x"}
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "unreachable" in result.stderr
    assert secret not in result.stdout + result.stderr, "the password leaked into the output"
    unset = _cli("migrate", env={})
    assert unset.returncode == 2
    assert "RUNBROKER_DATABASE_URL" in unset.stderr


# ---------------------------------------------------------------------------------------------
# runbroker run: the compose broker, with its own command and environment


@pytest.mark.integration
def test_compose_broker_command_runs_migrated_and_drains_within_its_grace(
    database: str, workdir: Path
) -> None:
    broker = compose_config(DEV_COMPOSE)["services"]["broker"]
    (invocation,) = [
        inv
        for inv in compose_invocations(DEV_COMPOSE)
        if inv.where.endswith(" broker (entrypoint + command)")
    ]
    assert invocation.argv[:3] == ("runbroker", "run", "--")
    command = invocation.argv[3:]
    env = {k: str(v) for k, v in broker["environment"].items()}
    assert env.pop("RUNBROKER_DATABASE_URL").startswith("postgresql://")
    env["RUNBROKER_DATABASE_URL"] = database  # the throwaway database, not the compose host
    assert _migrate(database).returncode == 0

    daemon = Daemon(workdir, command, env=env)
    try:
        # RUNBROKER_INTERVAL (1m) with fire-on-start: a tick runs at once.
        daemon.log.wait_for("run.done", lambda line: line.get("trigger") == "tick")
        healthy = daemon.exec("health")
        log_tail = "\n".join(daemon.log.raw[-3:])
        assert healthy.returncode == 0, f"{healthy.stdout}{healthy.stderr}daemon log:\n{log_tail}"
        status = json.loads(daemon.exec("status", "--json").stdout)
        assert status["database"] is not None, "the broker runs without its database"
        triggered = daemon.exec("trigger")
        assert triggered.returncode == 0, triggered.stderr
        words = triggered.stdout.split()
        assert words[0] == "run", words
        assert words[2:] == ["of", "default", "(external)"], words
        daemon.signal(signal.SIGTERM)
        started = time.monotonic()
        grace_s = parse_duration(broker["stop_grace_period"])
        assert daemon.wait(timeout_s=grace_s) == 0
        assert time.monotonic() - started < grace_s
    finally:
        daemon.stop()
