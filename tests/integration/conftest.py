"""Integration tests on a real PostgreSQL: one migrated template per session, a fresh clone per
test (``CREATE DATABASE ... TEMPLATE``), dropped WITH (FORCE) afterwards.

``RUNBROKER_TEST_DSN`` names a server and a database to connect to for administration
(default ``postgresql://postgres@127.0.0.1:5432/postgres``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from daemon.pg.admin.commands import main
from daemon.pg.store.base import Outlook
from daemon.pg.store.migrate import as_tuples, load_migrations
from daemon.pg.store.postgres import PostgresStore

ADMIN_DSN = os.environ.get("RUNBROKER_TEST_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def dsn_for(database: str) -> str:
    parts = urlsplit(ADMIN_DSN)
    return urlunsplit(parts._replace(path="/" + database))


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(ADMIN_DSN)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _make_template(name: str) -> None:
    await _admin(f'CREATE DATABASE "{name}"')
    store = PostgresStore(dsn_for(name))
    try:
        await store.migrator.migrate(as_tuples(load_migrations()))
    finally:
        await store.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def template_db() -> Iterator[str]:
    name = f"rb_tmpl_{uuid.uuid4().hex[:12]}"
    asyncio.run(_make_template(name))
    yield name
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@contextlib.asynccontextmanager
async def _throwaway_database(template: str | None = None) -> AsyncIterator[str]:
    """A new database (a copy of ``template``, or empty), dropped afterwards; its DSN."""
    name = f"t_{uuid.uuid4().hex}"
    copy = f' TEMPLATE "{template}"' if template else ""
    await _admin(f'CREATE DATABASE "{name}"{copy}')
    try:
        yield dsn_for(name)
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def db_dsn(template_db: str) -> AsyncIterator[str]:
    async with _throwaway_database(template_db) as dsn:
        yield dsn


@pytest.fixture
async def empty_dsn() -> AsyncIterator[str]:
    """A fresh database with no schema at all (for migration tests)."""
    async with _throwaway_database() as dsn:
        yield dsn


@pytest.fixture
async def store(db_dsn: str) -> AsyncIterator[PostgresStore]:
    pg = PostgresStore(db_dsn)
    try:
        yield pg
    finally:
        await pg.close()


@pytest.fixture
async def sql(db_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection to the test database, for setting up and checking rows."""
    conn = await asyncpg.connect(db_dsn)
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
def cli_env(db_dsn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test database as ``RUNBROKER_DATABASE_URL``, where ``runbroker jobs`` reads it."""
    monkeypatch.setenv("RUNBROKER_DATABASE_URL", db_dsn)
    return db_dsn


async def jobs(*argv: str) -> int:
    """``runbroker jobs ARGV``'s exit code, run in a thread: the command runs a loop of its own."""
    return await asyncio.to_thread(main, list(argv))


async def printed(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """What ``runbroker jobs ARGV`` alone printed, once it has exited 0."""
    capsys.readouterr()
    assert await jobs(*argv) == 0
    return capsys.readouterr().out


class CountingStore(PostgresStore):
    """Counts the runner's claim-loop turns, so a test knows the runner has looked."""

    turns = 0

    async def outlook(self) -> Outlook:
        outlook = await super().outlook()
        self.turns += 1
        return outlook
