"""PostgreSQL helpers for acceptance tests: a fresh migrated database per test, queries of it,
and the ``runbroker`` CLI pointed at it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from tests.support.eventually import eventually_async
from tests.support.harness import RUNBROKER

ADMIN_DSN = os.environ.get("RUNBROKER_TEST_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def database_url(name: str) -> str:
    return urlunsplit(urlsplit(ADMIN_DSN)._replace(path="/" + name))


def query(dsn: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    async def run() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(dsn)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    return asyncio.run(run())


def value(dsn: str, sql: str, *args: Any) -> Any:
    rows = query(dsn, sql, *args)
    return rows[0][0] if rows else None


@contextlib.contextmanager
def fresh_database(*, migrated: bool = True) -> Iterator[str]:
    """A new database (migrated with ``runbroker migrate`` unless told not to), dropped after."""
    name = f"acc_{uuid.uuid4().hex[:12]}"
    query(ADMIN_DSN, f'CREATE DATABASE "{name}"')
    url = database_url(name)
    try:
        if migrated:
            done = cli(url, "migrate")
            assert done.returncode == 0, done.stderr
        yield url
    finally:
        query(ADMIN_DSN, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def cli(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNBROKER_")}
    env["RUNBROKER_DATABASE_URL"] = dsn
    return subprocess.run(
        [RUNBROKER, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def jobs(dsn: str, *args: str) -> None:
    done = cli(dsn, "jobs", *args)
    assert done.returncode == 0, done.stderr


def local_cluster(dsn: str) -> tuple[str, str] | None:
    """(version, name) of this machine's cluster that ``dsn`` reaches, if it reaches one:
    a loopback or socket host and the port of a cluster ``pg_lsclusters`` lists."""
    parts = urlsplit(dsn)
    if parts.hostname not in (None, "", "localhost", "127.0.0.1", "::1"):
        return None
    if shutil.which("pg_lsclusters") is None:
        return None
    listed = subprocess.run(
        ["pg_lsclusters", "--no-header"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    for line in listed.splitlines():
        version, name, port = line.split()[:3]
        if int(port) == (parts.port or 5432):
            return version, name
    return None


def restart_server(dsn: str = ADMIN_DSN, timeout_s: float = 60.0) -> None:
    """Restart the PostgreSQL server that ``dsn`` (a superuser's) reaches; return once it
    accepts connections again. Either way every session is ended and connections are refused
    for a moment, which is what a client of the server sees of a restart.

    A cluster of this machine is restarted with ``pg_ctlcluster ... restart -m fast``. A server
    elsewhere (the compose stack's ``postgres`` service, seen from the ``tests`` container) has
    no command here that restarts it, so it is made to restart itself: this session's server
    process is killed with SIGKILL (``COPY ... TO PROGRAM``, as the server's user), and the
    postmaster, as after any crash of a server process, ends every other session, runs crash
    recovery and accepts connections again, without the server's container stopping."""
    cluster = local_cluster(dsn)
    if cluster is not None:
        version, name = cluster
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, name, "restart", "-m", "fast"],
            check=True,
            timeout=timeout_s,
        )
        return
    asyncio.run(_crash_restart(dsn, timeout_s))


async def _crash_restart(dsn: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    witness = await asyncpg.connect(dsn)
    victim = await asyncpg.connect(dsn)
    try:
        # $PPID of the program's shell is this session's server process.
        with contextlib.suppress(asyncpg.PostgresError, OSError):
            await victim.execute("COPY (SELECT 1) TO PROGRAM 'kill -KILL $PPID'")

        # The crash restart has ended every session once the witness's has ended; a new
        # connection is accepted only once recovery is over.
        async def witness_ended() -> bool:
            try:
                await witness.fetchval("SELECT 1", timeout=5)
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError):
                return True
            return False

        async def refusal() -> Exception | None:
            """Why a new connection fails; None once one is accepted."""
            try:
                conn = await asyncpg.connect(dsn, timeout=5)
            except (asyncpg.PostgresError, OSError, TimeoutError) as exc:
                return exc
            await conn.close()
            return None

        await eventually_async(
            witness_ended,
            "the server to end its sessions after the crash",
            timeout_s=max(0.0, deadline - time.monotonic()),
        )
        await eventually_async(
            refusal,
            "the server to come back after its restart",
            until=lambda error: error is None,
            timeout_s=max(0.0, deadline - time.monotonic()),
            every_s=0.1,
        )
    finally:
        for conn in (witness, victim):
            conn.terminate()


def ledger_task(seconds: int) -> str:
    """The tasks file's ``exclusive``: for ``seconds``, a line every 50 ms into ``$LEDGER`` with
    its replica (``$REPLICA``) and the time, ignoring SIGTERM (only a SIGKILL ends it early):
    two replicas' lines that interleave are two runs of one occurrence at once."""
    return f"""
[tasks.exclusive]
command = ["sh", "-c", '''
trap '' TERM
end=$(( $(date +%s) + {seconds} ))
while [ "$(date +%s)" -lt "$end" ]; do
  echo "$REPLICA $(date +%s.%N)" >> "$LEDGER"
  sleep 0.05
done
''']
grace = "1s"
"""


def read_ledger(path: Path) -> dict[str, list[float]]:
    """Each replica's ledger times (``ledger_task``)."""
    lines: dict[str, list[float]] = {}
    for line in path.read_text().splitlines():
        replica, _, stamp = line.partition(" ")
        if stamp:  # a line cut short by the SIGKILL has no time
            lines.setdefault(replica, []).append(float(stamp))
    return lines
