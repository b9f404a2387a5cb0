"""PostgreSQL helpers for acceptance tests: a fresh migrated database per test, bounded polls
of the database, and the ``runbroker`` CLI pointed at it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from tests.acceptance.harness import RUNBROKER

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


def poll(check: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    """A bounded poll of the database."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


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
