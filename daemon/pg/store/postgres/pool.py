"""The PostgreSQL store's connections: a lazily connecting pool, and the errors it maps.

Connection trouble surfaces as ``StoreUnavailable`` and an unmigrated schema as
``StoreSchemaMissing``, so callers retry the one and report the other. The DSN is never logged
or put in an error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from daemon.pg.store.base import StoreSchemaMissing, StoreUnavailable
from daemon.pg.store.postgres.rows import json_or_marker

SCHEMA_NOT_MIGRATED = (
    "schema not migrated (the runbroker tables are missing): run `runbroker migrate`"
)
UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,  # admin shutdown, cannot connect now
    asyncpg.exceptions.InsufficientResourcesError,  # too many connections
    # Refused at connect time: the database is not created yet, or credentials are being
    # rotated. Both can heal without a restart, so they are outages, not crashes.
    asyncpg.exceptions.InvalidCatalogNameError,
    asyncpg.exceptions.InvalidAuthorizationSpecificationError,
)


def describe(exc: BaseException) -> str:
    """A short, DSN-free description of a connection error."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:200] if text else type(exc).__name__


async def _init_connection(conn: asyncpg.Connection) -> None:
    for name in ("json", "jsonb"):
        await conn.set_type_codec(
            name, encoder=json.dumps, decoder=json_or_marker, schema="pg_catalog"
        )


async def _keep_session(_conn: asyncpg.Connection) -> None:
    """The pool's reset: nothing to undo, which saves asyncpg's reset query, a round trip per use.

    The store never changes session state (no SET, no LISTEN on pooled connections, the migration
    lock released in ``finally``). asyncpg still rolls back an open transaction."""


def transaction_if(
    conn: asyncpg.Connection, needed: bool
) -> contextlib.AbstractAsyncContextManager[Any]:
    return conn.transaction() if needed else contextlib.nullcontext()


class PgPool:
    """The connections every part of the PostgreSQL store works through: ``PostgresStore``
    makes one and its parts share it."""

    def __init__(
        self,
        dsn: str,
        *,
        max_size: int,
        connect_timeout_s: float,
        command_timeout_s: float = 15.0,
        application_name: str = "runbroker",
    ) -> None:
        self._dsn = dsn
        self._server_settings = {"application_name": application_name}
        self._max_size = max_size
        self._command_timeout_s = command_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._pool: asyncpg.Pool | None = None

    def __repr__(self) -> str:  # never show the DSN
        return f"{type(self).__name__}(<dsn hidden>)"

    async def _get_pool(self) -> asyncpg.Pool:
        if self._pool is None:
            self._pool = await asyncpg.create_pool(
                self._dsn,
                min_size=0,
                max_size=self._max_size,
                init=_init_connection,
                reset=_keep_session,
                command_timeout=self._command_timeout_s,
                timeout=self._connect_timeout_s,
                server_settings=self._server_settings,
            )
        return self._pool

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection, with driver errors mapped onto the store's exceptions."""
        try:
            pool = await self._get_pool()
            async with pool.acquire(timeout=self._connect_timeout_s) as conn:
                yield conn
        except asyncpg.exceptions.UndefinedTableError:
            raise StoreSchemaMissing(SCHEMA_NOT_MIGRATED) from None
        except UNAVAILABLE as exc:
            raise StoreUnavailable(describe(exc)) from None

    async def connect(self) -> asyncpg.Connection:
        """A connection of its own, outside the pool (the LISTEN's)."""
        try:
            return await asyncpg.connect(
                self._dsn, timeout=self._connect_timeout_s, server_settings=self._server_settings
            )
        except UNAVAILABLE as exc:
            raise StoreUnavailable(describe(exc)) from None

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), timeout=2.0)
            except Exception:  # a pool that will not close cleanly is cut off
                pool.terminate()
